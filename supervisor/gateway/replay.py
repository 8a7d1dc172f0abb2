"""replay: the gateway's backend that answers a run again from its record, offline, iteration by iteration.

    SEED_REPLAY=FOLDER SEED_REPLAY_FROM=N python fallback.py --iterations K   (experiment.replay starts it so)

Chosen when SEED_REPLAY names a folder whose backups/record.sqlite holds a recorded run (a copy: the run's own
folder is never opened here); SEED_REPLAY_FROM is the first iteration of the start of the keeper it replays.
Each plan is the next iteration, given what its record holds: the log as it was then (iteration_log.md made what
the recorded run's was, from its first start's log and its rows, so the seed's prompt shows the recorded times,
not the replay's), the models that answered it, the prompt budget its seed was given, and its answers in order,
byte for byte as received (Gemini's shape as it is, an OpenAI-compatible server's turned into it). The requests
the world refused (a server down, a limit spent) are left out: the gateway's waits and retries are the moment's,
not the run's. An iteration that got no answer though it asked, or that a stop ended (`skipped`), is answered
with a wait of no length: its seed runs and gets nothing. What the seed sends is kept as sent, for the replay's
own record; nothing goes to any network.
"""
import json
from collections import deque
from pathlib import Path

from ..store import record
from ..scrub import redact
from ..store.journal import LOG_HEAD, section_of
from .openai_compatible import as_chat, as_gemini
from .outcomes import TAPE, Kind, Reading
from ..settings import LOG, PROMPT_TOKENS, write_atomically

ANSWERS = ("answer", "unusable answer")  # what a request came back as, when it came back with an answer
LOG_ROWS = 300  # sections of the log given back at most: more than its last LOG_SHOWN bytes hold
UNPACED = "1000000/1000000000/1000000"  # a replay waits for no minute and no day: GEMINI_LIMITS for each model


def chosen_by(environ):
    """The replay serves when SEED_REPLAY names a recorded run."""
    return bool(environ.get("SEED_REPLAY", "").strip())


def from_env(environ):
    """The backend as SEED_REPLAY and SEED_REPLAY_FROM describe it; a ValueError says what is wrong."""
    root = Path(environ["SEED_REPLAY"].strip())
    first = environ.get("SEED_REPLAY_FROM", "1").strip()
    if not record.path_of(root).is_file() or not first.isdigit():
        raise ValueError(f"SEED_REPLAY={str(root)!r} holds no record, or SEED_REPLAY_FROM={first!r} is no number")
    return Replay(root, int(first))


def chosen_models(environ):
    return from_env(environ).models


def show_models(environ):
    print("\n".join(chosen_models(environ)))


def skipped(row, answered):
    """Whether a recorded iteration is answered with a wait: a stop ended it, or it got no answer (`answered`: its
    requests that came back with one) though it asked the model, or it waited."""
    return row["kind"] == "stopped" or not answered and bool(row["requests"] or row["kind"] == "waiting")


def answered(root, number):
    """[(request id, model)] of a recorded iteration's requests that came back with an answer, usable or not."""
    return [(request, model) for request, model, kind, *_ in record.requests_of(root, number) if kind in ANSWERS]


class Replay:
    """A recorded run's answers, served again in the order and to the iterations that got them."""
    local, key, key_name = False, "", "SEED_REPLAY"
    model_help = "A replay serves only the models its record names"

    def __init__(self, root, first):
        self.root, self.number, runs = root, first - 1, record.runs(root)
        starts = [row for row in runs if row["first"] == first]
        self.first_log = runs[0]["log"] if runs and isinstance(runs[0]["log"], str) else None
        self.answer_format = ((starts[-1] if starts else {}).get("settings") or {}).get("answer format", "json")
        self.chat = bool(starts) and starts[-1]["backend"] == "OpenAICompatible"  # its requests were chats
        self.models = (starts[-1]["models"] if starts else None) or \
            list(dict.fromkeys(row["model"] for row in record.iterations(root, light=True) if row["model"]))
        self.limits = ",".join(f"{model}={UNPACED}" for model in self.models)
        self.now = {"models": [], "answers": [], "budget": None, "skipped": False, "row": None}
        self.decoded, self.sections = {}, None  # the prompts decoded last in each chain; the log's last sections

    def prepare(self, models):
        """Begin the next iteration: the log as the record had it then, and what the record holds to serve it."""
        self.number += 1
        write_atomically(LOG, self.log_before().encode("utf-8", "surrogateescape"))
        row = (record.iterations(self.root, number=self.number) or [None])[0]
        served = answered(self.root, self.number) if row else []
        self.now = {"models": [model for _, model in served], "answers": [request for request, _ in served],
                    "budget": row and row["budget"], "skipped": bool(row) and skipped(row, served), "row": row}
        return None

    def log_before(self):
        """iteration_log.md as the recorded run had it when this iteration began, at least its last LOG_SHOWN bytes:
        the first start's log, then the sections of the iterations before, rendered from their rows (the last ones
        read once, then one a plan)."""
        if self.sections is None:
            rows = record.iterations(self.root, until=self.number - 1, last=LOG_ROWS)
            self.sections = deque((redact(section_of(row)) for row in rows), maxlen=LOG_ROWS)
        elif self.now["row"]:
            self.sections.append(redact(section_of(self.now["row"])))
        whole = len(self.sections) < LOG_ROWS  # every section since the first start: its log comes first
        return ((self.first_log or LOG_HEAD) if whole else "") + "".join(self.sections)

    def room(self, model, facts):
        """The budget the recorded seed was given (a record from before budgets were kept: the largest prompt)."""
        return self.now["budget"] or PROMPT_TOKENS

    def hindrance(self, model, facts):
        if self.now["models"] and model not in self.now["models"]:
            return f"{model}: the record's iteration {self.number} was answered by {self.now['models'][0]}"
        return None

    def make_room(self, model, tokens):
        return "a replay's budgets are the record's"

    def ask(self, model, body, facts):
        """The iteration's next recorded answer (the request kept as sent); a wait of no length for one skipped; an
        unusable answer past the last."""
        if self.now["skipped"]:
            return Reading(Kind.RETRY_LATER, "replayed wait", f"the record's iteration {self.number} got no answer",
                           delay=0.0)
        request = self.now["answers"].pop(0) if self.now["answers"] else None
        found = record.exchange(self.root, request, self.decoded) if request else None
        received = (found or {}).get("answer") or b""
        if getattr(TAPE, "exchanges", None) is not None:  # kept in the shape the recorded run sent it
            TAPE.exchanges.append((json.dumps(as_chat(body, model, 0, facts) if self.chat else body).encode(), received))
        try:
            answer = json.loads(received)
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            return Reading(Kind.UNUSABLE, "unusable answer", f"the record holds no answer to serve here (iteration "
                                                               f"{self.number})" if request is None else
                           "the recorded answer is not a JSON object")
        return Reading(Kind.ANSWER, "answer", body=as_gemini(answer) if "choices" in answer else answer)
