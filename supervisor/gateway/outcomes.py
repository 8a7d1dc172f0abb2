"""outcomes: the vocabulary between the gateway and its backends, the seed and the loop.

    response = fetch_bounded("POST", url, body, headers, timeout)   # requests' Response, its body read to a cap
    Reading(Kind.RETRY_LATER, "server error 503", why="answered 503: Loading model")
    raise stopping("the server refused the key ...")                # a Reply: an error for the seed, in Gemini's
                                                                    # shape, and the problem it means for the run
    json_of(response); names("a, b")                                # a body as JSON; the models a setting lists
Each backend (gemini.py, openai_compatible.py) reads its server's answers and errors, whatever their status,
into one Reading; the gateway acts on its Kind and never reads a wire format itself. What the seed gets
instead of an answer is a Reply: wait (until when), stop (why), or unusable. What the loop gets for its next
run is a Plan: a run, a wait or a stop; and of a run that ended, a Report.
"""
import math
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum

import requests

MAX_ANSWER = 8 * 2 ** 20  # bytes read of any answer from upstream (a whole answer of 65,536 tokens is under 1 MB)
TAPE = threading.local()  # .exchanges: a list while the gateway keeps this thread's requests as (sent, received);
                          # .over: the event set when the run this thread asks for ends (a streamed answer stops)


class Kind(Enum):
    """What an upstream answer means for the gateway."""
    ANSWER = "answer"
    RETRY_LATER = "retry later"              # busy, out of reach, or a per-minute limit: `delay` seconds, or backoff
    REFUSED_FEATURE = "refused feature"      # `feature` (models.FEATURES): learn it, ask again without it
    MODEL_NOT_FOUND = "model not found"
    KEY_REFUSED = "key refused"              # or anything else about the key's account: `why` says what to fix
    CONTEXT_TOO_SMALL = "context too small"  # the prompt did not fit: a stop, or `replan` with what was learned
    QUOTA_SPENT = "quota spent"              # the model's day
    UNUSABLE = "unusable"                    # an answer or a refusal that asking again cannot mend


@dataclass
class Reading:
    """A backend's reading of one upstream response."""
    kind: Kind
    label: str                  # the ledger's name for it ("answer", "server error 503", "429 per day", ...)
    why: str = ""               # one line, as the person should read it
    body: dict = None           # ANSWER: the answer in Gemini's shape
    delay: float = None         # RETRY_LATER: seconds the server asked to wait (None: back off)
    feature: str = None         # REFUSED_FEATURE
    learned: dict = field(default_factory=dict)  # figures the server stated (rpm, tpm, rpd)
    status: int = 502           # UNUSABLE: the status the seed gets
    replan: bool = False        # CONTEXT_TOO_SMALL: the context was just learned; the next run fits it


class TooLarge(requests.RequestException):
    """An answer over MAX_ANSWER bytes: read no further."""


def fetch_bounded(method, url, body, headers, timeout, read=None):
    """requests' Response with its body read by `read` (default: whole, to at most MAX_ANSWER bytes; TooLarge past
    that). The connection is closed when it returns: a server still generating sees its client gone."""
    with requests.request(method, url, json=body, headers=headers, timeout=timeout, stream=True,
                          allow_redirects=False) as response:
        data = (read or read_whole)(response)
        response._content = data  # what .json() and .text read, as if requests had read it all
        if getattr(TAPE, "exchanges", None) is not None:  # the bytes as they went and came, for the run's record
            TAPE.exchanges.append((response.request.body or b"", data))
        return response


def read_whole(response):
    """A response's body, to at most MAX_ANSWER bytes."""
    data = response.raw.read(MAX_ANSWER + 1, decode_content=True)
    if len(data) > MAX_ANSWER:
        raise TooLarge(f"an answer over {MAX_ANSWER // 2 ** 20} MB")
    return data


# --- what the seed gets instead of an answer ----------------------------------------------------
class Trouble(str, Enum):
    """What a problem of a run means for the loop."""
    STOP = "stop"          # nothing will serve before a person fixes something: the loop stops
    WAIT = "wait"          # a quota or a server: the loop waits until `until`
    UNUSABLE = "unusable"  # this run's answer cannot be used: the next run asks again


@dataclass(frozen=True)
class Problem:
    """The problem a Reply means for the run: its kind, why in one line, and until when for a wait."""
    kind: Trouble
    why: str
    until: datetime | None = None


class Reply(Exception):
    """An error for the seed in Gemini's shape, and the problem it means for the run (None: the seed's own)."""

    def __init__(self, status, name, message, problem=None, retry_at=None):
        super().__init__(message)
        self.status, self.name, self.message, self.problem, self.retry_at = status, name, message, problem, retry_at

    def body(self):
        error = {"code": self.status, "status": self.name, "message": self.message}
        if self.retry_at:
            seconds = max(0, math.ceil((self.retry_at - utc_now()).total_seconds()))
            error["details"] = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{seconds}s"}]
        return {"error": error}


class Retry(Exception):
    """Ask the same model again: after backoff ("server"), after `delay` ("minute"), or at once ("adapted")."""

    def __init__(self, kind, why, delay=None):
        super().__init__(why)
        self.kind, self.why, self.delay = kind, why, delay


@dataclass(frozen=True)
class Report:
    """What a seed run did, as close_run tells the loop: the model asked last, its requests and their tokens, each
    call as the record keeps it, what the gateway dropped of the answer and salvaged of a cut one, whether an answer
    came, the problem to act on, the answer's own tasks and the numbers of the open tasks it says it finished, and
    whether a request was still under way when the run ended (`asking`)."""
    model: str | None = None
    requests: int = 0
    calls: tuple = ()
    tokens: dict = field(default_factory=dict)
    refused: tuple = ()
    salvaged: str = ""
    answered: bool = False
    problem: Problem | None = None
    tasks: tuple = ()
    done: tuple = ()
    asking: bool = False


@dataclass(frozen=True)
class Plan:
    """What the gateway decides for the next seed run: a run (its `token`, `model` and prompt `budget`), or a wait
    (`wait_until`, `why`), or a stop (`stop` says why; `steering` when only the person's goal and open tasks keep
    every model out)."""
    token: str | None = None
    model: str | None = None
    budget: int = 0
    wait_until: datetime | None = None
    why: str = ""
    stop: str | None = None
    steering: bool = False


class MovedOn(Exception):
    """This model cannot answer before its reset (its day spent, or gone): the next one may."""


def waiting(until, why, status=429):
    return Reply(status, "RESOURCE_EXHAUSTED" if status == 429 else "UNAVAILABLE", why,
                 Problem(Trouble.WAIT, why, until), until)


def stopping(why):
    return Reply(403, "PERMISSION_DENIED", why, Problem(Trouble.STOP, why))


def unusable(why, status=502, name="INTERNAL"):
    return Reply(status, name or "INTERNAL", why, Problem(Trouble.UNUSABLE, why))


def refusal(plan):
    """A plan that says wait or stop, as a Reply for the seed."""
    return stopping(plan.stop) if plan.stop is not None else waiting(plan.wait_until, plan.why)


def one_line(text):
    return " ".join(str(text).split())


def names(text):
    """The names a setting lists, separated by commas (GEMINI_MODEL, OPENAI_MODEL)."""
    return [name.strip() for name in text.split(",") if name.strip()]


def json_of(response, kinds=dict):
    """The response's body as JSON when it is of `kinds` (a JSON object by default), else None."""
    try:
        value = response.json()
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, kinds) else None


def utc_now():
    return datetime.now(timezone.utc)
