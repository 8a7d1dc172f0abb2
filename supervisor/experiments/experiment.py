"""experiment: a recorded run set beside itself: replayed offline from its record, or forked at any iteration.

    replay(folder, version)      python fallback.py --replay [FOLDER]: 0 every iteration the same, 1 one differs
    fork(at, target, version)    python fallback.py --fork N DIR: DIR a workspace that runs on from iteration N

A replay lays out a throwaway copy: the run's genesis snapshot (read from FOLDER's store), the keeper that runs
the replay (the one under test) and a copy of FOLDER's record. Then, for each start of the keeper the record
holds, it puts back the goal, tasks and evaluate.py as they were (and the log as it was, at the first), and runs
`python fallback.py --iterations K` there with the start's settings, the replay backend (replay.py) answering
from the record. Each iteration is compared with its record as its row appears: the outcome, the bytes (the
state it left the folder in, and the change it kept when one was rolled back) and each prompt (its texts), once
what is the moment's and not the run's is masked in both: clock times, measured seconds, the two folders' paths.
FOLDER is only read. A fork is made beside DIR and moved into place whole, so a fork that fails leaves nothing.
Both refuse what they cannot do with one line (exit 78) and change nothing.
"""
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..store import record
from ..gateway import replay as served
from ..scrub import redact
from ..store.journal import LOG_HEAD, section_of
from ..settings import EX_CONFIG, KEEPER, LOG, LOG_SHOWN, ROOT, STEERING, write_atomically
from ..store.snapshots import Reader, fork_store
from ..untrusted import Untrusted

VOLATILE = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d(?::\d\d(?:\.\d+)?)?|\b\d+\.\d+ ?s\b|(?<= at )0x[0-9a-f]{6,}\b")
# times, seconds taken, and where an object was in memory ("<function add at 0x7f2a...>" in a failing test's output)
KEEPER_EXTRAS = [".env.example", ".gitignore"]  # besides settings.KEEPER: never .env, which holds the key
CACHES = shutil.ignore_patterns("__pycache__", ".pytest_cache", "*.pyc")
POLL = 0.2  # seconds between looks at the replay's record for rows to compare
CONFINING = ("SEED_SANDBOX", "SEED_NAMESPACES")  # how the model's code is confined: the person's own, never a record's


def refuse(message):
    print(redact(f"fallback: {message}"), file=sys.stderr, flush=True)
    return EX_CONFIG


# --- replay ---------------------------------------------------------------------------------------
def replay(folder, version):
    """Replay the run recorded in `folder` in a throwaway copy with this keeper (of `version`) and say, one line an
    iteration, whether each is the same; the exit code."""
    folder = folder.resolve()
    problem, starts = replayable(folder)
    if problem:
        return refuse(problem)
    place = Path(tempfile.mkdtemp(prefix="seed-replay-"))
    recorded, copy = copy_record(folder, place / "recorded"), place / "workspace"
    try:
        lay_out(folder, copy, starts[0])
    except (Untrusted, OSError) as why:  # a store written by hand, or missing an object
        shutil.rmtree(place, ignore_errors=True)
        return refuse(f"{why}: it is not replayed")
    judged = Comparison(folder, recorded, copy, starts[0]["first"] - 1)
    try:
        for start, count in pairs_of(starts, record.last_number(recorded)):
            if not run_start(recorded, copy, start, count, judged, place / "keeper.log"):
                break
    except KeyboardInterrupt:
        print(f"interrupted: the copy is in {copy}", file=sys.stderr)
        return 130
    return judged.conclude(place, copy, f"{version}+{record.keeper_digest(ROOT)}")


def replayable(folder):
    """(why the run in folder cannot be replayed, or None; its starts: the runs rows)."""
    if not record.path_of(folder).is_file():
        return f"{folder} holds no record (backups/record.sqlite): replay a folder the keeper has run in", []
    starts, kept = record.runs(folder), Reader(folder).snapshots()
    if not starts:
        return (f"the record in {folder} was made by an older keeper, which kept no runs: a replay needs the goal and "
                "the tasks as they were at its start"), []
    genesis = kept[0] if kept else None
    if not genesis or genesis["kind"] != "genesis" or genesis["iteration"] != starts[0]["first"]:
        return (f"the run in {folder} began before its record kept runs (iterations before "
                f"{starts[0]['first']}), or its genesis snapshot is gone: it cannot be replayed from the start"), []
    return None, [{**start, "genesis": genesis} if n == 0 else start for n, start in enumerate(starts)]


def pairs_of(starts, last):
    """[(a start of the keeper, the iterations it ran)] of those that ran any."""
    ends = [start["first"] for start in starts[1:]] + [last + 1]
    return [(start, end - start["first"]) for start, end in zip(starts, ends) if end > start["first"]]


def copy_record(folder, root):
    """A copy of folder's record in root/backups/ (read through a read-only connection: folder is never written)."""
    (root / "backups").mkdir(parents=True)
    source, target = record.reader(folder), record.sqlite3.connect(record.path_of(root))
    with target:
        source.backup(target)
    source.close()
    target.close()
    return root


def lay_out(folder, copy, first):
    """The copy as the run began: its genesis files, this keeper, the log as the first start found it, and for a
    fork, the record naming its parent (which a fork's record holds before its first start)."""
    store = Reader(folder)
    for rel, sha in store.codebase_of(first["genesis"]).items():
        write_file(copy / rel, store.object_path(sha).read_bytes())
    copy_keeper(copy, ["fallback.py", "supervisor/"])
    if first["parent"]:
        book = record.Writer(record.path_of(copy))
        book.add_run({key: first[key] for key in record.RUN_COLUMNS})
        book.db.close()
    if isinstance(first["log"], str):
        write_file(copy / LOG.name, first["log"].encode("utf-8", "surrogateescape"))


def write_file(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def copy_keeper(target, parts):
    """This keeper's files and folders `parts` (as settings.KEEPER names them) into target, caches left out."""
    for rel in parts:
        source = ROOT / rel.rstrip("/")
        if source.is_dir():
            shutil.copytree(source, target / rel.rstrip("/"), ignore=CACHES, dirs_exist_ok=True)
        elif source.is_file():
            write_file(target / rel, source.read_bytes())


def put_steering(copy, start):
    """The goal, tasks and evaluate.py as they were at a start of the keeper (one it did not have is removed)."""
    for rel in (*STEERING, "evaluate.py"):
        text = start["steering"].get(rel) if isinstance(start["steering"], dict) else None
        if not isinstance(text, str):
            (copy / rel).unlink(missing_ok=True)
        else:
            write_file(copy / rel, text.encode("utf-8", "surrogateescape"))


def run_start(recorded, copy, start, count, judged, log):
    """Run the copy's keeper for one recorded start, comparing each row as it appears; False when it stopped
    before its last iteration."""
    put_steering(copy, start)
    settings = start["settings"] if isinstance(start["settings"], dict) else {}
    timeout = settings.get("--timeout")
    command = [sys.executable, str(copy / "fallback.py"), "--iterations", str(count), "--delay", "0",
               "--timeout", str(timeout if isinstance(timeout, (int, float)) and timeout > 0 else 900)]
    with log.open("ab") as output:
        keeper = subprocess.Popen(command, cwd=copy, env=replay_env(settings, recorded, start["first"]),
                                  stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        follow(keeper, judged)
    if judged.seen < start["first"] + count - 1:
        tail = log.read_text("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
        judged.stopped(start["first"] + count - 1, f"the replay's keeper stopped (exit {keeper.returncode}): {tail[0]}")
        return False
    return True


def replay_env(settings, recorded, first):
    """The environment of the copy's keeper: this one's, less the backends' settings and the SEED_ ones, which the
    start's recorded settings give back (those that confine the model's code stay yours), and the replay's own."""
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("GEMINI_", "OPENAI_", "SEED_")) or name in CONFINING}
    env.update({name: value for name, value in settings.items() if name not in CONFINING
                and record.SETTING.fullmatch(name) and isinstance(value, str) and record.VALUE.fullmatch(value)},
               SEED_REPLAY=str(recorded), SEED_REPLAY_FROM=str(first), GEMINI_API_KEY="replay-offline")
    return env


def follow(keeper, judged):
    """Compare the replay's rows as they appear, until its keeper ends (stopped, by its id, if this one is)."""
    try:
        while keeper.poll() is None:
            judged.catch_up()
            time.sleep(POLL)
    finally:
        if keeper.poll() is None:
            keeper.terminate()  # Ctrl+C reached it too: it stops cleanly
            keeper.wait()
    judged.catch_up()


class Comparison:
    """The recorded run and its replay, compared iteration by iteration as the replay's rows appear."""

    def __init__(self, folder, recorded, copy, since):
        self.folder, self.recorded, self.copy = folder, recorded, copy
        self.seen, self.first, self.said = since, None, {"same": 0, "differs": 0, "skipped": 0}
        self.stores, self.decoded = (Reader(folder), Reader(copy)), {recorded: {}, copy: {}}
        self.origin = {e["id"]: e for e in self.stores[0].snapshots()}

    def catch_up(self):
        """Say how each iteration the replay wrote since the last look compares (a record its keeper is still making
        is looked at again the next time)."""
        try:
            rows = record.iterations(self.copy, since=self.seen)
        except record.sqlite3.Error:
            return
        for row in rows:
            was = (record.iterations(self.recorded, number=row["number"]) or [None])[0]
            self.say(row["number"], was, self.differences(was, row))

    def stopped(self, last, why):
        for number in range(self.seen + 1, last + 1):
            self.say(number, (record.iterations(self.recorded, number=number) or [None])[0], [why])

    def say(self, number, was, found):
        self.seen, was = number, was or {"outcome": "not in the record"}
        verdict = "skipped" if found is None else "differs" if found else "same"
        self.said[verdict] += 1
        self.first = self.first or (number if found else None)
        print(f"iteration {number}: " + {"skipped": f"skipped: the record holds no answer to serve ({was['outcome']})",
                                         "differs": f"differs: {'; '.join(found or [])}",
                                         "same": f"the same ({was['outcome']})"}[verdict], flush=True)

    def differences(self, was, row):
        """What differs between the recorded iteration and its replay (None: skipped, as the record holds no answer)."""
        if was is None:
            return ["the record holds no such iteration"]
        if served.skipped(was, served.answered(self.recorded, row["number"])):
            return None
        found = []
        if self.masked(was["outcome"]) != self.masked(row["outcome"]):
            found.append(f"the outcome (recorded: {was['outcome']}; replayed: {row['outcome']})")
        for what, recorded, replayed in (("the state it left", state_left(was), state_left(row)),
                                         ("the change it rolled back", was["kept"], row["kept"])):
            files = self.files_differing(recorded, replayed)
            if files is not None:
                found.append(f"{what} ({', '.join(files[:5]) or 'its files'})")
        found += self.prompts_differing(row["number"])
        return found

    def files_differing(self, recorded, replayed):
        """The paths whose bytes differ between a recorded snapshot and the replay's; None when they are the same, or
        the recorded one is no longer kept (nothing to compare with)."""
        if not recorded or recorded not in self.origin:
            return None
        theirs = self.stores[0].files_of(self.origin[recorded])
        ours = self.stores[1].files_of({"id": replayed}) if replayed else {}
        if not theirs or theirs == ours:
            return None
        return sorted(rel for rel in theirs.keys() | ours.keys() if theirs.get(rel) != ours.get(rel))

    def prompts_differing(self, number):
        """How the replay's prompts differ from the recorded ones: [] if in nothing, else one line."""
        was, now = self.prompts(self.recorded, number), self.prompts(self.copy, number)
        if len(was) != len(now):
            return [f"the prompts (recorded: {len(was)} request(s); replayed: {len(now)})"]
        for request, (a, b) in enumerate(zip(was, now), 1):
            if a != b:
                line = next(n for n, (x, y) in enumerate(zip(a + [""], b + [""]), 1) if x != y)
                return [f"the prompt (request {request}, line {line}: recorded {quote(a, line)}, replayed "
                        f"{quote(b, line)})"]
        return []

    def prompts(self, root, number):
        """The texts of an iteration's prompts, masked, each as lines."""
        return [self.masked(record.texts_of((record.exchange(root, request, self.decoded[root]) or {}).get("prompt")
                                            or b"")).splitlines() for request, *_ in record.requests_of(root, number)]

    def masked(self, text):
        """The text without what is the moment's: clock times, seconds taken, the folders' own paths."""
        for root in (self.folder, self.copy):
            text = text.replace(str(root), "FOLDER")
        return VOLATILE.sub("…", text)

    def conclude(self, place, copy, ours):
        """The last line and the exit code; the copy is removed when all is the same, else kept to look at."""
        identity = record.identity(self.recorded) or {}
        said = self.said
        if self.first:
            print(f"{said['differs']} of {sum(said.values())} iteration(s) differ, iteration {self.first} first; the "
                  f"replay is in {copy} (python fallback.py --show N there)")
            return 1
        shutil.rmtree(place, ignore_errors=True)
        print(f"all {said['same']} iteration(s) replayed the same ({said['skipped']} skipped); run "
              f"{identity.get('id')}, recorded by keeper {', '.join(identity.get('versions') or ['?'])}, replayed by "
              f"keeper {ours}")
        return 0


def state_left(row):
    """The snapshot holding the state an iteration left the folder in (its start, when it changed nothing)."""
    return row["snapshot_after"] or row["snapshot_before"]


def quote(lines, number):
    """Line `number` of lines, shown short."""
    text = lines[number - 1] if number <= len(lines) else "(none)"
    return repr(text[:60] + ("…" if len(text) > 60 else ""))


# --- fork -----------------------------------------------------------------------------------------
def fork(at, target, version):
    """Make `target` a workspace whose codebase is this folder's state after iteration `at` (or snapshot `at`); the
    exit code."""
    target = Path(os.path.abspath(Path(target).expanduser()))
    kept = Reader(ROOT).snapshots()
    problem = where_problem(target) or (None if kept else "there are no snapshots yet: nothing to fork")
    point = None if problem else fork_point(kept, at)
    if problem or isinstance(point, str):
        return refuse(problem or point)
    entry, after = point
    build = target.parent / f".{target.name}.fork-{secrets.token_hex(4)}"
    try:
        shared = lay_out_fork(build, entry, after, version)
        if target.exists():
            target.rmdir()
        os.rename(build, target)
    except (OSError, Untrusted) as error:
        shutil.rmtree(build, ignore_errors=True)
        return refuse(f"cannot make {target} ({getattr(error, 'strerror', None) or error}): nothing was made")
    print(f"forked {ROOT} after iteration {after} (snapshot {entry['id']}) into {target}: {shared['entry']['count']} "
          f"file(s); its store shares {shared['linked']:,} bytes with this one by hard links "
          f"({shared['copied']:,} copied)\nrun on:  cd {target} && python fallback.py --model NAME   (the key is not "
          "copied: put it in its .env)")
    return 0


def where_problem(target):
    """Why the fork cannot be made at target, as one line, or None."""
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        return f"{target} is not an empty folder: fork into a new or an empty one"
    if not target.parent.is_dir():
        return f"{target.parent} is not a folder: make it first, or fork into a folder in one that is"
    if target.resolve().is_relative_to(ROOT.resolve()):
        return f"{target} is inside this folder, whose codebase it would join: fork into a folder outside it"
    return None


def fork_point(kept, at):
    """(the snapshot, the iteration after which it stands) of `at`: an iteration number, or a snapshot id as
    --list-backups shows it (with its leading zeros); or one line saying why there is none."""
    if not at.isdigit():
        return f"{at!r} is neither an iteration number nor a snapshot id: see  python fallback.py --list-backups"
    by_id = {entry["id"]: entry for entry in kept}
    if at.startswith("0") and len(at) > 1:
        entry = by_id.get(f"{int(at):04d}")
        after = entry and entry["iteration"] - (entry["kind"] in ("genesis", "before"))
    else:
        last, after = record.last_number(ROOT), int(at)
        if after > last:
            return f"the record holds iterations 1 to {last}: there is no iteration {after} to fork after"
        entry = by_id.get(record.state_after(ROOT, after) or "") if after else kept[0]
    if entry is None or not Reader(ROOT).files_of(entry):
        return (f"the state after iteration {at} is no longer kept in backups/ (pruned by the retention policy): fork "
                "from one  python fallback.py --list-backups  shows") if at[0] != "0" else \
            f"there is no snapshot {at}: see  python fallback.py --list-backups"
    return entry, after


def lay_out_fork(build, entry, after, version):
    """The fork in `build`: the codebase after `after`, the keeper, the person's files, a store of one snapshot
    sharing this one's objects, a record naming its parent, and the log's last iterations (the next prompt's)."""
    build.mkdir()
    store = Reader(ROOT)
    for rel, sha in store.codebase_of(entry).items():
        write_file(build / rel, store.object_path(sha).read_bytes())
    copy_keeper(build, [rel for rel in KEEPER if rel != "backups/"] + KEEPER_EXTRAS + [*STEERING, "evaluate.py"])
    shared = fork_store(store, entry, build / "backups", after + 1)
    book = record.Writer(record.path_of(build))
    write_atomically(build / LOG.name, log_until(after))
    parent = {"folder": str(ROOT), "run": (record.identity(ROOT) or {}).get("id"), "iteration": after,
              "snapshot": entry["id"]}
    book.begin_run(version, None, [], parent=parent, root=build)
    book.db.close()
    return shared


def log_until(after):
    """iteration_log.md for a fork: its parent's last sections up to `after`, as much as the working copy shows."""
    sections = [redact(section_of(row)) for row in record.iterations(ROOT, until=after, last=200)]
    while sum(map(len, sections)) > LOG_SHOWN:
        sections.pop(0)
    return LOG_HEAD + f"\nForked from {ROOT} after iteration {after}; its record holds every iteration.\n" + \
        "".join(sections)
