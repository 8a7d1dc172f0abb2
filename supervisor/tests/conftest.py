"""Shared fixtures: a fake Gemini server, a fresh copy of the workspace, and an environment pointing at both."""
import ast
import compileall
import contextlib
import ctypes
import functools
import importlib
import importlib.util
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import uuid
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from fake_gemini import FakeGemini

REPO = Path(__file__).resolve().parents[2]  # the project: supervisor/tests/ is the keeper's, never the model's
# Started as a background job of a script (`bash .ci/run &`), this process would ignore SIGINT, and so would every
# supervisor a test starts (an ignored signal stays ignored across exec): the tests of Ctrl+C could not stop them.
signal.signal(signal.SIGINT, signal.default_int_handler)
# Runs without namespaces of their own share the machine's /dev/shm, and each keeper takes away what this user made
# there during its run (sandbox.clear_shm): two at once would take each other's. Their tests run one at a time.
WITHOUT_NAMESPACES = pytest.mark.xdist_group("runs-without-namespaces")
KEY = "AIzaSyTEST" + uuid.uuid4().hex[:29]  # made per session, so no file holds it unless it leaked
TEST_MODELS = ["gemini-3.5-flash", "gemini-2.5-flash-lite", "gemma-refuses-json"]  # unpaced, no daily limit
PRODUCT_FILES = ["fallback.py", ".env.example", "supervisor/demo.json", "supervisor/tests/conftest.py",
                 "supervisor/tests/fake_gemini.py",
                 *sorted(p.relative_to(REPO).as_posix() for p in (REPO / "supervisor").rglob("*.py")
                         if p.relative_to(REPO / "supervisor").parts[0] != "tests")]
ROOMS = {Path(rel).stem: ".".join(Path(rel).with_suffix("").parts) for rel in PRODUCT_FILES  # "gate": its module
         if rel.startswith("supervisor/") and not rel.startswith("supervisor/tests/") and rel.endswith(".py")}
# Fixed steering texts: the tests judge the code, never the moment (the live goal, tasks and log of the folder
# they run in, which the supervisor's gate runs them in, are never read).
STEERING = {"goal.md": "# Goal\n\nGrow a small note keeper, notes.py, with a test for each command.\n",
            "pending_tasks.md": "# Pending tasks\n\n",
            "iteration_log.md": "# Iteration log\n"}


# The keeper's modules compiled once (as a person's first run leaves them): each workspace gets their bytecode with
# the sources (their times kept, so it is valid there), and no keeper a test starts compiles 40 modules again.
BYTECODE = []  # (the source's path in the workspace, its bytecode here)


def compiled(source):
    """Whether the source's bytecode is here and valid. compileall trusts a pyc whose header holds the source's
    time in whole seconds: a source changed within the second it was compiled in would keep its stale bytecode (and
    each keeper a test starts would compile and write it), so one whose recorded size differs is compiled again."""
    pyc = Path(importlib.util.cache_from_source(str(source)))
    stale = pyc.exists() and pyc.read_bytes()[12:16] != (source.stat().st_size & 0xFFFFFFFF).to_bytes(4, "little")
    return compileall.compile_file(source, quiet=1, force=stale)


for rel in PRODUCT_FILES:
    if rel.startswith("supervisor/") and rel.endswith(".py") and compiled(REPO / rel):
        BYTECODE.append((rel, Path(importlib.util.cache_from_source(str(REPO / rel)))))


def load_keeper(name):
    """A part of the keeper, loaded by its path as fallback.py loads the package (never through sys.path)."""
    if "supervisor" not in sys.modules:
        spec = importlib.util.spec_from_file_location("supervisor", REPO / "supervisor" / "__init__.py",
                                                      submodule_search_locations=[str(REPO / "supervisor")])
        sys.modules["supervisor"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules["supervisor"])
    return importlib.import_module(ROOMS[name])


class KeeperTimedOut(BaseException):
    """A keeper run in this process went past its test's time (as subprocess.run's timeout would end it)."""


def keeper(root, env, *args, timeout=120):
    """`python fallback.py ARGS` in `root` with `env`, run in this process: the workspace's own fallback.py and
    supervisor/, loaded afresh (every module and what it holds is this run's, as in a process of its own) and
    taken away after; what reached its standard output and error (its children's writes too), and its exit status,
    as subprocess.run gives them. What a test of the process itself checks (its signals, its exit by the
    interpreter, the README's commands, a kill) starts a process instead."""
    children = {pid: process_of(pid) for pid in load_keeper("sandbox").descendants(os.getpid()) if ours_running(pid)}
    assert not children, (f"processes {children} of this test would be ended and reaped with the keeper's run's own "
                          "(sandbox.end_descendants): start the keeper as a process (test_fallback.fallback_process)")
    ours = {name: sys.modules.pop(name) for name in list(sys.modules) if name.partition(".")[0] == "supervisor"}
    environ, cwd, path, reaper = dict(os.environ), os.getcwd(), list(sys.path), subreaper()
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM)}

    def too_long(*_):
        raise KeeperTimedOut(f"the keeper ran past {timeout} s")

    os.environ.clear()
    os.environ.update(env)
    os.chdir(root)
    signal.signal(signal.SIGALRM, too_long)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        with printed_to_files() as printed:
            code = started_and_run(Path(root) / "fallback.py", args)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        os.chdir(cwd)
        subreaper(reaper)  # the keeper made its process the subreaper of what its runs leave: this one is not
        os.environ.clear()
        os.environ.update(environ)
        sys.path[:] = path
        for name in [name for name in sys.modules if name.partition(".")[0] == "supervisor"]:
            del sys.modules[name]
        sys.modules.update(ours)
    return subprocess.CompletedProcess([sys.executable, "fallback.py", *args], code, *printed)


def ours_running(pid):
    """Whether a process below this one still runs in this process's session: one a test started (a keeper a test
    killed leaves its preloaded process in a session of its own, and a process that ended is only a status)."""
    try:
        return os.getsid(pid) == os.getsid(0) and not process_of(pid).startswith(("Z", "X"))
    except OSError:
        return False


def process_of(pid):
    """A process's state and command line, as /proc shows them ('' once it has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[0]
        return state + " " + Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except (OSError, IndexError):
        return ""


def subreaper(flag=None):
    """Whether this process is the subreaper of its descendants' orphans (Linux), after setting it to `flag`."""
    if not sys.platform.startswith("linux"):
        return False
    libc, value = ctypes.CDLL(None, use_errno=True), ctypes.c_int()
    if flag is not None:
        libc.prctl(36, int(flag), 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    libc.prctl(37, ctypes.byref(value), 0, 0, 0)  # PR_GET_CHILD_SUBREAPER
    return bool(value.value)


def started_and_run(door, args):
    """fallback.py loaded from its file and run with `args`: its exit status. Nothing of it is left referenced."""
    try:
        spec = importlib.util.spec_from_file_location("keeper_under_test", door)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.run(list(args))
    except SystemExit as exit:  # what fallback.py says before its loop can start (an old Python, a package)
        return exit.code if isinstance(exit.code, int) else 1


@contextlib.contextmanager
def printed_to_files():
    """Standard output and error, at the level of their descriptors (what children write too), sent to two files
    for as long as this lasts; then [what reached each], as text."""
    printed, saved = [], []
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        files = [out, err]
        streams = (sys.stdout, sys.stderr)
        for fd, stream, file in zip((1, 2), streams, files):
            stream.flush()
            saved.append(os.dup(fd))
            os.dup2(file.fileno(), fd)
        sys.stdout, sys.stderr = (open(fd, "w", closefd=False, buffering=1) for fd in (1, 2))
        try:
            yield printed
        finally:
            for ours in (sys.stdout, sys.stderr):
                ours.flush()
                ours.close()
            sys.stdout, sys.stderr = streams
            for fd, copy in zip((1, 2), saved):
                os.dup2(copy, fd)
                os.close(copy)
            for file in files:
                file.seek(0)
                printed.append(file.read().decode("utf-8", "replace"))


@pytest.fixture
def gemini():
    fake = FakeGemini()
    yield fake
    fake.close()


@pytest.fixture
def workspace(tmp_path):
    return fresh_workspace(tmp_path / "workspace")


def fresh_workspace(root):
    """A fresh clone's workspace in root: seed.py and the modules it imports from this folder, the product's
    files, and fixed steering texts (without the project's own tests, to keep the gate fast). Each file is a copy
    of its own (never a link: the seed the tests run writes its workspace), written from this session's memory."""
    made = set()
    for rel, data, modified in workspace_files():
        if (root / rel).parent not in made:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            made.add((root / rel).parent)
        (root / rel).write_bytes(data)
        os.utime(root / rel, ns=(modified, modified))  # a source's time is what its bytecode is valid for
    for rel, text in STEERING.items():
        (root / rel).write_text(text)
    return root


@functools.cache
def workspace_files():
    """What a workspace is given, read once: (its path there, its bytes, its time) for the product's files, seed.py
    and its modules, and the keeper's bytecode."""
    given = [(rel, REPO / rel) for rel in PRODUCT_FILES + list(seed_and_its_modules()) if (REPO / rel).is_file()]
    given += [(Path(rel).parent.joinpath("__pycache__", pyc.name).as_posix(), pyc) for rel, pyc in BYTECODE]
    return tuple((rel, path.read_bytes(), path.stat().st_mtime_ns) for rel, path in given)


@functools.cache
def seed_and_its_modules():
    """seed.py and every module of this folder it imports, directly or not (a seed the model split in parts)."""
    found, queue = [], ["seed.py"]
    while queue:
        rel = queue.pop()
        if rel in found or not (REPO / rel).is_file():
            continue
        found.append(rel)
        tree = ast.parse((REPO / rel).read_bytes())
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and not n.level]
        for top in {name.split(".")[0] for name in names} - set(sys.stdlib_module_names):
            spec = importlib.util.find_spec(top)  # what resolves outside this folder is not the codebase's
            if spec and spec.origin and Path(spec.origin).resolve().is_relative_to(REPO):
                queue += [Path(spec.origin).resolve().relative_to(REPO).as_posix()] + \
                    [p.relative_to(REPO).as_posix() for p in Path(spec.origin).parent.rglob("*.py")
                     if spec.submodule_search_locations]
    return tuple(found)


@pytest.fixture
def env(gemini):
    """A person's environment, pointed at this test's fake server."""
    return user_env(gemini)


def user_env(fake):
    """The environment of a user with a key, pointed at the fake server; nothing inherited from this shell."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "OPENAI_", "SEED_"))}
    clean.update(GEMINI_API_KEY=KEY, GEMINI_API_BASE=fake.url, GEMINI_MODEL="gemini-3.5-flash",
                 GEMINI_LIMITS=",".join(f"{model}=1000/10000000/100000" for model in TEST_MODELS),
                 SEED_BACKOFF="0.01", PYTHONDONTWRITEBYTECODE="1")
    return clean


def run_seed(root, env, timeout=60):
    """`python seed.py` as the keeper starts it, confined as the keeper confines it: the model rewrites seed.py, so
    these tests never run it as the person (it writes only its workspace, reads no .env or home, reaches only the
    fake server); its folder's modules come after the standard library. In the gate, which runs this contract
    already confined and lays out no keeper beside it, it runs as it is."""
    run = [sys.executable, "-P", "-c", "import runpy, sys; sys.path.append('.'); runpy.run_path('seed.py', "
           "run_name='__main__')"]
    start = root
    if "sandbox" in ROOMS:
        sandbox, base = load_keeper("sandbox"), env.get("GEMINI_API_BASE", "")
        temp = root / ".seed" / "tmp"
        temp.mkdir(parents=True, exist_ok=True)
        port = int(base.rsplit(":", 1)[1].split("/")[0]) if base else None
        policy = sandbox.policy_for(root, temp, port, {}, isolate=sandbox.isolation()[0])
        run, start = sandbox.command(run, policy, root), sandbox.START  # never started in the folder it writes
        env = {**env, "HOME": str(temp)}
    return subprocess.run(run, cwd=start, env=env, capture_output=True, text=True, timeout=timeout)


def pacific_today():
    return datetime.now(ZoneInfo("America/Los_Angeles")).date().isoformat()


def requests_booked(backups, day=None):
    """{model: {"requests", "prompt", "output", "thinking", "kinds", "wasted"}} of the requests the record in the
    folder `backups` holds for a Pacific day (today by default), counted here from its rows."""
    booked = {}
    if not (backups / "record.sqlite").exists():
        return booked
    with contextlib.closing(sqlite3.connect(backups / "record.sqlite")) as db:
        for model, kind, wasted, prompt, output, thinking in db.execute(
                "SELECT model, kind, wasted, prompt_tokens, output_tokens, thinking_tokens FROM requests WHERE day = ?",
                (day or pacific_today(),)):
            use = booked.setdefault(model, {"requests": 0, "prompt": 0, "output": 0, "thinking": 0, "kinds": {},
                                            "wasted": {}})
            use.update(requests=use["requests"] + 1, prompt=use["prompt"] + (prompt or 0),
                       output=use["output"] + (output or 0), thinking=use["thinking"] + (thinking or 0))
            use["kinds"][kind] = use["kinds"].get(kind, 0) + 1
            if wasted:
                use["wasted"][wasted] = use["wasted"].get(wasted, 0) + 1
    return booked
