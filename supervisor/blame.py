"""blame: whether a failure is the world's, proven rather than assumed.

    entry["world"] = world()                          # what a state ran well with: Python, its packages, the limits
    cause = observed(index, start, output)            # what outside the code changed or failed, in words, or ''

A failure is the world's (the keeper waits, writes no task, never walks back landed work) only with both:
- a control: the same known-good state, without the new answer, failing the same way now (the seed failing before
  the model answered, at a state a run worked from; or the gate failing the same way at the state the change started
  from, which passed every test when it landed); and
- a cause observed outside the code: what the state ran well with changed since (this Python, its installed
  packages, the limits a run gets: SEED_MEMORY_MB and its kin), or the output names one (memory, the disk, a package
  that is not the codebase's failing to import, the interpreter itself).
Without a cause observed, a failure at the known-good state is the code's: a test that depends on the date, on chance
or on what an earlier test left fails there too, with nothing changed around it; that is a task for the model, never
an endless wait. An answer the seed crashed while applying is part of the run: that answer's failure, not the world's.
"""
import hashlib
import os
import re
import sys

from .settings import LIMITS, PROCESSES, SHM_BYTES

SETTING_OF = {"RLIMIT_AS": "SEED_MEMORY_MB", "RLIMIT_CPU": "SEED_CPU_SECONDS", "RLIMIT_FSIZE": "SEED_FILE_MB",
              "RLIMIT_NOFILE": "SEED_OPEN_FILES", "processes": "SEED_PROCESSES", "shm": "SEED_SHM_MB"}
CAUSES = [  # (a line of output that shows it, the cause in words): each pattern linear, run on a bounded tail
    (re.compile(r"MemoryError|Cannot allocate memory|out of memory|failed to map segment", re.I),
     "memory ran out (the machine's, or SEED_MEMORY_MB)"),
    (re.compile(r"No space left on device|Disk quota exceeded"), "the disk is full"),
    (re.compile(r"Fatal Python error|bad magic number|undefined symbol|error while loading shared libraries"),
     "the Python interpreter itself failed"),
]
MISSING = re.compile(r"(?:ModuleNotFoundError|ImportError): No module named '([\w.]{1,200})'")
TAIL = 64 << 10  # the most of an output read for a cause


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


def observed(index, start, output, codebase=()):
    """What outside the code is seen to have changed since the state `start` ran well (or, for a state no run has
    proven, such as a person's edit, since the newest one that did), or to have failed in `output`, in words ('' when
    nothing is): the evidence a failure at a known-good state needs to be the world's. `codebase`: the state's paths
    (a module missing that the codebase defines is the code's, not the world's)."""
    then = start.get("world") or next((entry["world"] for entry in reversed(index["snapshots"]) if entry.get("world")),
                                      None)
    return changed_since(then) or cause_in(output, codebase)


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


def cause_in(output, codebase=()):
    """A cause outside the code that the output names, in words, or ''."""
    tail = output[-TAIL:]
    for pattern, cause in CAUSES:
        if pattern.search(tail):
            return cause
    for name in MISSING.findall(tail):
        top = name.split(".")[0]
        if not any(rel in (f"{top}.py", f"{top}/__init__.py") or rel.startswith(f"{top}/") for rel in codebase):
            return f"the package {top} cannot be imported (it is not the codebase's)"
    return ""
