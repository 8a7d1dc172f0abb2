"""terrarium: where the model's code runs: a private working copy, confined by the kernel, bounded, keyless.

The seed and the gate's checks run in .seed/work/, a copy of the codebase kept in step with the folder by
copying only what changed, beside what they need to read (the goal, the open tasks, the end of the log, the
seed's contract tests), each refreshed after every run so no run changes what the next one sees. They run
through `run_bounded`: a launcher (sandbox.py) sets resource limits and confines the child with the most the
machine offers: it can write only the working copy and a private temp folder, read the system, Python and
the working copy (not .env, backups/ or the home), connect only to the gateway (the gate: only to servers of
its own), signal nothing outside its run; where the kernel allows, it has namespaces of its own (processes,
/proc, network, /dev/shm). Its environment is a short allow-list, never the user's. It finds the codebase's
modules after the standard library and the installed packages, so a json.py of the model's never stands in for
the real one. Every process a run starts ends with it (its namespace's, or found by the keeper, their
subreaper); a marker names its group, so a killed supervisor's is ended at the next start. The folder changes
only when a change lands: `land` copies the changed files in, crash-safely (backups/landing.json lists them
first; a start after kill -9 finishes the landing).
"""
import errno
import hashlib
import json
import os
import re
import select
import signal
import stat
import site
import subprocess
import sys
import threading
import time
from collections import deque
from functools import lru_cache

from . import blame, sandbox
from .. import untrusted
from ..store import snapshots as snap
from ..events import tell
from ..names import refusal
from ..scrub import valid
from ..settings import (CONTRACT, GUARDED, JUDGED, LANDING, LANDING_BYTES, LANDING_FILES, LIMITS, LOG, LOG_SHOWN,
                        NAMESPACES, NOT_CODE, OUTPUT_TAIL, PROCESSES, ROOT, RUNNING, SANDBOX_REQUIRED, SCRATCH,
                        SHM_BYTES, STEERING, TEST_SUPPORT, WORK, WORK_BYTES, WORK_FILES, load_json, source_of, tail_of,
                        write_atomically)
from ..store.snapshots import (folders_above, has_object, line_changes, manifest, object_path, remove_empty_parents,
                               stays_inside, store_object)
from ..untrusted import Untrusted

PROVIDED = STEERING  # read by the seed
KEEPER_FILES = {rel.casefold() for rel in [*GUARDED, *STEERING]}  # never the codebase's, by any case
RECORD, RECORD_BYTES = ".seed/record.json", 1 << 20  # what the seed says it did, and the most of it read
FACTS = ".seed/rolled_back.json"  # what the keeper offers the seed to read of the last answer rolled back
UNCAPTURED = {"__pycache__", ".pytest_cache"}  # caches a run leaves, at any depth: never captured, never its failure
IN_THE_WAY = {errno.ENOTDIR, errno.EISDIR, errno.EEXIST, errno.ENOTEMPTY}  # something of the person's stands there
LASTING = IN_THE_WAY | {errno.ENOENT, errno.ENAMETOOLONG, errno.ELOOP}  # what writing a path of a landing can meet
# that trying again never mends (anything else is the machine's: a full disk, a folder made read-only; the landing
# is then finished when it can be)
KEEPER_FILE_BYTES = 16 << 20  # the most of a keeper's file in the working copy read, to tell whether a run wrote it
provided = {}       # rel -> sha256 of what the working copy was given to read, to tell a run's writes from it
fingerprints = {}   # (tree, rel) -> (size, mtime, ctime, inode), sha256: what need not be read again
written = {}        # (tree, rel) -> (size, mtime, ctime, inode) of the file as mirror last wrote it


# --- the working copy -------------------------------------------------------------------------
def sync_work(here=None, facts=None):
    """Make the working copy the folder's codebase (`here`: its {path: sha256}, when just taken) and what the run
    reads (the steering files, the end of the log, and the keeper's `facts` for the seed, as FACTS), whatever the
    last run left there; empty its temporary folder."""
    blobs = {rel: source_of(rel).read_bytes() for rel in PROVIDED if source_of(rel).is_file()}  # --goal FILE
    blobs["iteration_log.md"] = tail_of(LOG, LOG_SHOWN)
    if facts is not None:
        blobs[FACTS] = json.dumps(facts, ensure_ascii=False, indent=1).encode()
    provided.clear()
    provided.update({rel: hashlib.sha256(data).hexdigest() for rel, data in blobs.items()})
    here = manifest(ROOT) if here is None else here
    edits = {sha: (ROOT / rel).read_bytes() for rel, sha in here.items() if not has_object(sha)}  # not yet snapshotted
    mirror(WORK, {**here, **provided}, {**edits, **{provided[rel]: data for rel, data in blobs.items()}})
    empty_scratch()


def mirror(tree, wanted, blobs=None):
    """Make `tree` hold exactly `wanted` ({path: sha256}, the bytes from `blobs` by sha256 or else the object
    store), rebuilt whole when what is there cannot be trusted. A file is written anew (a fresh file: new times,
    no attribute, no inode kept) unless it is, to its times and inode, the one this keeper wrote there: a run that
    touched a file without changing its bytes (its time set to 1, say) leaves no state for the next run to read,
    a control run included."""
    tree.mkdir(parents=True, exist_ok=True)
    folders, stamps = {}, {}
    try:
        there = fingerprint(tree, max_files=WORK_FILES, max_bytes=WORK_BYTES, folders=folders, stamps=stamps)
    except Untrusted:
        untrusted.wipe(tree)
        tree.mkdir(parents=True)
        there = {}
    for rel in there.keys() - wanted.keys():
        untrusted.remove(tree, rel)
    needed = folders_above(wanted)
    for folder in sorted(folders, key=lambda rel: -rel.count("/")):  # what a run made or closed: gone, or opened
        if folder not in needed:
            untrusted.remove(tree, folder)
        elif stat.S_IMODE(folders[folder]) != 0o755:
            os.chmod(tree / folder, 0o755)
    os.chmod(tree, 0o755)
    for rel, sha in wanted.items():
        if there.get(rel) != sha or written.get((tree, rel)) != stamps.get(rel):
            untrusted.write(tree, rel, blobs[sha] if sha in (blobs or {}) else object_path(sha).read_bytes())
            written[(tree, rel)] = stamp(os.lstat(tree / rel))
    for gone in [key for key in written if key[0] == tree and key[1] not in wanted]:
        del written[gone]


def capture_work(start):
    """What the run left in the working copy, taken into the object store: the gate judges these bytes and
    landing writes them; the working copy is not read again. {"files": {path: sha256} of the codebase,
    "changes": [(path, kind, added, removed)] from `start` ({path: sha256}), "not_landed": [the keeper's paths
    the run wrote]}. Untrusted when it holds what may not land: a link, a FIFO, too many files or bytes."""
    keepers = []
    files = fingerprint(WORK, skip=lambda rel, folder: not_codebase(rel, folder, keepers), max_files=WORK_FILES,
                        max_bytes=WORK_BYTES, store=True, new_bytes=LANDING_BYTES)
    changes = [(rel, *change_between(start.get(rel), files.get(rel)))
               for rel in sorted(start.keys() | files.keys()) if start.get(rel) != files.get(rel)]
    if len(changes) > LANDING_FILES:
        raise Untrusted(f"{len(changes):,} files changed; a landing takes at most {LANDING_FILES:,} "
                        "(SEED_LANDING_FILES)")
    return {"files": files, "changes": changes, "not_landed": sorted(keepers_written(keepers))}


def not_codebase(rel, folder, keepers):
    """Whether the capture leaves rel out: the caches a run leaves and the seed's own .seed/ (its record), the
    keeper's and the person's folders and files by any case (noting in `keepers` those a run may have written),
    and virtual environments (snapshots.of_a_venv). Untrusted, the code's failure, for a name outside the
    allow-list (names.py)."""
    name = rel.rsplit("/", 1)[-1]
    if folder and (name in UNCAPTURED or rel == ".seed"):
        return True
    if why := refusal(rel):
        raise Untrusted(why)
    if folder and name.casefold() in NOT_CODE or \
            snap.of_a_venv(rel, folder, lambda path: untrusted.holds_file(WORK, f"{path}/pyvenv.cfg")):
        if "/" not in rel:
            keepers.append(f"{rel}/" if folder else rel)
        return True
    if not folder and rel.casefold() in KEEPER_FILES:
        keepers.append(rel)
        return True
    return False


def keepers_written(keepers):
    """The keeper's paths in the working copy that are not what it was given to read."""
    for rel in keepers:
        try:
            given = not rel.endswith("/") and hashlib.sha256(untrusted.read(WORK, rel, KEEPER_FILE_BYTES)).hexdigest()
        except (Untrusted, FileNotFoundError):
            given = None
        if provided.get(rel) != given:
            yield rel


def change_between(old, new):
    """(kind, lines added, lines removed) between two objects (None: no file)."""
    text = {sha: object_path(sha).read_text("utf-8", "replace") if sha else "" for sha in (old, new)}
    kind = "new" if old is None else "deleted" if new is None else "changed"
    return (kind, *line_changes(text[old], text[new]))


def fingerprint(tree, skip=lambda rel, folder: False, max_files=None, max_bytes=None, store=False, new_bytes=None,
                folders=None, stamps=None):
    """{path: sha256} of the files in `tree`, read without links and bounded (see untrusted.scan). A file whose size,
    times and inode are as when it was last read is not read again (its ctime cannot be set by the code that
    changed it). With `store`, each file's bytes are kept in the object store; contents it does not hold yet (what
    the run wrote) may come to at most `new_bytes`. `folders`, when given, gets {path: mode} of the folders;
    `stamps`, {path: (size, mtime, ctime, inode)} of the files."""
    began, found, new = time.time_ns(), {}, 0
    listed = untrusted.scan(tree, skip, max_files, max_bytes, folders)
    if stamps is not None:
        stamps.update({rel: stamp(info) for rel, info in listed.items()})
    for stale in [key for key in fingerprints if key[0] == tree and key[1] not in listed]:
        del fingerprints[stale]  # what is gone is forgotten: the cache holds what the tree holds
    for rel, info in listed.items():
        if fingerprints.get((tree, rel), (None,))[0] != stamp(info):
            data = untrusted.read(tree, rel, info.st_size)
            found[rel] = hashlib.sha256(data).hexdigest()
            if store and not has_object(found[rel]):
                new += len(data)
                if new_bytes is not None and new > new_bytes:
                    raise Untrusted(f"the run wrote more than {new_bytes >> 20:,} MB of new files: a landing takes at "
                                    "most that (SEED_LANDING_MB)")
                store_object(data)
            if info.st_ctime_ns < began - 10**9:  # older than a coarse clock's tick: its stamp tells it apart
                fingerprints[(tree, rel)] = (stamp(info), found[rel])
        else:
            found[rel] = fingerprints[(tree, rel)][1]
            if store and not has_object(found[rel]):
                store_object(untrusted.read(tree, rel, info.st_size))
    return found


def stamp(info):
    return info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino


def judged_copy(files, with_contract=False):
    """Lay out the candidate for the gate in .seed/judged/: its files and, when the seed's contract is to run, the
    contract and what it needs (its conftest.py would clash with one of the model's otherwise); nothing else.
    The gate's checks may read it and not write it."""
    support = [*TEST_SUPPORT, CONTRACT] if with_contract else []
    blobs = {rel: (ROOT / rel).read_bytes() for rel in support if (ROOT / rel).is_file()}
    support = {rel: hashlib.sha256(data).hexdigest() for rel, data in blobs.items()}
    mirror(JUDGED, {**files, **support}, {support[rel]: data for rel, data in blobs.items()})
    empty_scratch()  # what the seed's run left in its temporary folder is not the gate's


def free_space():
    """Empty the working copy and the runs' temporary folder, which a run may have filled the disk with (they are
    made again before the next run): what was freed, as words for the wait's line ('' when nothing was)."""
    freed = sum(map(blame.bytes_in, (WORK, SCRATCH)))
    for tree in (WORK, SCRATCH):
        untrusted.wipe(tree)
    return f"the working copy and the runs' temporary folder were emptied ({freed >> 20} MB); " if freed else ""


def empty_scratch():
    """Empty the runs' temporary folder: before a run, and before the gate's checks."""
    untrusted.wipe(SCRATCH)
    SCRATCH.mkdir(parents=True)


def land(changes, files):
    """Write a change that passed the gate into the folder, from the bytes the gate judged (never the working
    copy), crash-safely: backups/landing.json lists them first. Returns the plan ({path: sha256 of its new
    content, or None where it is deleted}) and the paths not landed because the folder has a symlink there
    that leads out of it, or a folder where a file would go."""
    outside = [rel for rel, *_ in changes if not stays_inside(rel)]
    plan = {rel: files.get(rel) for rel, *_ in changes if rel not in outside}
    write_atomically(LANDING, json.dumps(plan))
    outside += [rel for rel, _, _ in apply_landing(plan)]
    LANDING.unlink()
    return {rel: sha for rel, sha in plan.items() if rel not in outside}, outside


def apply_landing(plan):
    """Write the plan into the folder, deletions first and the deepest first (a folder that becomes a file is
    emptied before the file is written), each name checked against the allow-list again. [(path, why, whether
    something of the person's stands in the way)] of those not written: a symlink out of the folder or what is not
    a file (in the way), a name outside the allow-list, a content gone from the store. A fault of the machine (a
    full disk) is raised."""
    failed = []
    for rel, sha in sorted(plan.items(), key=lambda item: (item[1] is not None, -item[0].count("/"))):
        in_the_way = not stays_inside(rel)
        why = refusal(rel) or (f"{rel}: a symlink in the folder leads out of it" if in_the_way else None)
        try:
            if why is None:
                write_or_delete(rel, sha)
        except OSError as error:
            if error.errno not in LASTING:
                raise
            why, in_the_way = f"{rel}: {error.strerror}", error.errno in IN_THE_WAY
        if why:
            failed.append((rel, why, in_the_way))
    return failed


def write_or_delete(rel, sha):
    """Make the folder's path rel hold the object sha, or nothing (None)."""
    if sha is not None:
        write_atomically(ROOT / rel, object_path(sha).read_bytes())
        return
    if (ROOT / rel).is_file() or (ROOT / rel).is_symlink():
        (ROOT / rel).unlink()
    remove_empty_parents(ROOT / rel)


# --- recovery: what a killed keeper left, finished or undone (recovery.py calls these) -------
def finish_landing(start):
    """Finish the landing a killed keeper left (every write in it is idempotent; a path where something of the
    person's stands is left out, as landing does); where a path of it can no longer be written, undo the whole
    landing, putting back what `start` (the snapshot it began from) held at each path it wrote, so the folder never
    holds half of a change."""
    plan, dropped = plan_of(load_json(LANDING))
    if dropped:
        tell(f"backups/landing.json held {dropped} entries no keeper writes; they were left out")
    failed = apply_landing(plan) if plan else []
    broken = [why for _, why, in_the_way in failed if not in_the_way]
    if broken:
        undone = undo_landing({rel: sha for rel, sha in plan.items() if rel not in {f[0] for f in failed}}, start)
        tell(f"the landing under way when the last run stopped could not be finished ({broken[0]}"
             f"{f' and {len(broken) - 1} more' if len(broken) > 1 else ''}): "
             + ("it was undone" if undone else "it could not be undone either (its snapshot is gone): the folder "
               "holds what could be written"))
    elif plan:
        tell(f"finished the landing of {len(plan)} file(s) that was under way when the last run stopped")
    LANDING.unlink(missing_ok=True)


def plan_of(value):
    """(the plan {path: 64-hex sha256 or None} in a landing.json, how many entries were not such)."""
    plan = {rel: sha for rel, sha in value.items() if isinstance(rel, str) and (sha is None or isinstance(sha, str)
                                                                              and len(sha) == 64 and is_hex(sha))}
    return plan, len(value) - len(plan)


def is_hex(text):
    return all(c in "0123456789abcdef" for c in text)


def undo_landing(written, start):
    """Put back what the snapshot `start` held at each path the landing wrote; whether it could be."""
    if not written:
        return True
    try:
        held = snap.files_of(start) if start else None
    except (FileNotFoundError, ValueError):  # its snapshot is damaged
        held = None
    return held is not None and not apply_landing({rel: held.get(rel) for rel in written})


def set_aside(index, start, number):
    """On Ctrl+C or after kill -9 mid-run: keep what the run wrote (in the working copy, read as the model's) as
    a snapshot; the folder never had it. Nothing is kept when the start's snapshot is damaged (nothing to tell the
    run's changes from) or the run left what the keeper does not take."""
    try:
        begun = snap.files_of(start)
        files = capture_work(begun)["files"]
    except (FileNotFoundError, ValueError, Untrusted):
        begun = files = None
    if files != begun:
        kept = snap.snapshot(index, "interrupted", number, files=files)
        tell(f"the interrupted run's changes are kept as snapshot {kept['id']} (python fallback.py --materialise "
             f"{kept['id']} writes them out); the codebase is as it was")
    sync_work()


def read_record():
    """The bytes of the record the seed left (b"" when it left none), read like any file of the model's."""
    try:
        return untrusted.read(WORK, RECORD, RECORD_BYTES)
    except FileNotFoundError:
        return b""


# --- running the model's code -----------------------------------------------------------------
WORD = r"[A-Za-z0-9_.@+-]{1,64}"  # a locale's, a terminal's or an encoding's name: no path, no space, no quote
PASSED = {"LANG": WORD, "LANGUAGE": r"[A-Za-z0-9_.@:-]{1,128}", "TERM": WORD,
          "PYTHONIOENCODING": r"[\w.:-]{1,40}", "PYTHONUTF8": "[01]",
          "TZ": r":?(?!.*\.\.)[\w+,./<>:-]{1,64}",  # a zone's name, or a rule like EST5EDT
          **{f"LC_{name}": WORD for name in ("ALL", "CTYPE", "COLLATE", "MESSAGES", "MONETARY", "NUMERIC", "TIME",
                                            "ADDRESS", "IDENTIFICATION", "MEASUREMENT", "NAME", "PAPER", "TELEPHONE")}}
# The variables of the user's environment a run gets, each by name AND by the shape of its value (a value of
# another shape is not passed); PATH is rebuilt (clean_env). Not any LC_*: ssh passes LC_* through, and people carry
# tokens in made-up ones. Never PYTHONPATH, PYTHONHOME, PYTHONSTARTUP or LD_*: an empty entry in them ("X=$X:/opt"
# with X unset) means "the folder the process stands in", the model's; the run's Python finds what this one has.


def confinement():
    """What confines the model's code on this machine, for the log: Support(confined, abi, text)."""
    how = sandbox.isolation()[1] if NAMESPACES else "no namespaces (SEED_NAMESPACES=0): " + sandbox.UNISOLATED
    landlock = sandbox.probe()
    return landlock._replace(text=f"{landlock.text}; {how}")


def policy(gateway_port=None, own_servers=False, judged=None):
    """What a child may reach: the seed, the working copy and the gateway; the gate's checks, the judged copy (to
    read, not write) and only servers of their own. What it reads comes from this interpreter (sandbox.policy_for)
    and the keeper's own paths, never from the environment; never the person's folder itself: a folder that holds
    it (a virtual environment made in it) is allowed all around it instead."""
    rules = sandbox.policy_for(WORK if judged is None else SCRATCH, SCRATCH, gateway_port, LIMITS,
                               own_servers=own_servers, require=SANDBOX_REQUIRED,
                               isolate=NAMESPACES and sandbox.isolation()[0], processes=PROCESSES, shm=SHM_BYTES)
    rules["read"] += [str(judged)] if judged else []
    rules["read"] = [allowed for folder in rules["read"] for allowed in around_the_folder(folder)]
    return rules


def around_the_folder(path):
    """`path` if it does not hold the person's folder (ROOT); else what lies beside the way down to ROOT (and
    inside ROOT, its own Python packages if it is a virtual environment), never ROOT itself: its .env and
    backups/ are not the model's to read."""
    path, root = os.path.realpath(path), real_root()
    if root != path and not root.startswith(path.rstrip(os.sep) + os.sep):
        return [path]
    if root == path:
        return [folder for folder in sys.path if folder.startswith(root + os.sep) and "site-packages" in folder]
    try:
        beside = [entry.path for entry in os.scandir(path)]
    except OSError:
        return []
    return [allowed for entry in beside for allowed in (around_the_folder(entry) if root.startswith(entry + os.sep)
                                                        or root == entry else [entry])]


def run_bounded(command, env, timeout, rules, watch=None, cwd=WORK, pass_fds=(), start=None):
    """Run in the working copy, confined by `rules` (see policy), in a new process group, with a time limit:
    (exit code, or None on timeout; output tail). `timeout`: seconds, or a function giving the seconds allowed
    so far (a limit that grows while the run goes on).

    Output goes through a pipe drained by a thread that keeps only the last OUTPUT_TAIL bytes, so a
    child that prints without end neither blocks nor fills a file. At the end (timeout, Ctrl+C or normal
    exit) the group is killed, then every process the run left (this process is their subreaper; a zygote's
    child that is `contained` left none), so none outlives its run; without namespaces of its own, what it left in
    /dev/shm is taken away, and over rules["shm"] it fails. `start(command, rules, cwd, env, pass_fds)` starts it
    (by default `launched`; the gate's checks: zygote.start, a Popen or one like it)."""
    shared = None if rules["isolate"] else sandbox.shm_entries()
    sandbox.become_subreaper()
    child = (start or launched)(command, rules, cwd, env, pass_fds)
    write_atomically(RUNNING, json.dumps({"pid": child.pid, "started": started(child.pid)}))
    tail = deque()
    reader = threading.Thread(target=keep_tail, args=(child.stdout, tail, watch), daemon=True)
    reader.start()
    try:
        code = wait_within(child, timeout if callable(timeout) else lambda: timeout)
    finally:
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        child.wait()
        if not getattr(child, "contained", lambda: False)():
            sandbox.end_descendants()
        RUNNING.unlink(missing_ok=True)
        reader.join(5)
    output = valid(b"".join(tail).decode("utf-8", "replace"))  # storable: no NUL
    left = sandbox.clear_shm(shared) if shared is not None else 0
    if left > rules["shm"]:
        code = 1 if code == 0 else code
        output += f"\nthe run left {left >> 20} MB in /dev/shm, over its limit of {rules['shm'] >> 20} MB " \
                  "(SEED_SHM_MB)\n"
    return code, output


def launched(command, rules, cwd, env, pass_fds):
    """The run started by exec through the launcher (sandbox.command), in START and a session of its own: a Popen."""
    return subprocess.Popen(sandbox.command(command, rules, cwd), cwd=sandbox.START, env=env, pass_fds=pass_fds,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)


def wait_within(child, limit):
    """The child's exit code, or None once it has run longer than limit() seconds. Where the kernel gives a process
    a descriptor (Linux 5.3+), its end wakes the wait at once (Popen.wait polls, up to 50 ms late each time); a
    zygote's child is waited for on the zygote's word of its end (its wait)."""
    start = time.monotonic()
    try:
        exited = os.pidfd_open(child.pid) if isinstance(child, subprocess.Popen) else None
    except (AttributeError, OSError):  # macOS, an older kernel, a child already reaped
        exited = None
    try:
        while (code := child.poll()) is None:
            left = start + limit() - time.monotonic()
            if left <= 0:
                return None
            if exited is not None:
                select.select([exited], [], [], min(1.0, left))
            else:
                try:
                    child.wait(min(1.0, left))
                except subprocess.TimeoutExpired:
                    pass
        return code
    finally:
        if exited is not None:
            os.close(exited)


def end_orphans():
    """End the process group a killed supervisor left running, if it is still there."""
    marker = load_json(RUNNING)
    pid = marker.get("pid")
    if isinstance(pid, int) and pid > 1:
        if os.path.isdir("/proc/self"):  # ours: the group its leader began, by the leader's start time, wherever
            members = [started(int(p)) for p in os.listdir("/proc") if p.isdigit() and group_of(int(p)) == pid]
            expected = marker.get("started")  # none in an older keeper's marker
            ours = bool(members) and (started(pid) in (expected, None) if expected else True) and \
                min(members) >= (expected or 0)  # whatever folder its members moved to, its leader gone or not
        else:  # no /proc (macOS): trust a group led by a python process
            ps = subprocess.run(["ps", "-o", "pgid=,command=", "-p", str(pid)], capture_output=True, text=True)
            ours = ps.stdout.split()[:1] == [str(pid)] and "python" in ps.stdout
        if ours:
            try:
                os.killpg(pid, signal.SIGKILL)
                tell(f"ended process group {pid}, left running by a keeper that was killed")
            except (ProcessLookupError, PermissionError):
                pass
    RUNNING.unlink(missing_ok=True)


def stat_fields(pid):
    """The fields of /proc/PID/stat after the command's name, or [] when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat_file:
            return stat_file.read().rsplit(b") ", 1)[1].split()
    except (OSError, IndexError):
        return []


def started(pid):
    """When a process started, in clock ticks since boot (None without /proc or the process)."""
    fields = stat_fields(pid)
    return int(fields[19]) if len(fields) > 19 else None


def group_of(pid):
    fields = stat_fields(pid)
    return int(fields[2]) if len(fields) > 2 else None


def keep_tail(stream, tail, watch):
    size = 0
    while chunk := os.read(stream.fileno(), 65536):
        if watch:
            watch(chunk)
        tail.append(chunk)
        size += len(chunk)
        while size - len(tail[0]) >= OUTPUT_TAIL:
            size -= len(tail.popleft())
    stream.close()


CODEBASE_LAST = """import runpy, sys
sys.path.append(sys.argv.pop(1))
sys.argv.pop(0)
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def python(script, *args):
    """`python SCRIPT ARGS` finding the codebase's modules after the standard library and the installed
    packages (-P keeps the folder off the front of sys.path), so `import json` is the real one."""
    return [sys.executable, "-P", "-c", CODEBASE_LAST, str(WORK), script, *args]


def clean_env(**settings):
    """The run's environment: an allow-list of this process's variables, by name and by value (PASSED; never a
    key, a token or a password of the user's shell), a PATH of absolute folders outside the person's, a HOME in
    the run's temp folder, plus settings."""
    env = {name: value for name, value in os.environ.items() if name in PASSED and re.fullmatch(PASSED[name], value)}
    if site.ENABLE_USER_SITE and outside_the_folder(site.getuserbase()):  # pip --user's packages, though HOME moved
        env["PYTHONUSERBASE"] = site.getuserbase()
    return {**env, "PATH": run_path(), "HOME": str(SCRATCH), "PYTHONDONTWRITEBYTECODE": "1", **settings}


def run_path():
    """PATH for a run: this interpreter's folder first, then the user's absolute folders outside the person's folder
    (an empty or relative entry means the folder the run stands in: the model's)."""
    here = os.path.dirname(sys.executable)
    folders = [here] + [folder for folder in os.environ.get("PATH", "").split(os.pathsep)
                        if os.path.isabs(folder) and outside_the_folder(folder)]
    return os.pathsep.join(dict.fromkeys(folders))


@lru_cache(maxsize=1)
def real_root():
    """The person's folder, its links resolved: the folders above it are the person's, never the model's."""
    return os.path.realpath(ROOT)


def outside_the_folder(path):
    """Whether `path` is absolute and neither the person's folder nor inside it (where the model's code lands)."""
    real, root = os.path.realpath(path), real_root()
    return os.path.isabs(path) and real != root and not real.startswith(root + os.sep)
