"""decide: what a failed run comes to, and what a dry spell does, decided on values alone: no file, no process, no
clock. iteration.py gathers what is known into a Case, asks, and carries the Decision out.

    decision = failed(case)                          # a Decision; its fate None: only the control can tell
    decision = failed(replace(case, same=True))      # the gate failed the same way at the start (the control)
    dry, stall = dry_spell(dry, counts, spell=10)     # the iterations without a landing, and what that does

A failure is the world's only with a cause observed outside the code (blame.py) and a control that fails the same
way without the new answer: for the seed's own failure before an answer, the state it started from (known good, or
the failure the loop already waits out, or a run that ended while the model still had its request); for the gate's,
the state the change started from, when that state passed every test. Everything else is the code's: a task, and a
walk-back when the seed itself is broken (it failed before an answer where no run has proven the state, or failed
the same way twice from one landed state).
"""
from dataclasses import dataclass
from enum import Enum

from .kinds import Failure, RunFailure

RECHECKED = {Failure.IMPORT, Failure.IMPORT_TIMEOUT, Failure.TESTS, Failure.TESTS_TIMEOUT, Failure.TESTS_UNREPORTED}
# the gate's failures that the state a change started from can show too: then the cause may be outside the code
ASKING = "the model still had the run's request when it ended (a --timeout shorter than its answer?)"


class Fate(Enum):
    """What a failed run comes to."""
    WORLD = "the world's, before an answer: keep the newest state, undo a walk-back it began, no task, wait"
    WAIT = "the world's, at the state the change started from: roll back to it, no task, wait"
    TASK = "the code's: roll back (or walk back when the seed is broken), and a task for the model"


@dataclass(frozen=True)
class Case:
    """What is known of a failed run when its fate is decided."""
    failure: Enum            # a RunFailure (the seed's run), a gate's Failure or a ScoreFailure (what it left)
    detail: str              # what the failure says
    mark: str                # the failure's mark (journal.failure_mark): the same failure has the same mark
    asked: bool              # the seed ran to its end having asked the model
    answered: bool           # the model's answer came back and is part of the run (the seed failed applying it)
    asking: bool             # the run ended (killed) while the model still had its request
    start: str               # the snapshot the run started from
    start_good: bool         # a run from it finished having asked the model: it is known good
    start_landed: bool       # it is a landing's
    fully_judged: bool       # it passed every test when it landed (or no gate landed it)
    world: tuple | None      # (failure's value, what it said) the loop waits out as the world's, if any
    repeat: tuple | None     # (start, mark) of the last failure of a run's own doing, if any
    cause: str               # what outside the code is observed changed or short now (blame.observed), or ''
    same: bool | None = None  # the control: whether the gate fails the same way at the start (None: not run)


@dataclass(frozen=True)
class Decision:
    """A Case's fate (None while only the control can tell), why the world is blamed (`cause`), whether to walk back
    past the start (`walk`), whether the task says the known-good state fails too with nothing changed around it
    (`unproven`), and what the loop remembers of it (`repeat`: the last failure of a run's own doing)."""
    fate: Fate | None
    cause: str = ""
    walk: bool = False
    unproven: bool = False
    repeat: tuple | None = None


def failed(case):
    """The Decision for a failed run."""
    own = isinstance(case.failure, RunFailure) and case.failure is not RunFailure.UNTRUSTED  # not what it left
    before_answer = own and not case.asked and not case.answered
    if before_answer and (case.start_good or (case.failure.value, case.detail) == case.world or case.asking):
        cause = ASKING if case.asking else case.cause  # the control: the state's own code, with no new answer
        if cause:
            return Decision(Fate.WORLD, cause=cause, repeat=case.repeat)
    mine = isinstance(case.failure, RunFailure)
    again = mine and case.repeat == (case.start, case.mark) and case.start_landed
    walk = before_answer and not case.start_good or again  # the seed broken: go back
    repeat = (case.start, case.mark) if mine else None
    control = not walk and case.failure in RECHECKED and case.fully_judged
    if control and case.same is None:
        return Decision(None, walk=walk, repeat=repeat)
    same = control and bool(case.same)
    if same and case.cause:
        return Decision(Fate.WAIT, cause=case.cause, walk=walk, repeat=repeat)
    unproven = own and case.start_good and not case.answered or same  # fails at the known-good state, nothing changed
    return Decision(Fate.TASK, walk=walk, unproven=unproven, repeat=repeat)


class Stall(Enum):
    """What a dry spell does at its count."""
    SAID = "a task says nothing has landed"
    WALK_BACK = "a task, and one known-good state walked back"


def dry_spell(dry, counts, spell):
    """(the new count of iterations in a row without a landing, the Stall at it or None): `counts` is None after a
    landing (which ends the spell), True for an iteration that counts (it failed, or asked the model and changed
    nothing), False for one that does not (a wait, a stop). Every `spell` iterations say so; twice that walks back
    and begins again."""
    if counts is None:
        return 0, None
    if not counts:
        return dry, None
    dry += 1
    if dry % spell:
        return dry, None
    return (0, Stall.WALK_BACK) if dry >= 2 * spell else (dry, Stall.SAID)
