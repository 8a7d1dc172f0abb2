"""iteration: what an iteration comes to (a kinds.Result), carried out, and the loop's memory; the decisions it
carries out for a failed run and a dry spell are decide.py's, made on values alone.

    result = run_iteration(number, index, timeout, memory, gateway)   # ask, run the seed, judge, land or not

The gateway chooses the model and the budget (or says until when to wait, or why never); the folder is snapshotted
and the working copy brought in step; the seed runs there, confined; what it left is captured and judged (the gate's
Verdict, then the person's score). Then, in one place:
- a change that passes lands, and its answer's finished tasks are ticked;
- a change that fails never reaches the folder: it is kept in backups/, becomes a task, and the loop goes on from the
  state the run started from; a seed that fails where it never ran well walks back to the newest known-good state,
  and so does the same failure of a run's own doing, twice in a row from one landed state;
- a fault outside the code, proven (blame.py: a control, the known-good state without the new answer failing the same
  way now, and a cause observed outside the code) never walks back landed work and never becomes a task: the loop
  waits, a little longer each time; the same failure there with nothing observed outside is the code's, a task
  (a test that depends on the date); an answer the seed crashed while applying is that answer's failure;
- DRY_SPELL iterations in a row that land nothing become a task; twice that walks back one known-good state.
"""
import json
import re
import signal
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone

from .confined import blame, evaluate, gate, terrarium, zygote
from . import decide
from .store import journal, snapshots as snap
from .gateway.answers import CHARS_PER_TOKEN
from .gateway.outcomes import Trouble
from .events import phase, tell
from .scrub import redact, secret_in
from .kinds import SAME_FILES, Account, Failure, Outcome, Result, RunFailure, ScoreFailure
from .settings import (DRY_SPELL, EX_CONFIG, EX_UNAVAILABLE, FAULT_PAUSE, FULL_GATE_EVERY, NOT_YOURS, SETTLING,
                       SUSPICION, UNDER_WAY, load_json, save_json, write_atomically)
from .untrusted import Untrusted

SEED_KEEPER = " ".join(NOT_YOURS)  # not the seed's to write, besides any name that starts with "."


SPACING = "its files differ from the codebase's only in blank lines and spaces (at line ends in Python, at the end in others)"
SHAPES = {RunFailure.KILLED: "{} by {}", RunFailure.CRASHED: "{} ({})", ScoreFailure.FELL: "{} from {}"}
# how a failure and what it says read together (else "kind: what it says")


@dataclass
class Run:
    """What a run of the seed left: its exit code and output, what it said with the gateway's account (said), and
    the candidate it left in the working copy (files, changes), or why that could not be taken (untrusted)."""
    code: int | None
    output: str
    said: Account
    files: dict | None = None
    changes: list = field(default_factory=list)
    not_landed: list = field(default_factory=list)
    untrusted: str = ""
    spacing: bool = False  # its changes were blank lines and spaces at line ends only: taken as none
    world: dict | None = None  # what outside the code it started with (blame.world)

    @property
    def asked(self):
        """Whether the seed ran to its end having asked the model."""
        return self.code == 0 and self.said.requests > 0


@dataclass
class Memory:
    """What the loop remembers between iterations: the snapshots walked back from, the world's failure it waits out,
    the walk-back that failure may yet undo, the last failure of a run's own doing, the pause, the dry spell, and
    the facts the seed is offered on the last answer rolled back (`facts`)."""
    bad: set = field(default_factory=set)
    world: tuple | None = None      # (failure's value, what it said) blamed on the world
    suspect: dict | None = None     # {"failure", "mark", "home": the snapshot a walk-back left}
    repeat: tuple | None = None     # (start, mark) of the last failure of a run's own doing
    pause: float = 0
    dry: int = 0
    interrupted: Account | None = None  # what a run Ctrl+C stopped came to, with the gateway's account
    cut_short: bool = False          # the last iteration could not write all it meant to: recover() before the next
    rolled_back: tuple | None = None  # (why, the output's telling lines, [(path, text)]) of the last answer rolled back
    again: int = 0                   # answers in a row that were the same files again
    full: str | None = None          # what the keeper could not write at the last iteration (a full disk), if any
    full_pause: float = 0            # and how long it waited then: the same again waits twice as long

    @classmethod
    def kept(cls, index):
        """The world suspected and the walk-back it may undo, as the last run left them in backups/: a restart
        between a walk-back and the failure that shows it was the world's must not keep the walk-back."""
        saved, snapshots = load_json(SUSPICION), {entry["id"]: entry for entry in index["snapshots"]}
        suspect = saved.get("suspect") if isinstance(saved.get("suspect"), dict) else {}
        home = snapshots.get(suspect.get("home")) if isinstance(suspect.get("home"), str) else None
        world = saved.get("world")
        whole = home and isinstance(suspect.get("failure"), str) and isinstance(suspect.get("mark"), str)
        return cls(world=tuple(world) if isinstance(world, list) and len(world) == 2 else None,
                   suspect={**suspect, "home": home} if whole else None)

    def recall(self, why=None, lines=(), files=()):
        """Remember the answer the gate rolled back last (why, the output's telling lines, [(path, text)] of its
        files); with no `why`, forget it (a change landed). Whether its files are those of the answer remembered
        before: the model sent back what it was shown, unmended."""
        same = bool(why and self.rolled_back and sorted(files) == sorted(self.rolled_back[2]))
        self.rolled_back = (why, list(lines), list(files)) if why else None
        return same

    def facts(self):
        """What the seed is offered to read (.seed/rolled_back.json in the working copy), or None: the last answer
        rolled back (why, the lines of output that show it, its files whole) and how many answers in a row were
        the same files again. Facts only: what to show the model of them, and how to ask, is the seed's. Held to the
        rule of the seed's requests: its files and lines are left out when they carry a secret in any form."""
        if not self.rolled_back and not self.again:
            return None
        why, lines, files = self.rolled_back or (None, [], [])
        facts = {"why": why, "lines": lines, "files": [{"path": path, "content": text} for path, text in files],
                 "again": self.again}
        return {"why": why, "lines": [], "files": [], "again": self.again} if secret_in(json.dumps(facts)) else facts

    def keep(self):
        suspect = self.suspect and {**self.suspect, "home": self.suspect["home"]["id"]}
        save_json(SUSPICION, {"world": self.world, "suspect": suspect})


# --- one iteration ----------------------------------------------------------------------------
def run_iteration(number, index, timeout, memory, gateway, confinement=""):
    """Ask the gateway for a model, run the seed once, judge what it left, land it or not: the Result."""
    plan = gateway.open_run(journal.steering_size())
    if plan.token is None:
        return unasked(plan, gateway)
    phase("snapshot of the codebase", restart=True)
    start = snap.snapshot(index, "before" if index["snapshots"] else "genesis", number)
    terrarium.sync_work(snap.files_of(start), memory.facts())
    shown = journal.open_tasks()  # as the seed numbers them: the answer's "done" counts in these
    write_atomically(UNDER_WAY, json.dumps({"iteration": number, "start": start["id"]}))
    phase("running seed.py")
    around = blame.world()  # before the run: what a state that runs well now ran well with
    try:
        code, output = run_seed(timeout, gateway, plan)
        run = replace(take(code, output, gateway.close_run(plan.token), shown, start), world=around)
        result = settle(number, index, start, run, memory)
    except KeyboardInterrupt:
        memory.interrupted = journal.account(journal.read_record(b""), gateway.close_run(plan.token, linger=0),
                                             shown)
        terrarium.set_aside(index, start, number)
        raise
    finally:
        UNDER_WAY.unlink(missing_ok=True)
    result = replace(result, confinement=confinement, refusals=refusals(output), budget=plan.budget)
    if run.said.answered and result.outcome is not Outcome.LANDED:
        result = replace(result, waste=waste_of(result))  # kept with the row's requests
    repeated = False
    if result.outcome is Outcome.LANDED or isinstance(result.failure, Failure) and run.said.answered:
        repeated = memory.recall(*mendable(run, result))
    if run.said.model and result.outcome in (Outcome.LANDED, Outcome.NO_CHANGE, Outcome.ROLLED_BACK):
        came = came_to(run, result, repeated)
        memory.again = memory.again + 1 if came == SAME_FILES else 0
        streak = gateway.tally(run.said.model, came)
        result = replace(result, stalled=streak or result.stalled)
    return result


def came_to(run, result, repeated):
    """What kind of thing an answer came to, for the gateway's tally of a model's answers: None when it landed;
    SAME_FILES when its files were as they were, or as the answer rolled back before (`repeated`); else its failure,
    or the kind the seed's reason for no change starts with ("not valid JSON: ..."), the words before its details."""
    if result.outcome is Outcome.LANDED:
        return None
    same = result.outcome is Outcome.NO_CHANGE and run.said.outcome == "applied" and not run.said.refused
    if repeated or same and not result.changes:  # (spacing only: no changes)
        return SAME_FILES
    return result.failure.value if result.failure else re.split(r"[:(]", result.summary)[0].strip() or "no change"


def mendable(run, result):
    """(why, the output's telling lines, [(path, text)] of the text files it wrote) of an answer the gate rolled
    back, for the facts the next run's seed is offered; () after a landing, which forgets it."""
    if result.outcome is Outcome.LANDED:
        return ()
    files = []
    for rel, *_ in run.changes:
        try:
            files.append((rel, text_of(run.files[rel])))
        except (KeyError, UnicodeDecodeError):  # deleted, or not text
            continue
    return result.summary, journal.telling_lines(result.output)[-6:], files


def unasked(plan, gateway):
    """What came of asking nothing: the gateway says until when to wait, or why never. Nothing ran, so it is no
    iteration: it takes no number, and is said on the console, not recorded."""
    if plan.stop is not None:
        why = too_big_for_every_model(gateway) if plan.steering and not gateway.backend.local else plan.stop
        return Result(Outcome.STOPPED, "configuration error", why, asked=False)
    return Result(Outcome.WAITING, reason=plan.why, until=plan.wait_until, asked=False)


def too_big_for_every_model(gateway):
    """One line for a stop when goal.md and the open tasks are what keeps every model of the free tier from being
    asked: said once, not per model, and without advice that cannot work there (a server of one's own gets the
    gateway's, which names the setting that gives its model room)."""
    tokens, largest = journal.steering_size() // CHARS_PER_TOKEN, max(map(gateway.budget, gateway.models))
    return (f"goal.md and the open tasks (~{tokens:,} tokens) leave no room for code in any model's prompt (the "
            f"largest takes ~{largest:,}): shorten them")


def run_seed(timeout, gateway, plan):
    """`python seed.py` in the working copy, confined, with the gateway's address and the run's token, model
    and budget: never the key. Its time limit grows by what the gateway itself waits during the run (pacing,
    retries), and the seed waits for its answer as long as the gateway may make it wait besides."""
    env = terrarium.clean_env(GEMINI_API_BASE=gateway.url, GEMINI_API_KEY=plan.token, GEMINI_MODEL=plan.model,
                              SEED_PROMPT_TOKENS=str(plan.budget), SEED_TIMEOUT=str(int(timeout + gateway.max_wait)),
                              SEED_KEEPER=SEED_KEEPER, PYTHONUNBUFFERED="1")
    rules = terrarium.policy(gateway_port=gateway.server.server_address[1])
    return terrarium.run_bounded(terrarium.python("seed.py"), env, lambda: timeout + gateway.waited(plan.token),
                                 rules, watch=show_seed_progress, start=zygote.start)


def take(code, output, use, shown, start):
    """The Run: what the seed said with the gateway's account, and what it left in the working copy, taken into the
    object store (read without links, bounded: the working copy is the model's), or why it could not be taken."""
    try:
        said = journal.account(journal.read_record(terrarium.read_record()), use, shown)
        return Run(code, output, said, **terrarium.capture_work(snap.files_of(start)))
    except Untrusted as why:
        return Run(code, output, journal.account(journal.read_record(b""), use, shown), untrusted=str(why))


def refusals(output):
    """The lines of a run's output where the system refused it something (what confinement stopped)."""
    found = re.findall(r"^.*(?:Permission denied|Operation not permitted).*$", output, re.M)
    return list(dict.fromkeys(journal.one_line(line, 200) for line in found))[-5:]


def show_seed_progress(chunk):
    lines = [line for line in chunk.decode("utf-8", "replace").splitlines() if line.strip()]
    if lines:
        phase(f"seed.py: {lines[-1][:200]}")


# --- judging ------------------------------------------------------------------------------------
def settle(number, index, start, run, memory):
    """Judge the run and what it left, then land it, roll it back, or wait out the world: the Result."""
    began = time.monotonic()
    failure, detail, output = fault_of(run)
    if failure is None and run.changes and spacing_only(run.changes, snap.files_of(start), run.files):
        run = replace(run, changes=[], spacing=True)
    verdict = judged(run, start, index) if failure is None and run.changes else None
    left_out = None  # (a task, the output that shows why) for what of the answer lands without the rest of it
    if verdict and verdict.detail.startswith(gate.SEED_BROKEN):  # nothing imports the seed: the rest may land
        run, verdict, left_out = the_rest(start, index, run, verdict, {"seed.py"}, lambda _: f"Iteration {number} "
                                          f"landed without its seed.py: {verdict.detail}. Keep them when you improve "
                                          "it.")
    elif verdict and verdict.failure is Failure.TESTS and evaluate.LAND_ON == "score" and evaluate.present():
        # the person's score decides, not the tests the change brings: it lands without those of them that fail
        run, verdict, left_out = the_rest(start, index, run, verdict, set(), lambda failing: f"Iteration {number} "
                                          f"landed without {', '.join(sorted(failing))}: its tests failed. Mend them "
                                          "(the code they test landed, and the score did not fall).", tests=True)
    score = None
    if verdict and not verdict.failure:
        score, failure, detail, output = scored(run, start)
    elif verdict:
        failure, detail, output = verdict.failure, verdict.detail, verdict.output
    own = isinstance(failure, RunFailure)
    if run.asked and not own and not start["good"]:
        start["good"] = True  # a run started from it finished, having asked the model: it is known good
        start.setdefault("world", run.world)  # what it ran well with: a failure here later is proven against it
        snap.save_index(index)
    if failure:
        result = settle_failure(number, index, start, run, memory, (failure, detail, output))
    else:
        memory.world, memory.suspect, memory.pause, memory.repeat = None, None, 0, None
        result = settle_run(number, index, start, run, verdict, score)
    if left_out and result.outcome is Outcome.LANDED:  # told only when the rest landed (its score may have fallen)
        journal.add_failure_task(*left_out, start["id"], journal.failure_mark(*left_out))
    return replace(result, verdict=verdict, score=score,
                   gate_seconds=round(time.monotonic() - began, 3) if run.changes and not run.untrusted else None)


def the_rest(start, index, run, verdict, dropped, told, tests=False):
    """(run, verdict, (the task told(dropped), the output that shows why)) for the rest of an answer without its
    changes to `dropped` (kept as they were at the start), judged on its own; (run, verdict, None) as it was when no
    change is left or the rest fails too. For a seed.py that breaks its contract (nothing imports the seed: a small
    model wrote the goal's code into it, beside good files), and, under SEED_LAND_ON=score (`tests`), the test files
    the change added or changed that fail: the gate stops at the first file that fails, so each judging may name
    one more, until the rest passes or fails otherwise (a judging per test file the change brings, at most)."""
    before, changed, alone, outputs = snap.files_of(start), {rel for rel, *_ in run.changes}, verdict, []
    while True:
        outputs.append(alone.output)
        failing = {test.split("::")[0] for test in alone.failed} - dropped if tests else set()
        if tests and (alone.failure is not Failure.TESTS or not failing or not failing <= changed):
            return run, verdict, None
        dropped = dropped | failing
        files = {rel: sha for rel, sha in {**run.files, **{rel: before.get(rel) for rel in dropped}}.items() if sha}
        rest = replace(run, files=files, changes=[change for change in run.changes if change[0] not in dropped])
        alone = judged(rest, start, index) if rest.changes else None
        if alone is None or alone.failure and not tests:
            return run, verdict, None
        if not alone.failure:
            return rest, alone, (told(dropped), "\n".join(outputs))


def spacing_only(changes, before, after):
    """Whether every change is to a text file that was there, and only in whitespace that means nothing: blank lines
    and spaces at line ends in a Python file, the end of any other (in data or Markdown, spaces at a line's end can
    mean something). A small model's "landing" of a blank line: the 1.5B landed notes.py +1 -0 four times."""
    def meaning(rel, sha):
        return [line.rstrip() for line in text_of(sha).splitlines() if line.strip()] if rel.endswith(".py") \
            else text_of(sha).rstrip()
    try:
        return all(before.get(rel) and after.get(rel) and meaning(rel, before[rel]) == meaning(rel, after[rel])
                   for rel, *_ in changes)
    except UnicodeDecodeError:
        return False


def text_of(sha):
    """A stored file's text (a UnicodeDecodeError when it is not UTF-8)."""
    return snap.object_path(sha).read_bytes().decode("utf-8")


def fault_of(run):
    """(what the run itself failed on, what it said, the output that shows it), or (None, "", "")."""
    code, said = run.code, run.said
    if run.untrusted:
        return RunFailure.UNTRUSTED, run.untrusted, ""
    if code is None:
        return RunFailure.TIMED_OUT, "", run.output
    if code < 0:
        return RunFailure.KILLED, f"{signal.Signals(-code).name} (a resource limit, or a signal)", run.output
    if code not in (0, EX_UNAVAILABLE, EX_CONFIG):
        return RunFailure.CRASHED, f"exit {code}", run.output
    if code == 0 and not run.changes and not said.requests:
        return RunFailure.STALLED, "", run.output
    if code == EX_UNAVAILABLE and not said.requests and not said.problem:  # it broke the gateway's contract
        return RunFailure.REFUSED, "", f"{run.output}\n{said.reason}"
    return None, "", ""


def judged(run, start, index):
    """The gate's Verdict on the candidate, with the ratchet's counts of the state it started from, every test run
    at least every FULL_GATE_EVERY landings."""
    full = index["partial_landings"] >= FULL_GATE_EVERY if "partial_landings" in index else True
    return gate.gate(run.changes, run.files, gate.ratchet_of(start), full)


def scored(run, start):
    """(the score evaluate.py gives a change that passed the gate, and the failure it makes or None, what it says,
    its output). A score that fell fails under SEED_RATCHET=score or SEED_LAND_ON=score; an evaluator that fails at
    the known-good state too is the person's file to fix: one line, no task, and the change is judged without a
    score."""
    ratchet = evaluate.RATCHET or evaluate.LAND_ON == "score"  # under the score's rule, the score must not fall
    if not evaluate.present():
        return None, None, "", ""
    phase("scoring the change with evaluate.py")
    found = evaluate.score_of(run.files)
    if found.get("tampered"):  # never the person's to fix: the change reached for its own score
        return None, Failure.TAMPERED, found["tampered"], found["output"]
    if "problem" in found:
        if "problem" in evaluate.score_of(snap.files_of(start)):
            tell(f"{found['problem']} at the last known-good state too: evaluate.py is yours to fix (no task for the "
                 "model; the change is judged without a score)")
            return None, None, "", ""
        if ratchet:
            return None, ScoreFailure.BROKEN, found["problem"], found["output"]
        return None, None, "", ""
    before = start.get("score")
    if ratchet and before is not None and found["score"] < before - evaluate.TOLERANCE:
        return found, ScoreFailure.FELL, f"{before:g} to {found['score']:g}", ""
    return found, None, "", ""


# --- a run that failed nothing --------------------------------------------------------------------
def settle_run(number, index, start, run, verdict, score):
    """Land the change (ticking what its answer finished), or say why nothing changed."""
    said, problem = run.said, run.said.problem
    base = dict(start=start["id"], said=said, changes=run.changes, not_landed=run.not_landed)
    if problem and problem.kind is Trouble.STOP or run.code == EX_CONFIG:
        result = Result(Outcome.STOPPED, "configuration error", problem.why if problem else seed_message(run), **base)
    elif problem and problem.kind is Trouble.WAIT and not run.changes:
        result = Result(Outcome.WAITING, reason=problem.why, until=problem.until, **base)
    elif run.changes:
        result = land(number, index, start, run, verdict, score, base)
    else:
        why = (problem.why if problem else "") or said.reason or (seed_message(run) if run.code else "") or \
            SPACING * run.spacing or \
            (f"nothing to apply: {'; '.join(said.refused)}" if said.refused else "")
        result = Result(Outcome.NO_CHANGE, why, why, **base)
    if said.outcome == "rejected" and said.reason:  # the seed's own compile check put its answer back
        why = f"The last answer was not applied: {said.reason}. Write it again, whole."
        journal.add_failure_task(why, "", start["id"], journal.failure_mark("rejected", said.reason))
    return result


def land(number, index, start, run, verdict, score, base):
    """Land a change that passed the gate and tick what its answer finished. A person's edits to the same files,
    made during the run, are kept as a snapshot first. The landed snapshot keeps what its gate found: the ratchet's
    counts, the score, which tests ran (the cadence counts the landings that rest on a selection)."""
    if snap.edited_since(start, [rel for rel, *_ in run.changes]):
        snap.snapshot(index, "before", number)
    write_atomically(SETTLING, json.dumps({"iteration": number, "start": start["id"]}))  # until its row is written
    plan, outside = terrarium.land(run.changes, run.files)
    if not plan:
        return Result(Outcome.NO_CHANGE, "a symlink out of the folder, or a folder, stands where it would land",
                      "outside", outside=outside, **base)
    landed = {rel: sha for rel, sha in {**snap.files_of(start), **plan}.items() if sha}
    entry = snap.snapshot(index, "landed", number, files=landed)  # the new known-good candidate; the report's "after"
    if verdict.passing is not None:
        entry.update(passing=verdict.passing, counted=gate.COUNTED)  # the ratchet's counts, of test functions
    if score is not None:
        entry["score"] = score["score"]  # the score a change that starts from here must keep (SEED_RATCHET=score)
    entry["judged"], entry["world"] = verdict.tests_ran, blame.world()
    partial = verdict.tests_ran != gate.EVERY_TEST
    index["partial_landings"] = index.get("partial_landings", 0) + 1 if partial else 0
    snap.save_index(index)
    journal.tick_tasks(run.said.done)
    return Result(Outcome.LANDED, f"{len(plan)} file(s) changed", after=entry["id"], landed=len(plan),
                  outside=outside, **base)


def seed_message(run):
    """What the seed said of how it ended: its record's reason, else the last line it printed."""
    lines = [line for line in run.output.splitlines() if line.strip()]
    return redact(run.said.reason or (lines[-1] if lines else "no message"))


# --- a run that failed ----------------------------------------------------------------------------
def settle_failure(number, index, start, run, memory, fault):
    """Roll a failed change back and make it a task for the model; or, when decide.failed finds the failure the
    world's, keep the folder and wait. What it is decided on is gathered here; the control (the gate at the state the
    change started from) is run only when the decision needs it, after the failed state is kept."""
    failure, detail, output = fault
    mark = journal.failure_mark(headline_of(failure, detail), output)
    said = run.said
    case = decide.Case(failure, detail, mark, asked=run.asked,
                       answered=said.answered and not said.asking, asking=said.asking and run.code is None,
                       start=start["id"], start_good=bool(start["good"]), start_landed=start["kind"] == "landed",
                       fully_judged=fully_judged(start), world=memory.world, repeat=memory.repeat,
                       cause=blame.observed(index, start))
    decision = decide.failed(case)
    if decision.fate is decide.Fate.WORLD:
        return blame_the_world(number, index, start, run, memory, fault, decision.cause)
    memory.repeat = decision.repeat
    memory.suspect = {"failure": failure.value, "mark": mark, "home": start} if decision.walk else None
    memory.keep()  # before the walk-back: a keeper stopped during it must not keep it
    kept, restored, stuck = roll_back(index, start, decision.walk, number, memory.bad, run.files)
    base = dict(start=start["id"], said=said, changes=run.changes, not_landed=run.not_landed, failure=failure,
                output=redact(output), kept=kept, restored=restored, stuck=stuck)
    if decision.fate is None:  # only the control can tell; the world is looked at again once it has run
        same = same_at_start(start, run, mark)
        decision = decide.failed(replace(case, same=same, cause=blame.observed(index, start)))
    if decision.fate is decide.Fate.WAIT:
        return wait_for_the_world(Result(Outcome.WAITING, **base), memory, detail, decision.cause)
    outcome = Outcome.TAMPERED if failure is Failure.TAMPERED else Outcome.ROLLED_BACK
    headline = headline_of(failure, detail)
    journal.add_failure_task(f"Iteration {number} was rolled back: {headline}. " + (UNPROVEN if decision.unproven else
                                                                                    "Find and fix the cause."),
                             output, start["id"], mark)
    return Result(outcome, detail if outcome is Outcome.TAMPERED else headline, headline, **base)


UNPROVEN = ("It fails the same way at the last known-good state, and nothing outside the code changed (the same "
            "Python, packages and limits): the code depends on the moment (the date, the time, chance) or on what "
            "an earlier run or test left. Find and fix the cause.")


def headline_of(failure, detail):
    """A failure as people read it: its kind, then what it says."""
    return SHAPES.get(failure, "{}: {}").format(failure.value, detail) if detail else failure.value


def same_at_start(start, run, mark):
    """Whether the gate fails the same way at the state the change started from (then the cause is not the change)."""
    verdict = gate.run_checks(snap.files_of(start), gate.touches_seed(run.changes, run.files))
    return bool(verdict.failure) and journal.failure_mark(verdict.why, verdict.output) == mark


def fully_judged(start):
    """Whether the state a change started from passed every test when it landed (or was not landed by a gate): only
    then can the same failure there be the world's. One landed on a selection may hold a break it did not run."""
    return start.get("judged") in (None, gate.EVERY_TEST)


def blame_the_world(number, index, start, run, memory, fault, cause):
    """Not the code's fault (proven: the control failed, and `cause` was observed outside the code): keep the newest
    state (undo a walk-back that a failure of this kind began, and take back the task it wrote), write no task, and
    wait."""
    failure, detail, output = fault
    suspect = memory.suspect
    home = suspect["home"] if suspect and suspect["failure"] == failure.value else start
    kept = keep_failed(index, number, run.files)
    if home is not start:  # undo the walk-back (the folder never had what failed)
        snap.snapshot(index, "before", number)
        snap.restore(home)
        memory.bad.discard(home["id"])
        journal.remove_failure_task(suspect["mark"])
    terrarium.sync_work()
    memory.world, memory.suspect = (failure.value, detail), None  # no walk-back is left to undo
    result = Result(Outcome.WAITING, start=start["id"], said=run.said, failure=failure, output=redact(output),
                    kept=kept, restored=home["id"])
    return wait_for_the_world(result, memory, detail, cause)


def wait_for_the_world(result, memory, detail, cause):
    """Wait after a failure from outside the code, a little longer each time, and say what was seen there."""
    memory.pause = min(max(FAULT_PAUSE, 2 * memory.pause), 3600)
    where = "while the model still had its request" if cause is decide.ASKING else "at the last known-good state too"
    return replace(result, until=datetime.now(timezone.utc) + timedelta(seconds=memory.pause),
                   summary=f"{headline_of(result.failure, detail)} {where}",
                   reason=f"{journal.error_line(result.output) or headline_of(result.failure, detail)}; " + (
                       f"{cause}: the cause is outside the code (raise --timeout, the seconds a run may take)"
                       if cause is decide.ASKING else f"the same happens at the last known-good state, and {cause}: "
                       "the cause is outside the code"))


def roll_back(index, start, walk, number, bad, files):
    """Keep the failing state, then go back: to the start, or further back when the seed itself is broken. (The
    snapshot keeping it, the one gone back to, and whether no known-good state is left.)"""
    kept = keep_failed(index, number, files)
    if walk:
        bad.add(start["id"])
    target = snap.walk_back(index, bad) if walk else start
    phase(f"rolling back to snapshot {target['id']}")
    if target is not start:  # the folder never had the failed change: only a walk-back changes it
        snap.snapshot(index, "before", number)  # a person's edits made during the run are kept first
        snap.restore(target)
    terrarium.sync_work()
    return kept, target["id"], target["id"] in bad


def keep_failed(index, number, files):
    """Keep a failed change's candidate as a snapshot (its id), or None when nothing could be taken."""
    return snap.snapshot(index, "failed", number, files=files)["id"] if files is not None else None


# --- after the iteration ----------------------------------------------------------------------------
def note_dry_spell(index, result, memory):
    """The result, with the dry spell said (decide.dry_spell): iterations in a row that asked the model, or failed,
    and landed nothing; at DRY_SPELL a task says so, at twice that one known-good state is walked back too."""
    counts = None if result.outcome is Outcome.LANDED else \
        result.outcome in (Outcome.ROLLED_BACK, Outcome.TAMPERED) or \
        result.outcome is Outcome.NO_CHANGE and bool(result.said.requests)
    memory.dry, stall = decide.dry_spell(memory.dry, counts, DRY_SPELL)
    if stall is None:
        return result
    stalled = f"nothing has landed in the last {memory.dry or 2 * DRY_SPELL} iterations"
    if stall is decide.Stall.WALK_BACK:
        here = snap.snapshot(index, "before", index["iteration"])
        memory.bad.add(here["id"])
        target = snap.walk_back(index, memory.bad)
        snap.restore(target)
        stalled += f"; went back to snapshot {target['id']} (this state is kept as {here['id']})"
    journal.add_failure_task(f"Stalled: {stalled}. Change approach: smaller, surer steps.", "",
                             index["snapshots"][-1]["id"], journal.failure_mark("stalled", ""))
    return replace(result, stalled=stalled)


def waste_of(result):
    """Why an answered request was spent for nothing, as the ledger counts it: the failure's kind, or why no change
    came of it."""
    if result.failure is not None:
        return result.failure.value
    if result.outcome is Outcome.NO_CHANGE:
        said = result.said
        return "compile error" if said.outcome == "rejected" else "nothing to apply" if said.refused \
            and not result.changes else "outside" if result.outside else "no change"
    return result.outcome.value
