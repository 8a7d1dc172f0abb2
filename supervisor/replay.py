"""replay: the gateway's backend that answers a run again from its record, offline, iteration by iteration.

    SEED_REPLAY=FOLDER SEED_REPLAY_FROM=N python fallback.py --iterations K   (experiment.replay starts it so)

Chosen when SEED_REPLAY names a folder whose backups/record.sqlite holds a recorded run (a copy: the run's own
folder is never opened here); SEED_REPLAY_FROM is the first iteration of the start of the keeper it replays.
Each plan is the next iteration, served what its record holds: the models that answered it, the prompt budget its
seed was given, and its answers in order, byte for byte as received (Gemini's shape as it is, an
OpenAI-compatible server's turned into it). The requests the world refused (a server down, a limit spent) are
left out: the gateway's waits and retries are the moment's, not the run's. An iteration that got no answer
though it asked, or waited, or was cut short by a stop, is planned as a wait of no length (`skipped`). What the
seed sends is kept as sent, for the record of the replay; nothing goes to any network.
"""
import json
from pathlib import Path

from . import record
from .openai_compatible import as_gemini
from .outcomes import TAPE, Kind, Outcome, utc_now
from .settings import PROMPT_TOKENS

UNPACED = "1000000/1000000000/1000000"  # a replay waits for no minute and no day: GEMINI_LIMITS for each model
CUT_SHORT = ("stopped: interrupted", "stopped: the supervisor was killed")  # iterations a stop ended mid-way


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


def skipped(row, answers):
    """Whether a recorded iteration is planned as a wait of no length: it was cut short by a stop, or it got no
    answer though it asked the model, or it waited."""
    return row["outcome"].startswith(CUT_SHORT) or not answers and bool(row["requests"] or row["kind"] == "waiting")


def answers_of(root, number):
    """[(model, the answer as received)] of a recorded iteration: its requests that came back as answers."""
    found = []
    for request, model, *_ in record.requests_of(root, number):
        received = (record.exchange(root, request) or {}).get("answer") or b""
        try:
            body = json.loads(received)
        except ValueError:
            continue
        if isinstance(body, dict) and "error" not in body:
            found.append((model, received))
    return found


class Replay:
    """A recorded run's answers, served again in the order and to the iterations that got them."""
    local, key, key_name = False, "", "SEED_REPLAY"
    model_help = "A replay serves only the models its record names"

    def __init__(self, root, first):
        self.root, self.number = root, first - 1
        starts = [row for row in record.runs(root) if row["first"] == first]
        self.models = (starts[-1]["models"] if starts else None) or \
            list(dict.fromkeys(row["model"] for row in record.iterations(root, light=True) if row["model"]))
        self.limits = ",".join(f"{model}={UNPACED}" for model in self.models)
        self.now = {"models": [], "answers": [], "budget": None}

    def prepare(self, models):
        """Begin the next iteration: what its record holds; a wait of no length for one that is skipped."""
        self.number += 1
        row = (record.iterations(self.root, number=self.number) or [None])[0]
        served = answers_of(self.root, self.number) if row else []
        self.now = {"models": [model for model, _ in served], "answers": [answer for _, answer in served],
                    "budget": row and row["budget"]}
        if row and skipped(row, served):
            return {"wait_until": utc_now(), "why": f"replayed as a wait: the record's iteration {self.number} got "
                                                    f"no answer ({row['outcome']})"}
        return None

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
        """The iteration's next recorded answer (the request kept as sent), or an unusable answer past the last."""
        sent = json.dumps(body).encode()
        received = self.now["answers"].pop(0) if self.now["answers"] else b""
        if getattr(TAPE, "exchanges", None) is not None:
            TAPE.exchanges.append((sent, received))
        if not received:
            return Outcome(Kind.UNUSABLE, "unusable answer", f"the record holds no more answers for iteration "
                                                               f"{self.number}")
        answer = json.loads(received)
        return Outcome(Kind.ANSWER, "answer", body=as_gemini(answer) if "choices" in answer else answer)
