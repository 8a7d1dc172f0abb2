"""The keeper's parts: everything that keeps the experiment safe, frugal and honest.

fallback.py loads this package by its path (never through sys.path, so nothing the model writes and no
installed package of the same name can stand in for it). The model never writes here; seed.py never
imports it. Its rooms:

    settings, kinds, events, envfile, scrub   the base: paths and limits, the shared words, what happens, .env, secrets
    names, untrusted                         the base too: the model's names and files, read without trusting them
    iteration, decide, recovery              the policy: an iteration carried out, its decisions, a start's repair
    gateway/                                 the door to the model, the only holder of the key
    confined/                                the working copy, the confinement and the gate
    store/                                   snapshots, the record and the journal
    views/                                   the command line, the console, the pages, --status, the export
    experiments/                             a run replayed or forked
"""
