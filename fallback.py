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

# Before any other import: nothing of this folder (where the model's code lands) is imported in place of the standard
# library, here or in any process started from here. `python fallback.py` puts the folder first on sys.path, and an
# empty entry of PYTHONPATH ("X=$X:/opt/lib" with X unset) means "the current folder": both go, by their text alone,
# before `os` may be looked up on the path (python -S has not loaded it yet); then every entry that is this folder by
# another name. (The names themselves are refused at landing: gate.shadowing.)
HERE = __file__.rpartition("/")[0] or "."
FIRST = 1 if __name__ == "__main__" and not getattr(sys.flags, "safe_path", 0) else 0  # the script's folder, put first
sys.path[:] = [p for p in sys.path[FIRST:] if p and p != HERE]

import os  # noqa: E402  (every import comes after the lines above)

sys.path[:] = [p for p in sys.path if os.path.realpath(p) != os.path.dirname(os.path.realpath(__file__))]

import signal  # noqa: E402

INTERRUPTED = "interrupted: nothing is half done that the next start does not finish"  # Ctrl+C before the loop


def stopped_while_loading(*_):
    """Ctrl+C while the keeper loads, before main() (which says the same on a KeyboardInterrupt): not a traceback.
    It ends the process at once (os._exit): nothing is open yet, and a SystemExit raised where the interpreter
    ignores exceptions (a callback of the import system's locks, as a module loads) was lost, and the keeper went
    on into its loop after saying it had stopped."""
    print(INTERRUPTED, flush=True)
    os._exit(130)


if __name__ == "__main__":  # from here on: loading the keeper takes a moment a person may press Ctrl+C in
    signal.signal(signal.SIGINT, stopped_while_loading)

import importlib.util  # noqa: E402  (every import comes after the line above)

PACKAGES = ("requests", "dotenv", "pytest")  # what the keeper imports of requirements.txt (pytest-xdist: its tests)


def check_interpreter():
    """What this Python lacks, as one line saying how to fix it, or None. This file up to here runs on 3.8+:
    an older Python must be told so, never left to fail at the first newer line and blame the code."""
    if sys.version_info[:2] < (3, 11):
        return ("fallback.py needs Python 3.11 or newer, and this is %d.%d: run it with a newer one (Ubuntu 22.04:  "
                "sudo apt install python3.11 python3.11-venv, then the README's set-up with python3.11 for python3)"
                % sys.version_info[:2])
    missing = [name for name in PACKAGES if importlib.util.find_spec(name) is None]
    if not missing:
        return None
    from os.path import dirname, isfile, join, realpath, relpath  # the folder's virtual environment, if it has one
    said = "missing Python packages (%s): " % ", ".join("python-dotenv" if n == "dotenv" else n for n in missing)
    venv = next((join(dirname(realpath(__file__)), name) for name in (".venv", "venv")
                 if isfile(join(dirname(realpath(__file__)), name, "pyvenv.cfg"))), None)
    if venv is None:  # the README's set-up (pip into the system's Python fails on Debian and Ubuntu)
        return said + ("set up the folder's virtual environment:  python3 -m venv .venv && . .venv/bin/activate && "
                       "pip install -r requirements.txt")
    if realpath(sys.prefix) != realpath(venv):  # a new shell that did not activate it
        return said + "this Python is not the folder's virtual environment: run  . %s/bin/activate  first (or  " \
            "%s/bin/python fallback.py)" % (relpath(venv), relpath(venv))
    return said + "run  %s -m pip install -r requirements.txt" % os.path.basename(sys.executable)


UNFIT = check_interpreter()
if UNFIT:  # said before anything imports what may be missing, even for --help
    print("fallback: " + UNFIT, file=sys.stderr)
    sys.exit(78)

import errno  # noqa: E402
import fcntl  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from datetime import datetime, timedelta, timezone  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent
SPEC = importlib.util.spec_from_file_location("supervisor", ROOT / "supervisor" / "__init__.py",
                                              submodule_search_locations=[str(ROOT / "supervisor")])
sys.modules["supervisor"] = importlib.util.module_from_spec(SPEC)  # by its path: no other "supervisor" stands in
SPEC.loader.exec_module(sys.modules["supervisor"])
from supervisor import envfile  # noqa: E402

envfile.load(ROOT / ".env")  # before the settings are read from the environment: a value in .env counts everywhere

from supervisor import events  # noqa: E402
from supervisor.confined import terrarium, zygote  # noqa: E402
from supervisor.gateway import backends  # noqa: E402
from supervisor.store import journal, record as book, snapshots as snap  # noqa: E402
from supervisor.views import cli  # noqa: E402
from supervisor.views.console import (count, local_time, report, say, show_iteration, show_phase,  # noqa: E402
                                      start_status_line, summary)
from supervisor.iteration import Memory, note_dry_spell, run_iteration  # noqa: E402
from supervisor.kinds import Account, Outcome, Result  # noqa: E402
from supervisor.recovery import recover, write_iteration  # noqa: E402
from supervisor.settings import (BACKOFF, BACKUPS, EX_CONFIG, FAULT_PAUSE, LOCK, LOG, PROMPT_TOKENS,  # noqa: E402
                                 REQUESTS_PER_RUN, SANDBOX_REQUIRED, SETTLING, WORK, stamp, utc_now)

events.listen(say, show_phase)  # what the keeper's rooms tell is said on the console
PAGE_EVERY = 5.0  # seconds: report.html is drawn at least this often while iterations follow each other at once


# --- the loop ---------------------------------------------------------------------------------
def supervise(args, index, gateway, confinement):
    """Run iterations until --iterations is reached; the exit code."""
    totals, done, recorded, grown_from = Counter(), 0, 0, snap.codebase_size()
    memory = Memory.kept(index)
    # the index may not have been saved: the log and the record know the last iteration too
    index["iteration"] = max(index["iteration"], journal.last_logged_iteration(), book.last_number())
    start_status_line()
    try:
        while args.iterations == 0 or done < args.iterations:
            index["iteration"] += 1
            show_iteration(index["iteration"])
            result, row = iterate(index, args, memory, gateway, totals, confinement)
            if row:  # else nothing ran: no iteration to number, log or report
                report(row, result.headline(local_time), totals)
            done, recorded = done + 1, recorded + bool(row)  # a wait before asking counts toward --iterations
            ending = result.outcome is Outcome.STOPPED or (args.iterations and done >= args.iterations)
            if not ending and (result.until or args.delay >= PAGE_EVERY or time.monotonic() - page.drawn >= PAGE_EVERY):
                page.draw()  # the last is drawn as the loop ends
            if result.outcome is Outcome.STOPPED:
                say(f"stopped: {result.reason}", "stopped")
                return EX_CONFIG
            if args.iterations == 0 or done < args.iterations:
                pause(result, args.delay)
            elif result.until:  # the last of --iterations N: no wait follows, but its reason is said
                say(f"the next iteration would wait: {result.reason}")
        return 0
    except KeyboardInterrupt:
        show_phase("")
        say("interrupted: the seed is stopped, the codebase is consistent, the lock is free")
        return 130
    finally:
        cli.write_report()  # the last iterations, Ctrl+C's own row included, are on the page: it stops reloading
        say(summary(recorded, totals, grown_from, snap.codebase_size()))


def iterate(index, args, memory, gateway, totals, confinement):
    """One iteration, recorded: (its Result, its row), or (the Result, None) when nothing could be asked. A row Ctrl+C
    ended is written here, and counted in `totals`."""
    number, began, started = index["iteration"], time.monotonic(), stamp(utc_now())
    try:
        snap.save_index(index)
        if memory.cut_short:  # what the last iteration could not write is finished first (at a start, main did)
            recover(index)
            memory.cut_short = False
        result = run_iteration(number, index, args.timeout, memory, gateway, confinement.text)
    except OSError as error:  # a full disk, a file size limit: wait, then finish what was cut short
        freed = terrarium.free_space() if error.errno == errno.ENOSPC else ""  # a run may have filled it
        again = memory.full == str(error)  # the same as the last iteration: waits twice as long, one section in all
        memory.cut_short, memory.full = True, str(error)
        memory.full_pause = min(2 * memory.full_pause, 3600) if again else max(0.1, min(60.0, FAULT_PAUSE))
        until = datetime.now(timezone.utc) + timedelta(seconds=memory.full_pause)
        result = Result(Outcome.WAITING, f"cannot write ({error.strerror or error})",
                        f"{error}: {freed}{cli.what_to_free(error)}", until=until, asked=not again)
    except KeyboardInterrupt as stop:
        stopped = Result(Outcome.STOPPED, f"interrupted ({'SIGTERM' if isinstance(stop, Terminated) else 'Ctrl+C'})",
                         said=memory.interrupted or Account())
        if not SETTLING.exists():  # else a landing was under way: the next start finishes it, and its row
            write_iteration(row := book.row_of(number, stopped, time.monotonic() - began, started), stopped)
            count(row, totals)
            page.due = True
        raise
    else:
        memory.full = None
    finally:
        show_phase("")
    if not result.asked:
        index["iteration"] -= 1
        try:
            snap.save_index(index)
        except OSError as error:  # the disk still full: the next iteration saves it, or waits again
            say(f"cannot write backups/ ({error}): {cli.what_to_free(error)}")
        return result, None
    result = note_dry_spell(index, result, memory)
    row = book.row_of(number, result, time.monotonic() - began, started)
    page.due = True
    try:
        write_iteration(row, result)
        memory.keep()
        snap.prune(index)
    except (OSError, book.sqlite3.Error) as error:
        memory.cut_short = True
        say(f"cannot write the record, the log or backups/ ({error}): {cli.what_to_free(error)}")
    return result, row


class Page:
    """report.html, drawn after the iterations it shows: after the first, after each one the loop rests after, and
    at least every PAGE_EVERY seconds when iterations follow each other at once (drawing it costs more than a quick
    iteration)."""

    def __init__(self):
        self.drawn, self.due = float("-inf"), False  # the first iteration's page is drawn at once

    def draw(self):
        if self.due:
            cli.write_report(live=True)  # while the loop runs, the page reloads itself
            self.drawn, self.due = time.monotonic(), False


page = Page()


def pause(result, delay):
    """Wait before the next iteration: as the seed asked after exit 75, longer when stuck at genesis."""
    if result.until:
        seconds = (result.until - datetime.now(timezone.utc)).total_seconds()
        say(f"waiting until {result.until.astimezone():%H:%M} local time ({seconds / 60:.0f} min): {result.reason}")
        show_phase(f"waiting for the model until {local_time(result.until)}: {result.reason}", restart=True)
    elif result.stuck:
        seconds = max(delay, 600)
        say(f"no known-good state is left to go back to; trying again in {seconds / 60:.0f} min")
    else:
        seconds = delay
    try:
        time.sleep(max(0.0, seconds))
    finally:
        show_phase("")


# --- the keeper's hold on the folder ------------------------------------------------------------
def take_lock():
    """Hold an exclusive lock for as long as this process lives; None if another keeper has it."""
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
    """The pid of a keeper running on this folder, or None; writes nothing."""
    try:
        with LOCK.open() as lock:
            fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except FileNotFoundError:
        return None
    except BlockingIOError:
        return LOCK.read_text().strip() or "unknown"
    return None


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
    args = cli.parse_args(argv)
    cli.use_for_this_run(args)
    code = cli.run_by_hand(args, lock_holder)
    if code is not None:
        return code
    lock, holder = take_lock()
    if lock is None:
        print(f"fallback: another keeper is already running on {ROOT} (pid {holder}); stop it first "
              f"(Ctrl+C in its terminal, or  kill {holder})", file=sys.stderr)
        return 1
    index = snap.load_index()
    if not index["snapshots"] and journal.last_logged_iteration():
        say(f"backups/ holds no snapshot, though {LOG.name} tells of {journal.last_logged_iteration()} iteration(s): "
            "it was deleted or moved; the folder as it is now becomes the first snapshot, and the log's iterations "
            "are read into a new record (the prompts, answers and earlier states went with backups/)")
    book.writer()  # at the first start, an old workspace's log and ledger are brought into the record
    journal.start_log()  # first: the catch-up below writes into the log a set-aside killed between its moves began
    recover(index)  # before anything else: a killed keeper may have left a restore half done
    code = cli.change_by_hand(args, index)
    if code is not None:
        return code
    if not (ROOT / "seed.py").is_file():
        return cli.config_error(f"there is no seed.py in {ROOT}: restore it with  python fallback.py --reset  "
                                "or  git checkout seed.py")
    confinement = terrarium.confinement()  # what this machine can confine the model's code with: in every log
    if SANDBOX_REQUIRED and not confinement.confined:
        return cli.config_error(f"SEED_SANDBOX=require, and this machine cannot confine the model's code: "
                                f"{confinement.text}")
    try:
        gateway = open_gateway()
    except ValueError as error:  # a setting the gateway cannot work with, said in one line
        return cli.config_error(str(error))
    signal.signal(signal.SIGTERM, stop_on_sigterm)
    try:  # the run's identity, and what a replay needs of this start
        book.writer().begin_run(cli.VERSION, type(gateway.backend).__name__, gateway.models, args.timeout,
                                answer_format=gateway.backend.answer_format)
    except (OSError, book.sqlite3.Error) as error:  # a full disk: the loop waits for room, as for anything it writes
        say(f"cannot write this start into the record ({error}): {cli.what_to_free(error)}")
    say(f"growing {ROOT} ({'forever' if args.iterations == 0 else f'{args.iterations} iteration(s)'}); "
        f"Ctrl+C stops. Progress: {LOG.name}")
    say(f"the model's code runs in {WORK.relative_to(ROOT)}/, confined: {confinement.text}")
    try:
        return supervise(args, index, gateway, confinement)
    finally:
        gateway.close()


def run(argv=None):
    """main(argv) as a command ends: its exit status, with what stops it before or around the loop said in one
    line (a test runs the keeper in its own process through this, as `python fallback.py` does)."""
    try:
        code = main(argv)
        sys.stdout.flush()  # here, where a reader gone away is caught, and not at exit
        return code
    except KeyboardInterrupt:  # Ctrl+C before the loop began (or during a command by hand): the loop says its own
        say(INTERRUPTED)
        return 130
    except BrokenPipeError:  # the reader went away (python fallback.py --status | head) having read what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except book.sqlite3.Error as error:  # a record damaged or locked by hand
        return cli.config_error(f"{book.path_of(ROOT)} cannot be read ({error}): move it aside and start again, and "
                                "it is made anew from iteration_log.md (without the prompts and answers)")
    except PermissionError as error:  # a command by hand in a folder it may not write, or read
        return cli.config_error(f"{error.filename or 'a file'}: {error.strerror or error}: check the folder's "
                                "permissions")
    finally:  # what the keeper opened ends with its run, in its own process or not (a second Ctrl+C too)
        try:
            zygote.stop()
        finally:
            book.close()


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)  # a KeyboardInterrupt, which the loop stops on
    try:
        sys.exit(run())
    except KeyboardInterrupt:  # pressed again while the keeper ends what it opened: it is ended all the same
        sys.exit(130)
