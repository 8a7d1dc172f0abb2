"""blame: whether a failure is the world's, proven rather than assumed.

    entry["world"] = world()                          # what a state ran well with: Python, its packages, the limits
    cause = observed(index, start)                    # what outside the code changed or ran out, in words, or ''

A failure is the world's (the keeper waits, writes no task, never walks back landed work) only with both:
- a control: the same known-good state, without the new answer, failing the same way now (the seed failing before
  the model answered, at a state a run worked from; or the gate failing the same way at the state the change started
  from, which passed every test when it landed); and
- a cause outside the code that the keeper observes itself, never one the code's output claims (a test that prints
  "MemoryError" when a date has passed fails at the known-good state too, and said so would stall the loop for good):
  what the state ran well with changed since (this Python, its installed packages, the limits a run gets:
  SEED_MEMORY_MB and its kin), or the machine is short now of what a run needs (the disk's free space where the
  folder is, the memory the machine has free).
Without such a cause, a failure at the known-good state is the code's: a test that depends on the date, on chance
or on what an earlier test left fails there too, with nothing changed around it; that is a task for the model, never
an endless wait. An answer the seed crashed while applying is part of the run: that answer's failure, not the world's.
"""
import contextlib
import hashlib
import os
import re
import sys

from ..settings import LIMITS, PROCESSES, ROOT, SCRATCH, SHM_BYTES, WORK

SETTING_OF = {"RLIMIT_AS": "SEED_MEMORY_MB", "RLIMIT_CPU": "SEED_CPU_SECONDS", "RLIMIT_FSIZE": "SEED_FILE_MB",
              "RLIMIT_NOFILE": "SEED_OPEN_FILES", "processes": "SEED_PROCESSES", "shm": "SEED_SHM_MB"}
DISK_LEAST = 64 << 20     # bytes free where the folder is, under which a run is short of disk
MEMORY_LEAST = 128 << 20  # bytes of memory the machine has free, under which a run is short of it


def world():
    """What outside the code a run of a state depends on, as it is now: {"python", "packages", "limits"}."""
    found = sorted(name for folder in sys.path if os.path.isdir(folder) for name in listing(folder)
                   if name.endswith((".dist-info", ".egg-info")))  # each installed distribution's name and version
    packages = hashlib.sha256(repr(found).encode()).hexdigest()[:16]
    limits = {**LIMITS, "processes": PROCESSES, "shm": SHM_BYTES}
    return {"python": f"{sys.version.split()[0]} at {sys.executable}", "packages": packages,
            "limits": {SETTING_OF.get(name, name): value for name, value in limits.items()}}


def listing(folder):
    try:
        return os.listdir(folder)
    except OSError:
        return []


def observed(index, start, root=ROOT):
    """What outside the code the keeper sees changed since the state `start` ran well (or, for a state no run has
    proven, such as a person's edit, since the newest one that did), or short now, in words ('' when nothing is):
    the evidence a failure at a known-good state needs to be the world's. Never read from the code's output."""
    then = start.get("world") or next((entry["world"] for entry in reversed(index["snapshots"]) if entry.get("world")),
                                      None)
    return changed_since(then) or short_of(root)


def changed_since(then):
    """What of world() differs from `then` (a state's record of it), in words, or ''."""
    if not isinstance(then, dict):
        return ""
    now, changed = world(), []
    if then.get("python") != now["python"]:
        changed.append(f"the Python interpreter ({then.get('python')} then, {now['python']} now)")
    if then.get("packages") != now["packages"]:
        changed.append("the installed packages")
    before = then.get("limits") if isinstance(then.get("limits"), dict) else {}
    limits = [name for name, value in now["limits"].items() if name in before and before[name] != value]
    if limits:
        changed.append(f"the limits a run gets ({', '.join(limits)})")
    return f"{' and '.join(changed)} changed since it ran well" if changed else ""


def short_of(root):
    """What the machine is short of now, measured here: the disk where the folder is (what the runs' own folders hold
    counted as free: a run that filled the disk is the code's doing), its free memory; or ''."""
    try:
        disk = os.statvfs(root)
        free = disk.f_bavail * disk.f_frsize
        if free < DISK_LEAST:  # only then are the runs' own folders walked, to count what they hold as free
            free += sum(map(bytes_in, (WORK, SCRATCH)))
    except OSError:
        free = None
    if free is not None and free < DISK_LEAST:
        return f"the disk is full ({free >> 20} MB free where the folder is)"
    available = memory_available()
    if available is not None and available < MEMORY_LEAST:
        return f"the machine's memory is nearly spent ({available >> 20} MB free)"
    return ""


def bytes_in(tree):
    """The bytes of the files below `tree` (links not followed)."""
    total = 0
    for folder, _, names in os.walk(tree):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_size
    return total


def memory_available():
    """The bytes of memory the machine has free (Linux's MemAvailable), or None where it does not say."""
    try:
        with open("/proc/meminfo") as info:
            found = re.search(r"^MemAvailable:\s+(\d+) kB", info.read(), re.M)
    except OSError:
        return None
    return int(found[1]) << 10 if found else None
