"""models: what is known about each Gemini model: its free-tier limits and the features it accepts.

    known = Models(Path("backups/models.json"), os.environ.get("GEMINI_LIMITS", ""))
    known.get("gemma-4-31b-it")
    # {"rpm": 15, "tpm": 16000, "rpd": 1500, "json_mode": False, "system_instruction": True, "json_schema": True}
    known.learn("gemini-3.5-flash", tpm=30000)   # what a 429 or a 400 just said, kept in the memory file

Three layers, each correcting the one before:
1. TABLE below: the free tier as 429 bodies and AI Studio showed it through October 2026. Google no
   longer publishes these figures, so they go stale. A model not in it gets the CAUTIOUS row; a model on
   a server of the user's own (`Models(..., local=True)`) gets the LOCAL row, whatever its name.
2. GEMINI_LIMITS, the user's override: comma-separated `model=RPM/TPM/RPD` (requests a minute, input
   tokens a minute, requests a day), for example
       GEMINI_LIMITS="gemma-4-31b-it=30/16000/1500,gemini-3.5-flash=5/250000/20"
   A figure left empty keeps the table's: `gemini-3.5-flash=//40` changes only the day.
3. What the API said at run time (a 429's quota figure, a 400 refusing a feature), remembered in the
   memory file across runs until the user changes that model's GEMINI_LIMITS entry.

GEMINI_RPM and GEMINI_TPM are gone: a single figure for every model fits no list that mixes Flash (5 a
minute, 250,000 tokens) with Gemma (15 a minute, 16,000 tokens). GEMINI_LIMITS says it per model.
Not thread-safe: the gateway calls it under its lock.
"""
import math
import re
from pathlib import Path

from ..settings import load_json, save_json

# --- settings ---------------------------------------------------------------------------------
DEFAULT_MODELS = "gemini-3.5-flash,gemini-3.5-flash-lite,gemma-4-26b-a4b-it"  # a key made in late 2026 can call these
FIGURES = ("rpm", "tpm", "rpd")  # requests a minute, input tokens a minute, requests a day: GEMINI_LIMITS's order
FEATURES = ("json_mode", "system_instruction", "json_schema")  # strict JSON mode (responseMimeType + responseSchema
# enforced); systemInstruction accepted (else folded into the first user text); on a server of the user's own,
# OpenAI's response_format json_schema accepted (else json_object with the schema, which llama-cpp-python takes)
# The free tier as of November 2026 (perishable). Gemma 4 accepts JSON mode but does not enforce it (its answers
# come fenced or with prose around them), so it is asked as a model without it.
#                              rpm      tpm   rpd  json_mode system_instruction json_schema
TABLE = {
    "gemini-3.5-flash":      (5, 250_000, 20, True, True, True),
    "gemini-3.6-flash":      (5, 250_000, 20, True, True, True),
    "gemini-3.7-flash":      (5, 250_000, 20, True, True, True),
    "gemini-3.8-flash":      (5, 250_000, 20, True, True, True),
    "gemini-3.5-flash-lite": (15, 250_000, 500, True, True, True),
    "gemini-3.1-flash-lite": (15, 250_000, 500, True, True, True),   # shuts down 2027-05-07
    "gemini-2.5-flash-lite": (10, 250_000, 20, True, True, True),    # 404 for keys made since about August 2026
    "gemma-4-31b-it":        (15, 16_000, 1_500, False, True, True),  # slow (20 to 57 s), often 500/503
    "gemma-4-26b-a4b-it":    (15, 16_000, 1_500, False, True, True),
}
# A model not in TABLE: the table's lowest figures (raise them with GEMINI_LIMITS); its features are assumed
# until it refuses one, which costs one request, once.
CAUTIOUS = (5, 16_000, 20, True, True, True)
# A model on a server of the user's own (Ollama, llama.cpp, LM Studio, vLLM): no daily quota and no per-minute
# limits, so nothing is paced; its features are assumed until it refuses one. Its prompt budget comes from its
# context length, which the server says (openai_compatible.py).
LOCAL = (math.inf, math.inf, math.inf, True, True, True)


class Models:
    """Each model's figures and features: TABLE, then GEMINI_LIMITS, then what the API said."""

    def __init__(self, memory, limits="", local=False):
        self.memory = Path(memory)
        self.settings = read_limits(limits)
        self.learned = self.recall()
        self.table, self.default = ({}, LOCAL) if local else (TABLE, CAUTIOUS)

    def get(self, model):
        """{"rpm", "tpm", "rpd", "json_mode", "system_instruction"} as best known now."""
        facts = dict(zip(FIGURES + FEATURES, self.table.get(model, self.default)))
        facts.update(figures_of(self.settings.get(model, "")))
        facts.update(self.learned.get(model, {}).get("learned", {}))
        return facts

    def learn(self, model, **facts):
        """Keep what the API just said about a model; True when it was news."""
        news = {name: value for name, value in facts.items() if self.get(model).get(name) != value}
        if news:
            entry = self.learned.setdefault(model, {"setting": self.settings.get(model, ""), "learned": {}})
            entry["learned"].update(news)
            save_json(self.memory, self.learned)
        return bool(news)

    def recall(self):
        """The memory file, without what was learned under a GEMINI_LIMITS entry that has changed since."""
        saved = load_json(self.memory)
        kept = {model: entry for model, entry in saved.items() if isinstance(entry, dict)
                and isinstance(entry.get("learned"), dict) and entry.get("setting") == self.settings.get(model, "")}
        if kept != saved:
            save_json(self.memory, kept)
        return kept


def read_limits(text):
    """GEMINI_LIMITS as {model: "RPM/TPM/RPD"}; a ValueError saying how to write it for an entry that is not one."""
    settings = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        model, _, setting = (side.strip() for side in entry.partition("="))
        if not model or not re.fullmatch(r"([1-9]\d*)?/([1-9]\d*)?/([1-9]\d*)?", setting):
            raise ValueError(f"GEMINI_LIMITS: {entry!r} is not model=requests a minute/input tokens a minute/"
                             "requests a day, e.g. gemma-4-31b-it=30/16000/1500 (leave a figure empty to keep it)")
        settings[model] = setting
    return settings


def figures_of(setting):
    """The figures a GEMINI_LIMITS entry sets (an empty one keeps the table's)."""
    return {name: int(value) for name, value in zip(FIGURES, setting.split("/")) if value}
