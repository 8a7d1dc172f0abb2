"""kinds: the words every room shares for an iteration: what it came to, what it failed on, the gate's verdict, the
run's Account and the Result. It imports nothing of the keeper, so the record, its views and the policy read one
vocabulary.

    Result(Outcome.ROLLED_BACK, "tests failed", failure=Failure.TESTS, verdict=Verdict(Failure.TESTS, ...))
    Verdict().failure is None          # a gate's pass
"""
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum

TOKEN_FIELDS = {"prompt": "promptTokenCount", "output": "candidatesTokenCount", "thinking": "thoughtsTokenCount"}
# the tokens a request is counted in, and the field of Gemini's usageMetadata each is read from
SAME_FILES = "the same files again"  # what an answer came to whose files were as they were, or as last rolled
# back (the gateway's tally of a model's answers counts it as it is)


class Outcome(Enum):
    """What an iteration came to; its row keeps the value, and every view renders from it."""
    LANDED = "landed"
    NO_CHANGE = "no change"
    ROLLED_BACK = "rolled back"
    TAMPERED = "tampered"  # a detected attempt to forge the gate's verdict, the ratchet or the score: never landed
    WAITING = "waiting"
    STOPPED = "stopped"
    OTHER = "other"  # a section of a log from before the record whose heading names no outcome it knows


class Failure(str, Enum):
    """What a gate can fail on (the start of the reason the log and the task give)."""
    COMPILE = "does not compile"
    IMPORT = "import check failed"
    IMPORT_TIMEOUT = "import check timed out"
    TESTS = "tests failed"
    TESTS_TIMEOUT = "tests timed out"
    TESTS_UNREPORTED = "tests did not report"
    TESTS_REMOVED = "tests removed"
    TESTS_EMPTY = "a new test file tests nothing"  # a placeholder: it passes, and it checks nothing
    TAKEN = "a module takes a name Python has"  # json.py, signal.py, requests/: it would stand in for the real one
    TAMPERED = "tampered"  # the code reached for the gate, the ratchet or the score instead of passing them
    UNTRUSTED = "the run left what the keeper does not take"


class RunFailure(str, Enum):
    """What a run of the seed can fail on by its own doing (the gate's failures are gate.Failure)."""
    TIMED_OUT = "seed.py timed out and was killed with its children"
    KILLED = "seed.py was killed"
    CRASHED = "seed.py crashed"
    STALLED = "seed.py exited 0 without asking the model or changing anything (a stall)"
    REFUSED = "the gateway refused seed.py's request"
    UNTRUSTED = "the run left what the keeper does not take"


class ScoreFailure(str, Enum):
    """What the person's score can fail a change on (only under SEED_RATCHET=score)."""
    FELL = "score fell"
    BROKEN = "evaluate.py failed on this change, and not at the last known-good state"


@dataclass(frozen=True)
class Verdict:
    """A gate's judgement: `failure` None when the candidate passes, else its kind, what it found (`detail`) and the
    output that shows it; the model's tests passing per test file (test functions, or None when none is known);
    which ran (EVERY_TEST, or how many of the test files; None when none ran); the tests that failed (pytest's ids)."""
    failure: Failure | None = None
    detail: str = ""
    output: str = ""
    passing: dict | None = None
    tests_ran: str | None = None
    failed: tuple = ()

    @property
    def why(self):
        """The failure as people read it: its kind, then what it says."""
        return f"{self.failure.value}: {self.detail}" if self.detail else self.failure.value


@dataclass(frozen=True)
class Account:
    """What a run of the seed came to in its own words and the gateway's: how the seed said it ended (`outcome`:
    "applied", "rejected" when its own compile check put the answer back, or "" when it left no record) and why,
    what it refused to write (with what the gateway dropped of the answer), and the gateway's account of its
    requests: the model, how many, their tokens, each call as the record keeps it, what was salvaged of a cut answer,
    whether an answer came, the problem to act on (the gateway's outcomes.Problem, or None), a request still under
    way; and from the answer itself, its tasks and the open tasks it finished."""
    outcome: str = ""
    reason: str = ""
    refused: tuple = ()
    model: str | None = None
    requests: int = 0
    tokens: dict = field(default_factory=dict)
    calls: tuple = ()
    salvaged: str = ""
    answered: bool = False
    problem: object = None
    asking: bool = False
    tasks: tuple = ()
    done: tuple = ()


@dataclass(frozen=True)
class Result:
    """What one iteration came to, a value: the loop reads it, the record writes it once, the views render that
    row. What is learned after it is built makes a new one (dataclasses.replace)."""
    outcome: Outcome
    summary: str = ""              # what the headline says after the outcome: the failure, why nothing changed
    reason: str = ""               # why, in one line, with what to do about it where there is something to do
    until: datetime | None = None  # when the wait an iteration ended with is over
    failure: Enum | None = None    # the failure (a gate.Failure or a RunFailure) rolled back, or waited out
    output: str = ""               # the output that shows it
    start: str | None = None       # the snapshot the run started from
    after: str | None = None       # the snapshot a landing made
    restored: str | None = None    # the snapshot the folder went back to
    kept: str | None = None        # the snapshot keeping a failed change
    stuck: bool = False            # no known-good state is left to walk back to
    said: Account = field(default_factory=Account)  # what the seed said it did, with the gateway's account
    changes: list = field(default_factory=list)  # [(path, kind, lines added, lines removed)] of the candidate
    landed: int = 0                # files a landing wrote
    not_landed: list = field(default_factory=list)  # the keeper's paths the run wrote, never landed
    outside: list = field(default_factory=list)     # paths not landed: a link out of the folder, or a folder, there
    refusals: list = field(default_factory=list)    # what the system refused the run (confinement at work)
    verdict: Verdict | None = None
    score: dict | None = None      # what evaluate.py gave: {"score": n, other names: n}
    gate_seconds: float | None = None
    stalled: str = ""              # the dry spell, when it is said
    confinement: str = ""
    waste: str | None = None       # why the model's answer was spent for nothing, for the ledger
    asked: bool = True             # False: the model was not asked and nothing ran (no iteration to record)
    budget: int | None = None      # the prompt budget the seed was given (a replay gives it the same)

    def headline(self, moment=lambda until: f"{until:%Y-%m-%d %H:%M} UTC"):
        """The outcome as people read it: its kind, until when (as `moment` writes a time), then what it says."""
        until = f" until {moment(self.until)}" if self.until and self.outcome is Outcome.WAITING else ""
        return f"{self.outcome.value}{until}{': ' + self.summary if self.summary else ''}"
