"""terrarium: where the model's code runs: a private working copy, confined by the kernel, bounded, keyless.

The seed and the gate's checks run in .seed/work/, a copy of the codebase kept in step with the folder by
copying only what changed, beside what they need to read (the goal, the open tasks, the end of the log, the
seed's contract tests), each refreshed after every run so no run changes what the next one sees. They run
through `run_bounded`: a launcher (sandbox.py) sets resource limits and confines the child with the most the
machine offers: it can write only the working copy and a private temp folder, read the system, Python and
the working copy (not .env, backups/ or the home), connect only to the gateway (the gate: only to servers of
its own), signal nothing outside its run. Its environment holds no secret. It finds the codebase's modules
after the standard library and the installed packages, so a json.py of the model's never stands in for the
real one. The whole process group is killed when a run ends; a marker names it, so a killed supervisor's is
ended at the next start. The folder changes only when a change lands: `land` copies the changed files in,
crash-safely (backups/landing.json lists them first; a start after kill -9 finishes the landing).
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque

from . import sandbox
from .console import SECRETS, say
from .settings import (CONTRACT, GUARDED, LANDING, LIMITS, LOG, NOT_CODE, OUTPUT_TAIL, ROOT, RUNNING,
                       SANDBOX_REQUIRED, SCRATCH, STEERING, TEST_SUPPORT, WORK, load_json, tail_of,
                       write_atomically)
from .snapshots import manifest, object_path, remove_empty_parents, stays_inside, store_object

PROVIDED = [*STEERING, *TEST_SUPPORT, CONTRACT]  # read by the seed and the gate
LOG_SHOWN = 65_536  # bytes of the end of iteration_log.md the working copy holds (the seed shows less)
provided = {}       # rel -> the bytes last put in the working copy, to tell a run's writes from a person's edits


# --- the working copy -------------------------------------------------------------------------
def sync_work(here=None):
    """Bring the working copy in step with the folder (`here`: its {path: sha256}, when just taken): the
    codebase's changed files only, then tidy."""
    WORK.mkdir(parents=True, exist_ok=True)
    here, there = manifest(ROOT) if here is None else here, manifest(WORK)
    for rel in there.keys() - here.keys():
        (WORK / rel).unlink()
        remove_empty_parents(WORK / rel, WORK)
    for rel, sha in here.items():
        if there.get(rel) != sha:
            write_atomically(WORK / rel, (ROOT / rel).read_bytes())
    tidy_work()
    shutil.rmtree(SCRATCH, ignore_errors=True)
    SCRATCH.mkdir(parents=True)


def tidy_work():
    """Refresh what the run reads and take away what is not the codebase's (the keeper's files, caches);
    the keeper's files a run wrote there, which never land."""
    written = [rel for rel in PROVIDED if read(WORK / rel) != provided.get(rel)]
    provided.update({rel: read(ROOT / rel) for rel in PROVIDED}, **{"iteration_log.md": tail_of(LOG, LOG_SHOWN)})
    for rel, data in provided.items():
        if data is None:
            (WORK / rel).unlink(missing_ok=True)
        elif read(WORK / rel) != data:
            write_atomically(WORK / rel, data)
    for path in sorted(stray_paths()):
        written.append(path.relative_to(WORK).as_posix())
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    return sorted(set(written) - {"__pycache__", ".pytest_cache"})


def read(path):
    """A file's bytes, or None when there is no such file."""
    return path.read_bytes() if path.is_file() else None


def stray_paths():
    """What in the working copy is neither the codebase nor provided: the keeper's folders and files."""
    keep = set(PROVIDED) | {"iteration_log.md"}
    found = [WORK / name for name in NOT_CODE - {".seed"} if (WORK / name).exists() or (WORK / name).is_symlink()]
    return found + [WORK / rel for rel in GUARDED if rel not in keep and (WORK / rel).exists()]


def land(changes):
    """Copy a change that passed the gate from the working copy into the folder, crash-safely: its new
    contents are kept as objects and listed in backups/landing.json first, then written. Returns the plan
    ({path: the sha256 of its new content, or None where it is deleted}) and the paths not landed because
    the folder has a symlink there that leads out of it (the working copy has no symlinks)."""
    outside = [rel for rel, *_ in changes if not stays_inside(rel)]
    plan = {rel: None if kind == "deleted" else store_object((WORK / rel).read_bytes())
            for rel, kind, *_ in changes if rel not in outside}
    write_atomically(LANDING, json.dumps(plan))
    apply_landing(plan)
    LANDING.unlink()
    return plan, outside


def apply_landing(plan):
    for rel, sha in plan.items():
        if not stays_inside(rel):  # a plan written by hand, or a symlink made since
            continue
        if sha is None:
            (ROOT / rel).unlink(missing_ok=True)
            remove_empty_parents(ROOT / rel)
        else:
            write_atomically(ROOT / rel, object_path(sha).read_bytes())


def finish_landing():
    """Finish a landing a killed supervisor left half done (every write in it is idempotent)."""
    plan = load_json(LANDING)
    if plan:
        apply_landing(plan)
        say(f"finished the landing of {len(plan)} file(s) that was under way when the last run stopped")
    LANDING.unlink(missing_ok=True)


# --- running the model's code -----------------------------------------------------------------
def policy(gateway_port=None, own_servers=False):
    """What a child may reach: the seed, the gateway; the gate's checks, only servers of their own. Folders in
    PYTHONPATH stay readable, so the child imports what this process would."""
    rules = sandbox.policy_for(WORK, SCRATCH, gateway_port, LIMITS, own_servers=own_servers, require=SANDBOX_REQUIRED)
    rules["read"] += [folder for folder in os.environ.get("PYTHONPATH", "").split(os.pathsep) if folder]
    return rules


def run_bounded(command, env, timeout, rules, watch=None):
    """Run in the working copy, confined by `rules` (see policy), in a new process group, with a time limit:
    (exit code, or None on timeout; output tail). `timeout`: seconds, or a function giving the seconds allowed
    so far (a limit that grows while the run goes on).

    Output goes through a pipe drained by a thread that keeps only the last OUTPUT_TAIL bytes, so a
    child that prints without end neither blocks nor fills a file. The whole group is killed at the
    end (timeout, Ctrl+C or normal exit), so no grandchild outlives its run."""
    child = subprocess.Popen(sandbox.command(command, rules), cwd=WORK, env=env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True)
    write_atomically(RUNNING, json.dumps({"pid": child.pid}))
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
        RUNNING.unlink(missing_ok=True)
        reader.join(5)
    return code, b"".join(tail).decode("utf-8", "replace")


def wait_within(child, limit):
    """The child's exit code, or None once it has run longer than limit() seconds."""
    start = time.monotonic()
    while True:
        try:
            return child.wait(max(0.01, min(1.0, start + limit() - time.monotonic())))
        except subprocess.TimeoutExpired:
            if time.monotonic() - start >= limit():
                return None


def end_orphans():
    """End the process group a killed supervisor left running, if it is still there."""
    pid = load_json(RUNNING).get("pid")
    if isinstance(pid, int) and pid > 1:
        try:
            ours = os.readlink(f"/proc/{pid}/cwd").startswith(str(ROOT))
        except OSError:  # no /proc (macOS): trust a group led by a python process
            ps = subprocess.run(["ps", "-o", "pgid=,command=", "-p", str(pid)], capture_output=True, text=True)
            ours = ps.stdout.split()[:1] == [str(pid)] and "python" in ps.stdout
        if ours:
            try:
                os.killpg(pid, signal.SIGKILL)
                say(f"ended process group {pid}, left running by a supervisor that was killed")
            except (ProcessLookupError, PermissionError):
                pass
    RUNNING.unlink(missing_ok=True)


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
    """This process's environment without any secret (the key, under whatever name it was copied), plus settings."""
    secrets = [os.environ.get(name, "").strip() for name in SECRETS]
    env = {name: value for name, value in os.environ.items()
           if name not in SECRETS and not any(len(s) >= 8 and s in value for s in secrets)}
    return {**env, "PYTHONDONTWRITEBYTECODE": "1", **settings}
