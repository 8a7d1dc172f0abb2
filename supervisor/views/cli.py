"""cli: the command line: its options, and the commands a person runs by hand (each answers, and exits).

    args = parse_args(argv)          # the options (--help lists them; docs/settings.md says more)
    use_for_this_run(args)           # --goal and --model, before anything reads goal.md or the settings
    code = run_by_hand(args, lock_holder)   # a read-only command's exit code, or None when the loop is to run
    code = change_by_hand(args, index)      # --keep, --restore, --reset, under the lock: an exit code, or None

A mistake a person can fix is said in one line (config_error) with exit code 78; read-only commands work while a
keeper runs on the folder.
"""
import argparse
import difflib
import errno
import os
import sys
from pathlib import Path

from . import compare, demo, export, report as page, status
from ..experiments import experiment
from ..store import snapshots as snap
from ..confined import terrarium
from .console import say
from ..scrub import redact
from .preflight import check_setup, write_problem
from ..settings import EX_CONFIG, NAMED, ROOT, SUSPICION, guard, stamp, utc_now

VERSION = "2026.11"
UNJUDGED = {"failed": "a change that failed the checks", "interrupted": "a run's changes that were never checked"}


def run_by_hand(args, lock_holder):
    """The exit code of a command that needs no lock (it reads, writes a page, or works in a copy), or None."""
    if args.list_backups or args.status:  # read-only: fine while a keeper runs
        return snap.list_backups(snap.load_index()) if args.list_backups else status.show_status(lock_holder())
    if args.show is not None:
        return status.print_iteration(args.show)
    if args.report:
        try:
            print(f"the report is in {page.write_report(ROOT, live=bool(lock_holder()))}: open it in a browser")
        except OSError as error:
            return config_error(f"cannot write report.html ({error.strerror or error}): {what_to_free(error)}")
        return 0
    if args.export_git:
        try:
            print(export.export_git(ROOT, Path(args.export_git)))
        except (ValueError, OSError) as error:
            return config_error(str(error))
        return 0
    if args.replay:  # these three read this folder (and others), and write elsewhere or compare.html only
        return experiment.replay(Path(args.replay), VERSION)
    if args.fork:
        return experiment.fork(*args.fork, VERSION)
    if args.compare:
        return compare.write_compare(ROOT, [Path(folder) for folder in args.compare])
    if args.materialise:
        entry = snap.find_snapshot(snap.load_index(), args.materialise)
        problem = write_problem() if entry else None
        return config_error(problem) if problem else snap.materialise(entry) if entry else \
            no_such_snapshot(args.materialise)
    writes = not (args.demo or args.models)  # the demo works in a copy; --models only asks
    by_hand = args.restore or args.reset or args.keep  # no key needed: only a folder they can write
    problem = write_problem() if by_hand else check_setup(need_key=not args.demo, writes=writes)
    if problem:
        return config_error(problem)
    if args.models:
        return status.list_models()
    if args.demo:
        return demo.run_demo()
    return None


def change_by_hand(args, index):
    """--keep, --restore and --reset (under the lock, after recovery): their exit code, or None for the loop."""
    if args.keep:
        return keep_by_hand(index, args.keep)
    if args.restore or args.reset:
        if not index["snapshots"]:
            return config_error("there are no snapshots yet: nothing to restore")
        return restore_by_hand(index, args.restore or index["snapshots"][0]["id"], args.force)
    return None


def restore_by_hand(index, wanted, force=False):
    """--restore ID and --reset: keep the current state as a snapshot, then restore. A state that never passed the
    checks (a failed change, a run cut short) is restored only with --force: the folder holds states that passed."""
    entry = snap.find_snapshot(index, wanted)
    if entry is None:
        return no_such_snapshot(wanted)
    if entry["kind"] in UNJUDGED and not force:
        return config_error(f"snapshot {entry['id']} is {UNJUDGED[entry['kind']]}: look at it with  python fallback.py "
                            f"--materialise {entry['id']}  (its files in backups/{entry['id']}/), or put it in the "
                            f"folder anyway with  --restore {entry['id']} --force")
    SUSPICION.unlink(missing_ok=True)  # the person chose this state: no walk-back of the loop's is left to undo
    if (snap.current(index) or {}).get("digest") == entry["digest"]:
        print(f"the codebase is already as snapshot {entry['id']} holds it: nothing to restore")
        return 0
    kept = snap.snapshot(index, "by hand", index["iteration"])
    snap.restore(entry)
    entry.update(pinned=True, chosen=stamp(utc_now()))  # the person chose it: never pruned; the page's state now
    snap.save_index(index)
    print(f"restored snapshot {entry['id']}" + (f" ({UNJUDGED[entry['kind']]})" if entry["kind"] in UNJUDGED else "")
          + f"; the codebase as it was is kept as snapshot {kept['id']} (undo with  python fallback.py --restore "
          f"{kept['id']})")
    write_report()  # the page says where the codebase stands
    return 0


def keep_by_hand(index, wanted):
    """--keep ID: mark a snapshot as the person's, so that the retention policy never prunes it."""
    entry = snap.find_snapshot(index, wanted)
    if entry is None:
        return no_such_snapshot(wanted)
    entry["pinned"] = True
    snap.save_index(index)
    print(f"snapshot {entry['id']} is kept whatever the retention policy prunes")
    return 0


def write_report(live=False):
    """Rewrite report.html (`live`: while the loop runs, so it reloads itself); the page is for watching, so no
    fault of its own ever stops the loop."""
    try:
        page.write_report(ROOT, live=live)
    except Exception as error:  # noqa: BLE001 (the loop goes on whatever the page meets)
        say(f"report.html was not rewritten ({type(error).__name__}: {error})")


def no_such_snapshot(wanted):
    return config_error(f"there is no snapshot {wanted!r}: see  python fallback.py --list-backups")


def config_error(message):
    print(redact(f"fallback: {message}"), file=sys.stderr, flush=True)
    return EX_CONFIG


def what_to_free(error):
    """What a person can do about a write that failed."""
    denied = getattr(error, "errno", None) in (errno.EACCES, errno.EPERM, errno.EROFS)  # SQLite's errors have none
    return "make the folder writable" if denied else "free some disk space"


# --- the options ------------------------------------------------------------------------------
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
  1    another keeper is running on this folder; or --replay: an iteration differs
  2    a command-line mistake
  75   the model server or the API could not be reached (--models)
  78   something to fix first: one line says what (Python, packages, .env, goal.md, a setting,
       a --fork into a folder that is not empty)
  130  stopped with Ctrl+C (running again resumes)

examples:
  python fallback.py --demo                  watch three iterations offline, no key needed
  python fallback.py --iterations 5          five iterations, then a summary
  python fallback.py --goal ideas.md --model gemini-3.5-flash-lite   one run with another goal and model
"""


class Parser(argparse.ArgumentParser):
    """argparse, saying after an option it does not know the one it resembles (--iteration: --iterations)."""

    def error(self, message):
        options = [option for action in self._actions for option in action.option_strings]
        unknown = message.partition("unrecognized arguments:")[2].split()
        hints = [f"{close[0]} for {word}" for word in unknown if word.startswith("-")
                 and (close := difflib.get_close_matches(word.split("=")[0], options, 1, 0.6))]
        super().error(message + (f" (did you mean {', '.join(hints)}?)" if hints else ""))


def parse_args(argv):
    parser = Parser(description="Run seed.py over and over, keeping the codebase alive.",
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
    by_hand.add_argument("--demo", action="store_true", help="watch three iterations against a scripted model "
                                                            "in a throwaway copy (no key, no network) and exit")
    by_hand.add_argument("--status", action="store_true", help="show the keeper, the last iterations, pending "
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
    by_hand.add_argument("--replay", nargs="?", const=str(ROOT), metavar="FOLDER", help="replay the run recorded in "
                         "FOLDER (default: this one) offline, in a throwaway copy, each answer from its record; one "
                         "line per iteration; exit 1 if one differs")
    by_hand.add_argument("--fork", nargs=2, metavar=("N", "DIR"), help="make DIR (new or empty) a workspace whose "
                         "codebase is this one's after iteration N (or snapshot N, as --list-backups shows it)")
    by_hand.add_argument("--compare", nargs="+", metavar="DIR", help="write compare.html: this run and the runs in "
                         "the DIRs side by side")
    by_hand.add_argument("--list-backups", action="store_true", help="list the snapshots in backups/ and exit")
    by_hand.add_argument("--materialise", metavar="ID", help="write snapshot ID's files to backups/ID/ to look "
                                                                "at, and exit")
    by_hand.add_argument("--restore", metavar="ID", help="put the codebase back as snapshot ID was (the current "
                                                          "state is kept as a snapshot first) and exit")
    by_hand.add_argument("--reset", action="store_true", help="go back to the first snapshot (genesis), the "
                                                             "same way, and exit")
    by_hand.add_argument("--keep", metavar="ID", help="keep snapshot ID in backups/ whatever the retention policy "
                                                      "prunes, and exit")
    parser.add_argument("--force", action="store_true", help="with --restore: restore a state that failed the checks "
                                                              "(or was never checked)")
    args = parser.parse_args(argv)
    if args.force and not args.restore:
        parser.error("--force goes with --restore ID (a state that failed the checks)")
    if args.iterations < 0 or args.delay < 0 or args.timeout <= 0:
        parser.error("--iterations and --delay cannot be negative, and --timeout must be positive")
    return args


def use_for_this_run(args):
    """--goal and --model: what .env and goal.md would give, for this run only, before anything reads them."""
    if args.goal:
        NAMED["goal.md"] = goal = Path(args.goal).resolve()
        if goal.is_relative_to(ROOT) and goal != ROOT:  # a file of the folder: the person's, as goal.md is
            guard(goal.relative_to(ROOT).as_posix())
            terrarium.KEEPER_FILES.add(goal.relative_to(ROOT).as_posix().casefold())  # what a run wrote of it
    if args.model:
        NAMED["--model"] = args.model  # the advice on a model that cannot be asked names the option, not .env
        os.environ["OPENAI_MODEL" if os.environ.get("OPENAI_BASE_URL", "").strip() else "GEMINI_MODEL"] = args.model

