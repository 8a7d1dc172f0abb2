"""fallback: the keeper that runs seed.py over and over, and keeps the codebase growing whatever it writes.

    python fallback.py                   run forever; Ctrl+C stops cleanly, running again resumes
    python fallback.py --iterations 3    stop after three iterations
    python fallback.py --demo            three iterations offline, in a throwaway copy
    python fallback.py --show 12         what iteration 12 asked the model, what it answered, what came of it
    python fallback.py --help            all options

Each iteration: the gateway chooses the model and the prompt budget (or says to wait); the folder is
snapshotted into backups/ and the working copy brought in step with it; `python seed.py` runs there,
confined, with the gateway's address and a one-run token, never the key; the gate judges the result there.
A change that passes lands in the folder (its finished tasks are ticked); one that fails never reaches
it: it is kept in backups/ and becomes a task, and a seed that fails walks the folder back to the newest
known-good snapshot, unless the failure is the world's (the same failure where the code once ran well):
then the loop waits. Every iteration is logged in iteration_log.md and report.html. The parts live in
supervisor/; this file is the loop and the command line. Needs Linux or macOS.
"""
import sys
from os.path import basename, dirname, realpath

# Nothing the model writes is imported in place of the standard library: a json.py of its own in this
# folder must not shadow the real json, here or in any process started from here (see terrarium.python).
sys.path[:] = [p for p in sys.path if realpath(p or ".") != dirname(realpath(__file__))]

import importlib.util  # noqa: E402  (every import comes after the line above)

VERSION = "2026.11"
PACKAGES = ("requests", "dotenv", "pytest")  # requirements.txt's, by the names they are imported as


def check_interpreter():
    """What this Python lacks, as one line saying how to fix it, or None. This file up to here runs on 3.8+:
    an older Python must be told so, never left to fail at the first newer line and blame the code."""
    if sys.version_info[:2] < (3, 11):
        return ("fallback.py needs Python 3.11 or newer, and this is %d.%d: run it with a newer one (Ubuntu 22.04:  "
                "sudo apt install python3.11 python3.11-venv, then the README's set-up with python3.11 for python3)"
                % sys.version_info[:2])
    missing = [name for name in PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        return "missing Python packages (%s): run  %s -m pip install -r requirements.txt" % (
            ", ".join("python-dotenv" if name == "dotenv" else name for name in missing), basename(sys.executable))
    return None


UNFIT = check_interpreter()
if UNFIT:  # said before anything imports what may be missing, even for --help
    print("fallback: " + UNFIT, file=sys.stderr)
    sys.exit(78)

import argparse  # noqa: E402
import errno  # noqa: E402
import fcntl  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import signal  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from datetime import datetime, timedelta, timezone  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent
SPEC = importlib.util.spec_from_file_location("supervisor", ROOT / "supervisor" / "__init__.py",
                                              submodule_search_locations=[str(ROOT / "supervisor")])
sys.modules["supervisor"] = importlib.util.module_from_spec(SPEC)  # by its path: no other "supervisor" stands in
SPEC.loader.exec_module(sys.modules["supervisor"])

from supervisor import (backends, demo, evaluate, export, gate, journal, record as book,  # noqa: E402
                        report as page, snapshots as snap, status, terrarium)
from supervisor.untrusted import Untrusted  # noqa: E402
from supervisor.console import (redact, report, say, show_iteration, show_phase, start_status_line,  # noqa: E402
                                summary)
from supervisor.settings import (BACKOFF, BACKUPS, DRY_SPELL, EX_CONFIG, EX_UNAVAILABLE, FAULT_PAUSE,  # noqa: E402
                                 FULL_GATE_EVERY, LOCK, LOG, NOT_YOURS, PROBLEMS, PROMPT_TOKENS,
                                 REQUESTS_PER_RUN, RESTORING, SANDBOX_REQUIRED, SETTLING, STEERING, SUSPICION,
                                 UNDER_WAY, WORK,
                                 load_json, save_json, write_atomically)
from supervisor.answers import CHARS_PER_TOKEN  # noqa: E402
from supervisor.settings import NAMED, source_of  # noqa: E402

CONFINEMENT = terrarium.confinement()  # what this machine can confine the model's code with, said once and in every log
SEED_KEEPER = " ".join(NOT_YOURS)  # not the seed's to write, besides any name that starts with "."


# --- one iteration ----------------------------------------------------------------------------
def run_iteration(number, index, args, session, gateway):
    """Ask the gateway for a model, run the seed once, gate what it wrote, land it or roll back."""
    plan = gateway.open_run(journal.steering_size())
    if "token" not in plan:
        return wait_or_stop(plan, gateway)
    show_phase("snapshot of the codebase", restart=True)
    start = snap.snapshot(index, "before" if index["snapshots"] else "genesis", number)
    terrarium.sync_work(snap.files_of(start))
    shown = journal.open_tasks()  # as the seed numbers them: the answer's "done" counts in these
    write_atomically(UNDER_WAY, json.dumps({"iteration": number, "start": start["id"]}))
    show_phase("running seed.py")
    try:
        code, output = run_seed(args.timeout, gateway, plan)
        result = {"confinement": CONFINEMENT.text, "refusals": refusals(output), "changes": [], "not_landed": [],
                  "start": start["id"]}
        failure = take_and_judge(code, output, start, gateway.close_run(plan["token"]), shown, result, index)
    except KeyboardInterrupt:
        session["interrupted"] = journal.account(journal.read_record(b""), gateway.close_run(plan["token"], linger=0),
                                                 shown)
        set_aside(index, start, number)
        raise
    finally:
        UNDER_WAY.unlink(missing_ok=True)
    record = result["record"]
    seed_ran = code == 0 and record["requests"] > 0
    if seed_ran and not start["good"]:
        start["good"] = True  # a run started from it finished, having asked the model: it is known good
        snap.save_index(index)
    if failure:
        settle_failure(number, index, start, seed_ran, failure, session, result)
    else:
        session.update(suspect=None, world=None, pause=0)
        settle_run(number, index, start, code, output, result)
    if record["answered"] and not result["outcome"].startswith("landed"):
        result["waste"] = re.split(r"[:(]", result.get("reason") or "no change")[0].strip()
        gateway.record_waste(record["model"], result["waste"])
    return result


def wait_or_stop(plan, gateway):
    """An iteration in which nothing could be asked: the gateway says until when, or why never (a stop before
    the model was asked is no iteration: `unasked`)."""
    if "stop" in plan:
        why = too_big_for_every_model(gateway) if plan.get("steering") and not gateway.backend.local else plan["stop"]
        return {"outcome": "stopped: configuration error", "reason": why, "changes": [], "unasked": True}
    return {"outcome": f"waiting until {plan['wait_until']:%Y-%m-%d %H:%M} UTC", "reason": plan["why"],
            "wait_until": plan["wait_until"], "changes": []}


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
    env = terrarium.clean_env(GEMINI_API_BASE=gateway.url, GEMINI_API_KEY=plan["token"], GEMINI_MODEL=plan["model"],
                              SEED_PROMPT_TOKENS=str(plan["budget"]), SEED_TIMEOUT=str(int(timeout + gateway.max_wait)),
                              SEED_KEEPER=SEED_KEEPER, PYTHONUNBUFFERED="1")
    rules = terrarium.policy(gateway_port=gateway.server.server_address[1])
    return terrarium.run_bounded(terrarium.python("seed.py"), env, lambda: timeout + gateway.waited(plan["token"]),
                                 rules, watch=show_seed_progress)


def take_and_judge(code, output, start, use, shown, result, index):
    """Take what the run left into the object store (read without links, bounded: the working copy is the model's)
    and judge that: None if it passes, else (why it failed, the output that shows it). `result` gets the record,
    the candidate's files and changes, and the number of the model's tests that pass."""
    try:
        result["record"] = journal.account(journal.read_record(terrarium.read_record()), use, shown)
        result.update(terrarium.capture_work(snap.files_of(start)))
    except Untrusted as why:
        result.setdefault("record", journal.account(journal.read_record(b""), use, shown))
        return f"{gate.Failure.UNTRUSTED.value}: {why}", ""
    began = time.monotonic()
    try:
        return judge(code, result, output, start, index)
    finally:
        result["gate_seconds"] = round(time.monotonic() - began, 3)


def refusals(output):
    """The lines of a run's output where the system refused it something (what confinement stopped)."""
    found = re.findall(r"^.*(?:Permission denied|Operation not permitted).*$", output, re.M)
    return list(dict.fromkeys(journal.one_line(line, 200) for line in found))[-5:]


def show_seed_progress(chunk):
    lines = [line for line in chunk.decode("utf-8", "replace").splitlines() if line.strip()]
    if lines:
        show_phase(f"seed.py: {lines[-1][:200]}")


def settle_run(number, index, start, code, output, result):
    """A run that failed nothing: land its change (ticking what it finished), or say why nothing changed."""
    record, problem = result["record"], result["record"]["problem"] or {}
    if problem.get("kind") == "stop" or code == EX_CONFIG:
        result.update(outcome="stopped: configuration error", reason=problem.get("why") or seed_message(record, output))
    elif problem.get("kind") == "wait" and not result["changes"]:
        result.update(outcome=f"waiting until {problem['until']:%Y-%m-%d %H:%M} UTC", reason=problem["why"],
                      wait_until=problem["until"])
    elif result["changes"]:
        land(number, index, start, result)
    else:
        why = problem.get("why") or record["reason"] or (seed_message(record, output) if code else "") or \
            (f"nothing to apply: {'; '.join(record['refused'])}" if record["refused"] else "")
        result.update(outcome=f"no change: {why}" if why else "no change", reason=why)
    if record["reason"].startswith("compile error"):
        why = f"The last answer did not compile and was not applied: {record['reason'][15:]}. Write it again, whole."
        journal.add_failure_task(why, "", start["id"], journal.failure_mark("compile error", record["reason"]))


def land(number, index, start, result):
    """Land a change that passed the gate and tick what its answer finished. A person's edits to the same files,
    made during the run, are kept as a snapshot first."""
    if snap.edited_since(start, [rel for rel, *_ in result["changes"]]):
        snap.snapshot(index, "before", number)
    write_atomically(SETTLING, json.dumps({"iteration": number, "start": start["id"]}))  # until its row is written
    plan, result["outside"] = terrarium.land(result["changes"], result["files"])
    if not plan:
        result.update(outcome="no change: a symlink out of the folder, or a folder, stands where it would land",
                      reason="outside")
        return
    landed = {rel: sha for rel, sha in {**snap.files_of(start), **plan}.items() if sha}
    entry = snap.snapshot(index, "landed", number, files=landed)  # the new known-good candidate; the report's "after"
    result["after"] = entry["id"]
    if result.get("passing") is not None:
        entry.update(passing=result["passing"], counted=gate.COUNTED)  # the ratchet's counts for changes from here
    if result.get("score") is not None:
        entry["score"] = result["score"]  # the score a change that starts from here must keep (SEED_RATCHET=score)
    entry["judged"] = result.get("tests_ran")  # which tests its gate ran (see fully_judged)
    partial = result.get("tests_ran") != gate.EVERY_TEST  # the cadence: how long landings rest on a selection
    index["partial_landings"] = index.get("partial_landings", 0) + 1 if partial else 0
    snap.save_index(index)
    journal.tick_tasks(result["record"]["done"])
    result["outcome"] = f"landed: {len(plan)} file(s) changed"


def settle_failure(number, index, start, seed_ran, failure, session, result):
    """Roll a failed change back and make it a task for the model; unless the failure is the world's: the seed
    failing where it once ran well, or as it does while the world is broken, or ended while the model still
    had its request; or the gate failing the same way at the known-good state it went back to."""
    mark = journal.failure_mark(*failure)
    if not seed_ran and (start["good"] or failure[0] == session["world"] or result["record"]["asking"]):
        return blame_the_world(number, index, start, failure, session, result)  # asking: the model kept it waiting
    session["suspect"] = None if seed_ran else {"kind": failure[0], "mark": mark, "home": start}
    keep_suspicion(session)  # before the walk-back: a keeper stopped during it must not keep it
    roll_back(index, start, seed_ran, number, session["bad"], result)
    if seed_ran and failure[0].startswith(("import check", "tests")) and fully_judged(start) and \
            not failure[0].startswith(gate.Failure.TESTS_REMOVED.value) and journal.failure_mark(*(gate.run_checks(
                snap.files_of(start), gate.touches_seed(result["changes"], result["files"])).failed or ("", ""))) \
            == mark:
        return wait_for_the_world(failure, session, result)
    result.update(outcome=f"rolled back: {failure[0]}", reason=failure[0], output=redact(failure[1]))
    journal.add_failure_task(f"Iteration {number} was rolled back: {failure[0]}. Find and fix the cause.", failure[1],
                             start["id"], mark)


def fully_judged(start):
    """Whether the state a change started from passed every test when it landed (or was not landed by a gate): only
    then can the same failure there be the world's. One landed on a selection may hold a break it did not run."""
    return start.get("judged") in (None, gate.EVERY_TEST)


def blame_the_world(number, index, start, failure, session, result):
    """Not the code's fault: keep the newest state (undo a walk-back that a failure of this kind began, and take
    back the task it wrote), write no task, and wait."""
    suspect = session["suspect"]
    home = suspect["home"] if suspect and suspect["kind"] == failure[0] else start
    kept = keep_failed(index, number, result)
    if home is not start:  # undo the walk-back (the folder never had what failed)
        snap.snapshot(index, "before", number)
        snap.restore(home)
        session["bad"].discard(home["id"])
        journal.remove_failure_task(suspect["mark"])
    terrarium.sync_work()
    session.update(world=failure[0], suspect=None)  # no walk-back is left to undo
    result.update(kept=kept, restored=home["id"])
    if result["record"]["asking"] and not start["good"]:
        return wait_for_the_world(failure, session, result, "the model still had the run's request when it ended")
    wait_for_the_world(failure, session, result)


def wait_for_the_world(failure, session, result, why="the same happens at the last known-good state"):
    """Wait after a failure from outside the code, a little longer each time, and say what to check."""
    session["pause"] = min(max(FAULT_PAUSE, 2 * session["pause"]), 3600)
    until = datetime.now(timezone.utc) + timedelta(seconds=session["pause"])
    where = "at the last known-good state too" if why.startswith("the same") else "while the model still had its request"
    result.update(outcome=f"waiting until {until:%Y-%m-%d %H:%M} UTC: {failure[0]} {where}",
                  wait_until=until, output=redact(failure[1]),
                  reason=f"{journal.error_line(failure[1]) or failure[0]}; {why}, so the cause is outside the code: "
                         "check the network, the disk, the installed packages (pip install -r requirements.txt) "
                         "and GEMINI_MODEL")


def note_dry_spell(index, result, dry, bad):
    """Count iterations in a row that asked the model, or failed, and landed nothing; at DRY_SPELL say so, at
    twice that walk back one known-good state. Returns the new count."""
    if result["outcome"].startswith("landed"):
        return 0
    asked = (result.get("record") or {}).get("requests")
    if not (result["outcome"].startswith("rolled back") or result["outcome"].startswith("no change") and asked):
        return dry
    dry += 1
    if dry % DRY_SPELL == 0:
        result["dry"] = f"nothing has landed in the last {dry} iterations"
        if dry >= 2 * DRY_SPELL:
            here = snap.snapshot(index, "before", index["iteration"])
            bad.add(here["id"])
            target = snap.walk_back(index, bad)
            snap.restore(target)
            result["dry"] += f"; went back to snapshot {target['id']} (this state is kept as {here['id']})"
            dry = 0
        journal.add_failure_task(f"Stalled: {result['dry']}. Change approach: smaller, surer steps.", "",
                         index["snapshots"][-1]["id"], journal.failure_mark("stalled", ""))
    return dry


def judge(code, result, output, start, index):
    """None if this run passes, else (why it failed, the output that shows it)."""
    if code is None:
        return ("seed.py timed out and was killed with its children", output)
    if code < 0:
        return (f"seed.py was killed by {signal.Signals(-code).name} (a resource limit, or a signal)", output)
    if code not in (0, EX_UNAVAILABLE, EX_CONFIG):
        return (f"seed.py crashed (exit {code})", output)
    record = result["record"]
    if code == 0 and not result["changes"] and not record["requests"]:
        return ("seed.py exited 0 without asking the model or changing anything (a stall)", output)
    if code == EX_UNAVAILABLE and not record["requests"] and not record["problem"]:  # broke the gateway's contract
        return ("the gateway refused seed.py's request", f"{output}\n{record['reason']}")
    if not result["changes"]:
        return None
    full = index["partial_landings"] >= FULL_GATE_EVERY if "partial_landings" in index else True
    verdict = gate.gate(result["changes"], result["files"], gate.ratchet_of(start), full)
    result["passing"], result["tests_ran"] = verdict.passing, verdict.ran
    return verdict.failed or judge_score(result, start)


def judge_score(result, start):
    """Score a change that passed the gate with the person's evaluate.py (if there is one): None, or why it fails (its
    score fell, under SEED_RATCHET=score, or it broke the evaluator). An evaluator that fails at the known-good state
    too is the person's file to fix: one line, no task, and the change is judged without it."""
    if not evaluate.present():
        return None
    show_phase("scoring the change with evaluate.py")
    found = evaluate.score_of(result["files"])
    if found.get("tampered"):  # never the person's to fix: the change reached for its own score
        return found["problem"], found["output"]
    if "problem" in found:
        if "problem" in evaluate.score_of(snap.files_of(start)):
            say(f"{found['problem']} at the last known-good state too: evaluate.py is yours to fix (no task for the "
                "model; the change is judged without a score)")
            return None
        return (f"{found['problem']} on this change, and not at the last known-good state", found["output"]) \
            if evaluate.RATCHET else None
    result["score"], result["scores"] = found["score"], found
    before = start.get("score")
    if evaluate.RATCHET and before is not None and found["score"] < before - evaluate.TOLERANCE:
        return f"score fell from {before:g} to {found['score']:g}", ""
    return None


def roll_back(index, start, seed_ran, number, bad, result):
    """Keep the failing state, then restore: the start if its seed ran, else walk further back."""
    kept = keep_failed(index, number, result)
    if not seed_ran:
        bad.add(start["id"])
    target = start if seed_ran else snap.walk_back(index, bad)
    show_phase(f"rolling back to snapshot {target['id']}")
    if target is not start:  # the folder never had the failed change: only a walk-back changes it
        snap.snapshot(index, "before", number)  # a person's edits made during the run are kept first
        snap.restore(target)
    terrarium.sync_work()
    result.update(kept=kept, restored=target["id"], stuck=target["id"] in bad)


def keep_failed(index, number, result):
    """Keep a failed change's candidate as a snapshot (its id), or None when nothing could be taken."""
    return snap.snapshot(index, "failed", number, files=result["files"])["id"] if "files" in result else None


def set_aside(index, start, number):
    """On Ctrl+C or after kill -9 mid-run: keep what the run wrote (in the working copy, read as the model's) as
    a snapshot; the folder never had it."""
    try:
        files = terrarium.capture_work(snap.files_of(start))["files"]
    except Untrusted:
        files = snap.files_of(start)
    if files != snap.files_of(start):
        kept = snap.snapshot(index, "interrupted", number, files=files)
        say(f"the interrupted run's changes are kept in backups/{kept['id']}; the codebase is as it was")
    terrarium.sync_work()


def seed_message(record, output):
    reason = record.get("reason")
    lines = [line for line in output.splitlines() if line.strip()]
    return redact(str(reason) if reason else lines[-1] if lines else "no message")


# --- the loop ---------------------------------------------------------------------------------
def supervise(args, index, gateway):
    """Run iterations until --iterations is reached; the exit code."""
    totals, done, dry, grown_from = Counter(), 0, 0, snap.codebase_size()
    session = {"bad": set(), "pause": 0, **suspicion(index)}  # see settle_failure
    # the index may not have been saved: the log and the record know the last iteration too
    index["iteration"] = max(index["iteration"], journal.last_logged_iteration(), book.last_number())
    start_status_line()
    try:
        while args.iterations == 0 or done < args.iterations:
            index["iteration"] += 1
            show_iteration(index["iteration"])
            began, started = time.monotonic(), book.utc_now()
            try:
                snap.save_index(index)
                recover(index)
                result = run_iteration(index["iteration"], index, args, session, gateway)
            except OSError as error:  # a full disk, a file size limit: wait, then finish what was cut short
                result = {"outcome": f"waiting: cannot write ({error.strerror or error})", "changes": [],
                          "reason": f"{error}: {what_to_free(error)}", "wait_until": datetime.now(timezone.utc)
                          + timedelta(seconds=60)}
            except KeyboardInterrupt as stop:
                by = "SIGTERM" if isinstance(stop, Terminated) else "Ctrl+C"
                stopped = {"outcome": f"stopped: interrupted ({by})", "changes": [],
                           "record": session.get("interrupted")}
                if not SETTLING.exists():  # else a landing was under way: the next start finishes it, and its row
                    row = book.row_of(index["iteration"], stopped, time.monotonic() - began, started)
                    record_iteration(row, stopped)
                raise
            finally:
                show_phase("")
            if result.get("unasked"):  # nothing ran: no iteration to number, log or report
                index["iteration"] -= 1
                snap.save_index(index)
                say(f"stopped: {result['reason']}", "stopped")
                return EX_CONFIG
            dry = note_dry_spell(index, result, dry, session["bad"])
            row = book.row_of(index["iteration"], result, time.monotonic() - began, started)
            try:
                record_iteration(row, result)
                keep_suspicion(session)
                snap.prune(index)
            except (OSError, book.sqlite3.Error) as error:
                say(f"cannot write the record, the log or backups/ ({error}): {what_to_free(error)}")
            write_report()
            report(row, totals)
            done += 1
            if result["outcome"].startswith("stopped"):
                say(f"stopped: {result['reason']}", "stopped")
                return EX_CONFIG
            if args.iterations == 0 or done < args.iterations:
                pause(result, args.delay)
            elif result.get("wait_until"):  # the last of --iterations N: no wait follows, but its reason is said
                say(f"the next iteration would wait: {result['reason']}")
        return 0
    except KeyboardInterrupt:
        show_phase("")
        say("interrupted: the seed is stopped, the codebase is consistent, the lock is free")
        return 130
    finally:
        say(summary(done, totals, grown_from, snap.codebase_size()))


def record_iteration(row, result):
    """Write the iteration into the record with its requests (one transaction: a landing and its row go together),
    then its section of iteration_log.md, rendered from the row."""
    book.writer().write(row, (result.get("record") or {}).get("calls") or [], result.get("waste"))
    SETTLING.unlink(missing_ok=True)
    journal.log_iteration(row)


def suspicion(index):
    """The failure kind the world is suspected of, and the walk-back it may yet undo, as the last run left them:
    a restart between a walk-back and the failure that shows it was the world's must not keep the walk-back."""
    saved, snapshots = load_json(SUSPICION), {entry["id"]: entry for entry in index["snapshots"]}
    suspect = saved.get("suspect") if isinstance(saved.get("suspect"), dict) else {}
    home = snapshots.get(suspect.get("home")) if isinstance(suspect.get("home"), str) else None
    world = saved.get("world") if isinstance(saved.get("world"), str) else None
    whole = home and isinstance(suspect.get("kind"), str) and isinstance(suspect.get("mark"), str)
    return {"world": world, "suspect": {**suspect, "home": home} if whole else None}


def keep_suspicion(session):
    suspect = session["suspect"] and {**session["suspect"], "home": session["suspect"]["home"]["id"]}
    save_json(SUSPICION, {"world": session["world"], "suspect": suspect})


def write_report():
    """Rewrite report.html; the page is for watching, so no fault of its own ever stops the loop."""
    try:
        page.write_report(ROOT)
    except Exception as error:  # noqa: BLE001 (the loop goes on whatever the page meets)
        say(f"report.html was not rewritten ({type(error).__name__}: {error})")


def pause(result, delay):
    """Wait before the next iteration: as the seed asked after exit 75, longer when stuck at genesis."""
    if result.get("wait_until"):
        seconds = (result["wait_until"] - datetime.now(timezone.utc)).total_seconds()
        local = result["wait_until"].astimezone()
        say(f"waiting until {local:%H:%M} local time ({seconds / 60:.0f} min): {result['reason']}")
        show_phase(f"waiting for Gemini until {local:%H:%M} local time: {result['reason']}", restart=True)
    elif result.get("stuck"):
        seconds = max(delay, 600)
        say(f"no known-good state is left to go back to; trying again in {seconds / 60:.0f} min")
    else:
        seconds = delay
    try:
        time.sleep(max(0.0, seconds))
    finally:
        show_phase("")


# --- the command line -------------------------------------------------------------------------

EPILOG = """\
settings (in .env, or the environment, which wins; all of them: docs/settings.md):
  GEMINI_API_KEY        your free key (https://aistudio.google.com/apikey)
  GEMINI_MODEL          models to use, best first, comma-separated (--models lists them)
  OPENAI_BASE_URL       a model server of your own instead (Ollama: http://localhost:11434/v1),
  OPENAI_MODEL          with the model(s) it runs
  SEED_PROMPT_TOKENS    the largest prompt, in estimated tokens (default 60000)
  SEED_SANDBOX=require  refuse to run the model's code where this machine cannot confine it

exit codes:
  0    done (--iterations reached, or a command by hand)
  1    another supervisor is running on this folder
  2    a command-line mistake
  75   the model server or the API could not be reached (--models)
  78   something to fix first: one line says what (Python, packages, .env, goal.md, a setting)
  130  stopped with Ctrl+C (running again resumes)

examples:
  python fallback.py --demo                  watch three iterations offline, no key needed
  python fallback.py --iterations 5          five iterations, then a summary
  python fallback.py --goal ideas.md --model gemini-3.5-flash-lite   one run with another goal and model
"""


def parse_args(argv):
    parser = argparse.ArgumentParser(description="Run seed.py over and over, keeping the codebase alive.",
                                     epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"seed {VERSION} (fallback.py)")
    parser.add_argument("--iterations", type=int, default=0, metavar="N",
                        help="stop after N iterations (default 0: run forever)")
    parser.add_argument("--delay", type=float, default=5.0, metavar="SECONDS",
                        help="pause between iterations (default 5)")
    parser.add_argument("--timeout", type=float, default=900.0, metavar="SECONDS",
                        help="time limit for one seed run, after which it is killed with its children (default 900)")
    parser.add_argument("--goal", metavar="FILE", help="for this run, give the model FILE as its goal instead of "
                                                       "goal.md (goal.md is left as it is)")
    parser.add_argument("--model", metavar="NAME[,NAME]", help="for this run, the model(s) to ask, best first, "
                        "instead of GEMINI_MODEL (or OPENAI_MODEL with a server of your own)")
    by_hand = parser.add_mutually_exclusive_group()
    by_hand.add_argument("--demo", action="store_true", help="watch a few iterations against a scripted model "
                                                            "in a throwaway copy (no key, no network) and exit")
    by_hand.add_argument("--status", action="store_true", help="show the supervisor, the last iterations, pending "
                                                              "tasks, today's use of each model and backups, and exit")
    by_hand.add_argument("--show", type=int, metavar="N", help="show iteration N: the prompt as sent, the answer as "
                                                             "received and as cleaned, what landed or why not")
    by_hand.add_argument("--models", action="store_true", help="list the models this key can call (one request "
                                                              "that spends no generation quota) and exit")
    by_hand.add_argument("--report", action="store_true", help="write report.html (the run as a page to open in a "
                                                              "browser) and exit")
    by_hand.add_argument("--export-git", metavar="DIR", help="write the landed history to DIR as a git repository, one "
                                                             "commit per landed state kept in backups/ (again: adds "
                                                             "the new ones)")
    by_hand.add_argument("--list-backups", action="store_true", help="list the snapshots in backups/ and exit")
    by_hand.add_argument("--materialise", metavar="ID", help="write snapshot ID's files to backups/ID/ to look "
                                                                "at, and exit")
    by_hand.add_argument("--restore", metavar="ID", help="put the codebase back as snapshot ID was (the current "
                                                          "state is kept as a snapshot first) and exit")
    by_hand.add_argument("--reset", action="store_true", help="go back to the first snapshot (genesis), the "
                                                             "same way, and exit")
    by_hand.add_argument("--keep", metavar="ID", help="keep snapshot ID in backups/ whatever the retention policy "
                                                      "prunes, and exit")
    args = parser.parse_args(argv)
    if args.iterations < 0 or args.delay < 0 or args.timeout <= 0:
        parser.error("--iterations and --delay cannot be negative, and --timeout must be positive")
    return args


def use_for_this_run(args):
    """--goal and --model: what .env and goal.md would give, for this run only, before anything reads them."""
    if args.goal:
        NAMED["goal.md"] = Path(args.goal).resolve()
    if args.model:
        os.environ["OPENAI_MODEL" if os.environ.get("OPENAI_BASE_URL", "").strip() else "GEMINI_MODEL"] = args.model


def config_error(message):
    print(redact(f"fallback: {message}"), file=sys.stderr, flush=True)
    return EX_CONFIG


def what_to_free(error):
    """What a person can do about a write that failed."""
    denied = error.errno in (errno.EACCES, errno.EPERM, errno.EROFS)
    return "make the folder writable" if denied else "free some disk space"


def check_setup(need_key=True, writes=True):
    """The first thing a user must fix, as one line, or None."""
    if os.name != "posix":
        return "fallback.py needs Linux or macOS (on Windows, run it inside WSL)"
    if PROBLEMS:
        return PROBLEMS[0] + (f" ({len(PROBLEMS) - 1} more after this one)" if len(PROBLEMS) > 1 else "")
    if need_key and not os.environ.get("GEMINI_API_KEY", "").strip() and not os.environ.get("OPENAI_BASE_URL"):
        dotenv = (ROOT / ".env").read_text("utf-8", "replace") if (ROOT / ".env").is_file() else ""
        if re.search(r"^[ \t]*(export[ \t]+)?GEMINI_API_KEY[ \t]*=[ \t]*\S", dotenv, re.M):
            if "GEMINI_API_KEY" in os.environ:
                return "GEMINI_API_KEY is set but empty in the environment, which wins over .env: unset it"
            return "GEMINI_API_KEY in .env could not be read: write it as one line,  GEMINI_API_KEY=your-key"
        where = "put it in .env as  GEMINI_API_KEY=your-key" if (ROOT / ".env").is_file() else \
            "copy .env.example to .env and put your key in it"
        return f"GEMINI_API_KEY is not set: {where} (a free key: https://aistudio.google.com/apikey)"
    problem = steering_problem() if need_key else None
    if problem or not writes:
        return problem
    try:
        BACKUPS.mkdir(exist_ok=True)
        probe = BACKUPS / f".write-test-{os.getpid()}"
        probe.write_text("ok")
        probe.unlink()
    except OSError as error:
        return f"cannot write in {BACKUPS} ({error.strerror or error}): make the folder writable, or move it"
    return None


def steering_problem():
    """goal.md (or --goal's file) and pending_tasks.md as no prompt should carry them, as one line: not UTF-8 text,
    a goal missing, empty or binary, or more than the largest prompt; else None."""
    for rel in STEERING:
        path = source_of(rel)
        name = rel if path == ROOT / rel else str(path)
        try:
            text = path.read_bytes().decode("utf-8-sig")
        except FileNotFoundError:
            text = ""
        except OSError as error:
            return f"cannot read {name} ({error.strerror or error}): check its permissions"
        except UnicodeDecodeError as error:
            if rel == "goal.md" or b"\0" in error.object:  # a person's tasks may hold any bytes, kept as they are
                line = error.object[:error.start].count(b"\n") + 1
                return f"{name} is not UTF-8 text (line {line}): save it as UTF-8 text"
            text = error.object.decode("utf-8", "replace")
        if rel == "goal.md" and not text.strip():
            return f"{name} is missing or empty: write in it what you want grown (a few lines are enough)"
        odd = re.search(r"[\x00-\x08\x0b\x0e-\x1f\x7f]" if rel == "goal.md" else "\0", text)
        if odd:  # tasks may hold a failure's output, colour codes and all (never shown raw): only NUL is binary
            return (f"{name} holds a control character ({odd[0]!r}, line {text[:odd.start()].count(chr(10)) + 1}): "
                    "it should be plain text; is it a binary file?")
    tokens = journal.steering_size() // CHARS_PER_TOKEN
    if tokens > PROMPT_TOKENS:
        return (f"goal.md and the open tasks come to ~{tokens:,} tokens, more than the largest prompt "
                f"(~{PROMPT_TOKENS:,}): shorten them")
    return None


def take_lock():
    """Hold an exclusive lock for as long as this process lives; None if another supervisor has it."""
    BACKUPS.mkdir(exist_ok=True)
    lock = LOCK.open("a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        return None, lock.read().strip() or "unknown"
    lock.truncate(0)
    lock.write(str(os.getpid()))
    lock.flush()
    return lock, None


def lock_holder():
    """The pid of a supervisor running on this folder, or None; writes nothing."""
    try:
        with LOCK.open() as lock:
            fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except FileNotFoundError:
        return None
    except BlockingIOError:
        return LOCK.read_text().strip() or "unknown"
    return None


def recover(index):
    """Finish what a killed supervisor (or a full disk) left: a child still running, a half-made snapshot,
    a restore under way, an iteration cut short (its changes are kept, the codebase put back)."""
    terrarium.end_orphans()
    entries = {e["id"]: e for e in index["snapshots"]}
    wanted = load_json(RESTORING).get("id")
    if wanted in entries:
        snap.restore(entries[wanted])
        say(f"finished the restore of snapshot {wanted} that was under way when the last run stopped")
    RESTORING.unlink(missing_ok=True)
    terrarium.finish_landing()
    settle_landing(index, load_json(SETTLING), entries)
    cut_short = load_json(UNDER_WAY)
    if cut_short.get("start") in entries:
        set_aside(index, entries[cut_short["start"]], cut_short.get("iteration", 0))
        killed = {"outcome": "stopped: the supervisor was killed during this iteration", "changes": [],
                  "start": cut_short["start"]}
        record_iteration(book.row_of(cut_short.get("iteration", 0), killed, 0.0), killed)
    UNDER_WAY.unlink(missing_ok=True)
    catch_up_log()


def settle_landing(index, settling, entries):
    """A landing whose row a killed supervisor did not write: the folder has it (finish_landing saw to that), so
    its snapshot is taken and its row written; or it never began, and the row says the iteration was stopped."""
    start = entries.get(settling.get("start"))
    if start and not book.has_row(ROOT, settling.get("iteration")):
        after = snap.snapshot(index, "landed", settling["iteration"])
        changes = snap.changes_since(start) if after["id"] != start["id"] else []
        result = {"outcome": f"landed: {len(changes)} file(s) changed" if changes else "stopped: the supervisor was "
                  "killed during this iteration", "changes": changes, "start": start["id"],
                  "reason": "the supervisor was killed as it landed; the landing was finished at the next start"
                  if changes else "", "after": after["id"] if changes else None}
        record_iteration(book.row_of(settling["iteration"], result, 0.0), result)
    SETTLING.unlink(missing_ok=True)


def catch_up_log():
    """Write the sections of rows a killed supervisor wrote into the record but not yet into the log."""
    for row in book.iterations(ROOT, journal.last_logged_iteration()) if LOG.exists() else []:
        journal.log_iteration(row)


def restore_by_hand(index, wanted):
    """--restore ID and --reset: keep the current state as a snapshot, then restore."""
    entry = snap.find_snapshot(index, wanted)
    if entry is None:
        return config_error(f"there is no snapshot {wanted!r}: see  python fallback.py --list-backups")
    SUSPICION.unlink(missing_ok=True)  # the person chose this state: no walk-back of the loop's is left to undo
    if (snap.current(index) or {}).get("digest") == entry["digest"]:
        print(f"the codebase is already as snapshot {entry['id']} holds it: nothing to restore")
        return 0
    kept = snap.snapshot(index, "by hand", index["iteration"])
    snap.restore(entry)
    entry.update(pinned=True, chosen=book.utc_now())  # the person chose it: never pruned; the page's state now
    snap.save_index(index)
    print(f"restored snapshot {entry['id']}; the codebase as it was is kept as backups/{kept['id']} "
          f"(undo with  python fallback.py --restore {kept['id']})")
    write_report()  # the page says where the codebase stands
    return 0


def keep_by_hand(index, wanted):
    """--keep ID: mark a snapshot as the person's, so that the retention policy never prunes it."""
    entry = snap.find_snapshot(index, wanted)
    if entry is None:
        return config_error(f"there is no snapshot {wanted!r}: see  python fallback.py --list-backups")
    entry["pinned"] = True
    snap.save_index(index)
    print(f"snapshot {entry['id']} is kept whatever the retention policy prunes")
    return 0


class Terminated(KeyboardInterrupt):
    """A SIGTERM: it stops the loop as Ctrl+C does, and the last row says which it was."""


def stop_on_sigterm(signum, frame):
    raise Terminated


def open_gateway():
    """The gateway to the model (Gemini, or the server at OPENAI_BASE_URL), serving on loopback; the one holder
    of the key. A ValueError says in one line which setting to fix."""
    return backends.open_gateway(os.environ, BACKUPS, prompt_tokens=PROMPT_TOKENS, requests_per_run=REQUESTS_PER_RUN,
                                 backoff=BACKOFF, say=show_phase, tell=say)


def main(argv=None):
    args = parse_args(argv)
    use_for_this_run(args)
    if args.list_backups or args.status:  # read-only: fine while a supervisor runs
        return snap.list_backups(snap.load_index()) if args.list_backups else status.show_status(lock_holder())
    if args.show is not None:
        return status.print_iteration(args.show)
    if args.report:
        try:
            print(f"the report is in {page.write_report(ROOT)}: open it in a browser")
        except OSError as error:
            return config_error(f"cannot write report.html ({error.strerror or error}): {what_to_free(error)}")
        return 0
    if args.export_git:
        try:
            print(export.export_git(ROOT, Path(args.export_git)))
        except (ValueError, OSError) as error:
            return config_error(str(error))
        return 0
    if args.materialise:
        entry = snap.find_snapshot(snap.load_index(), args.materialise)
        return snap.materialise(entry) if entry else config_error(f"there is no snapshot {args.materialise!r}: see  "
                                                                  "python fallback.py --list-backups")
    writes = not (args.demo or args.models)  # the demo works in a copy; --models only asks
    problem = None if args.restore or args.reset or args.keep else check_setup(need_key=not args.demo, writes=writes)
    if problem:
        return config_error(problem)
    if args.models:
        return status.list_models()
    if args.demo:
        return demo.run_demo()
    lock, holder = take_lock()
    if lock is None:
        print(f"fallback: another supervisor is already running on {ROOT} (pid {holder}); stop it first "
              f"(Ctrl+C in its terminal, or  kill {holder})", file=sys.stderr)
        return 1
    index = snap.load_index()
    book.writer()  # at the first start, an old workspace's log and ledger are brought into the record
    recover(index)  # before anything else: a killed supervisor may have left a restore half done
    if args.keep:
        return keep_by_hand(index, args.keep)
    if args.restore or args.reset:
        if not index["snapshots"]:
            return config_error("there are no snapshots yet: nothing to restore")
        return restore_by_hand(index, args.restore or index["snapshots"][0]["id"])
    if not (ROOT / "seed.py").is_file():
        return config_error(f"there is no seed.py in {ROOT}: restore it with  python fallback.py --reset  "
                            "or  git checkout seed.py")
    if SANDBOX_REQUIRED and not CONFINEMENT.confined:
        return config_error(f"SEED_SANDBOX=require, and this machine cannot confine the model's code: "
                            f"{CONFINEMENT.text}")
    try:
        gateway = open_gateway()
    except ValueError as error:  # a setting the gateway cannot work with, said in one line
        return config_error(str(error))
    signal.signal(signal.SIGTERM, stop_on_sigterm)
    journal.start_log()
    say(f"supervising {ROOT} ({'forever' if args.iterations == 0 else f'{args.iterations} iteration(s)'}); "
        f"Ctrl+C stops. Progress: {LOG.name}")
    say(f"the model's code runs in {WORK.relative_to(ROOT)}/, confined: {CONFINEMENT.text}")
    try:
        return supervise(args, index, gateway)
    finally:
        gateway.close()


if __name__ == "__main__":
    try:
        CODE = main()
        sys.stdout.flush()  # here, where a reader gone away is caught, and not at exit
        sys.exit(CODE)
    except BrokenPipeError:  # the reader went away (python fallback.py --status | head) having read what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
    except book.sqlite3.Error as error:  # a record damaged or locked by hand
        sys.exit(config_error(f"{book.path_of(ROOT)} cannot be read ({error}): move it aside and start again, and it "
                              "is made anew from iteration_log.md (without the prompts and answers)"))
    except PermissionError as error:  # a command by hand in a folder it may not write, or read
        sys.exit(config_error(f"{error.filename or 'a file'}: {error.strerror or error}: check the folder's "
                              "permissions"))
