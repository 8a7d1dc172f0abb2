"""gateway: the door between the seed and a model, and the only holder of the key.

gateway (the run's plan, the quotas, the pacing, each model's quirks) served on loopback by door; backends picks
Gemini (gemini), a server of one's own (openai_compatible, streaming) or a record's answers (replay); answers and
formats read and shape what a model answers; outcomes reads one upstream reply; models keeps what each model may be
asked, and the store's ledger what was asked of it. It adapts the wire, never the content.
"""
