"""Soak: hundreds of randomized iterations full of faults, in a workspace that has lived, with the invariants
checked after each one.

    python bench/soak.py                          # 300 steps, seed 1 (about 20 minutes on 2 cores)
    python bench/soak.py --steps 40 --seed 7      # a quick one (CI runs one like it)

The workspace starts lived-in: 27 tasks a person wrote that no answer ticks, failure tasks left open, a
log of 3,000 sections, modules named like the standard library (json.py, email/) beside ordinary ones,
and a model in GEMINI_MODEL that refuses JSON mode. Each step runs `fallback.py` on it against a fake Gemini,
with either a good answer (some edit goal.md while the model thinks) or a fault: a bad answer (one writing
tempfile.py, a module named like the standard library's, which never lands), an answer that ticks tasks and is
rolled back, bad code the model writes (landed, so the next run trips on it), an API or network fault, or a
fault in the supervisor's own world (kill -9, Ctrl+C, a second instance, a file size limit). After every step:
every .py compiles and the code imports; `fallback.py --status` works; protected files are unchanged and
goal.md is the person's; the log only grew; no task a person wrote is gone or ticked; every file the codebase
ever had is in it or in a snapshot; nothing is written outside the workspace; the key is in no file but .env;
no process is left; every good answer served lands; no fault from outside the code takes landed work away. It
prints a table of faults and two closing lines. Exit status 1 if any invariant broke.
"""
import argparse
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "supervisor" / "tests"))
import fake_gemini as api  # noqa: E402  (the tests' fake server, reused)

FILES = ["seed.py", "fallback.py", "goal.md", ".env.example",
         "supervisor/tests/conftest.py", "supervisor/tests/fake_gemini.py",
         *sorted(p.relative_to(REPO).as_posix() for p in (REPO / "supervisor").rglob("*.py")
                 if "tests" not in p.relative_to(REPO).parts)]
PROTECTED = ["fallback.py", ".env", ".env.example", "supervisor/tests/conftest.py", "supervisor/tests/fake_gemini.py",
             "supervisor/gateway/gateway.py"]
PERSON_TASKS = ["- [ ] keep the notes tidy", "- [ ] add a --version flag"] + \
    [f"- [ ] a person's idea number {n}" for n in range(25)]
FAILURE_TASKS = "".join(f"- [ ] Iteration {n} was rolled back: tests failed. Find and fix the cause. [failure "
                        f"{n:08x}: 3 times since 2026-11-01 10:00:00 UTC, first after snapshot 0001]\n"
                        f"      E   AssertionError: assert {n} == 2\n" for n in (2990, 2995))
LIVED_IN_CODE = {"json.py": '"""the model\'s own json"""\nVALUE = 1\n', "utils.py": "def double(x):\n    return 2 * x\n",
                 "email/__init__.py": "VALUE = 1\n", "tests/test_utils.py": "from utils import double\n\n\n"
                 "def test_double():\n    assert double(2) == 4\n"}
REFUSER = "soak-refuses-json"  # answers 400 "JSON mode is not enabled" to every request that asks for JSON
NOT_CODE = {".git", "backups", ".seed", "supervisor", "__pycache__", ".pytest_cache"}
NOT_CODE_FILES = set(FILES) - {"seed.py"} | {".env", "report.html", "pending_tasks.md", "iteration_log.md"}  # the
# files snapshots leave out
KEY = "AIzaSySOAK" + "k3y" * 9 + "xx"
MODELS = ["soak-model-0", REFUSER] + [f"soak-model-{n}" for n in range(1, 30)]  # a per-day fault spends one
TIMEOUT = 6  # --timeout for each seed run, short so hangs cost little
RECOVERY_BOUND = 4  # good answers after a fault by which a change must land again


def evolved(body):
    """A seed.py the model might write: runs `body`, then leaves a record like a real seed."""
    return (f"import json, os, pathlib, subprocess, sys, time\n\n\ndef main():\n{body}\n"
            "    pathlib.Path('.seed').mkdir(exist_ok=True)\n"
            "    pathlib.Path('.seed/record.json').write_text(json.dumps({'outcome': 'applied'}))\n\n\n"
            "if __name__ == '__main__':\n    main()\n")


# --- the faults: each queues replies (and may say how to run the supervisor) ---------------------------
def answer(*files):
    return lambda fake, rng: fake.reply(api.answer(list(files)))


FAULTS = {
    # model answers
    "invalid JSON": lambda fake, rng: fake.reply(api.text_answer("Sure! Here is the code.")),
    "cut off, with parts": lambda fake, rng: fake.reply(api.max_tokens(with_parts=True)),
    "cut off, no parts": lambda fake, rng: fake.reply(api.max_tokens(with_parts=False)),
    "blocked": lambda fake, rng: fake.reply(api.blocked()),
    "empty files": answer(),
    "lazy placeholders": answer(("seed.py", "import os\n# ... existing code ...\n")),
    "emptied seed.py": answer(("seed.py", "")),
    "gutted seed.py": answer(("seed.py", "pass\n")),
    "protected paths": answer(("fallback.py", "x = 1\n"), (".env", "GEMINI_API_KEY=stolen\n"),
                              ("goal.md", "mine\n"), ("pending_tasks.md", "gone\n"), ("iteration_log.md", "")),
    "escaping paths": answer(("../escaped.py", "x = 1\n"), ("/tmp/soak-absolute.py", "x = 1\n"),
                             ("outside_link/evil.py", "x = 1\n")),
    "a very large file": answer(("large.py", "x = 1\n" * 400_000)),
    "a module named like the standard library's": answer(("tempfile.py", "VALUE = 1\n")),  # never lands: it would
    # stand in for the real one wherever the folder comes first on the path (gate.taken_name)
    "binary content": answer(("nul.py", "a = 1\x00\n")),
    "odd file names": answer(("ünïcødé ñame.py", "x = 1\n"), ("with space/m.py", "x = 1\n"), ("-dash.py", "x = 1\n")),
    "thousands of files": lambda fake, rng: fake.reply(api.answer([(f"many/m{i}.py", f"N = {i}\n")
                                                                   for i in range(1500)])),
    # code the model writes
    "syntax error": answer(("broken.py", "def f(:\n")),
    "crash at import": answer(("boom.py", "raise RuntimeError('at import')\n")),
    "crash at start": answer(("seed.py", "def main():\n    raise RuntimeError('at start')\n\n\n"
                                         "if __name__ == '__main__':\n    main()\n")),
    "crash at the end": answer(("seed.py", evolved("    pass").replace(
        "\n\n\nif __name__", "    raise SystemExit('at the end')\n\n\nif __name__"))),
    "hang with children": answer(("seed.py", evolved(
        "    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n    time.sleep(600)"))),
    "endless output": answer(("seed.py", evolved("    for _ in range(20_000):\n        print('x' * 1023)"))),
    "memory hog": answer(("seed.py", evolved("    bytearray(16 << 30)"))),
    "a seed that does nothing": answer(("seed.py", "if __name__ == '__main__':\n    pass\n")),
    "deletes a module it imports": answer(("seed.py", "import helper\n" + evolved(
        "    pathlib.Path('helper.py').unlink()")), ("helper.py", "VALUE = 1\n")),
    "a failing test": answer(("tests/test_fails.py", "def test_fails():\n    assert 1 == 2\n")),
    "ticks tasks, then rolled back": lambda fake, rng: fake.reply(api.answer(
        [("tests/test_fails.py", "def test_fails():\n    assert 1 == 2\n")], done=[1, 2, 3])),
    # the API and the network
    "429 per minute": lambda fake, rng: fake.reply(api.per_minute("0.2s")).reply(good_answer(rng)),
    "429 per day": lambda fake, rng: fake.reply(api.per_day()),
    "429 bare": lambda fake, rng: fake.reply(api.error(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted.")),
    "429 limit 0": lambda fake, rng: fake.reply(api.error(429, "RESOURCE_EXHAUSTED", "limit: 0, model: x")),
    "5xx burst": lambda fake, rng: [fake.reply(api.error(c, "UNAVAILABLE", "busy")) for c in (503, 500, 504)],
    "connection refused": "refused",
    "accepts, never answers": lambda fake, rng: fake.reply(good_answer(rng), delay=TIMEOUT + 5),
    "cut mid-body": lambda fake, rng: fake.reply(good_answer(rng), cut=True).reply(good_answer(rng)),
    # the supervisor's own world
    "kill -9, then restart": "kill",
    "Ctrl+C at a random moment": "interrupt",
    "a second instance": "second",
    "a file size limit": "file size",
}


def good_answer(rng, extra=()):
    n = rng.randrange(10**6)
    return api.answer([(f"mod_{n}.py", f"def value():\n    return {n}\n"),
                       (f"tests/test_mod_{n}.py", f"from mod_{n} import value\n\n\ndef test_value():\n"
                                                  f"    assert value() == {n}\n"), *extra])


GOOD = {  # good answers; each returns the answer it queued, to tell whether it was served
    "good answer": lambda fake, rng, root, step: fake.reply(good_answer(rng)).replies[None][-1][1],
    "good answer, goal.md edited meanwhile": lambda fake, rng, root, step: fake.reply(good_answer(rng), hook=lambda r: (
        root / "goal.md").write_text(f"# Goal\n\nA person's new direction, from step {step}.\n")).replies[None][-1][1],
}
WORLD = {"429 per minute", "429 per day", "429 bare", "429 limit 0", "5xx burst", "connection refused",
         "accepts, never answers", "cut mid-body", "kill -9, then restart", "Ctrl+C at a random moment",
         "a second instance", "a file size limit"}  # faults from outside the code
CODE_THAT_LANDS = {"crash at start", "crash at the end", "hang with children", "endless output", "memory hog",
                   "a seed that does nothing", "deletes a module it imports", "gutted seed.py"}


class LivedInGemini(api.FakeGemini):
    """The fake, with a model that refuses JSON mode, and a list of the replies it served."""

    def __init__(self):
        super().__init__()
        self.served = []

    def next_reply(self, request):
        if request["model"] == REFUSER and "responseMimeType" in (request["body"].get("generationConfig") or {}):
            return 400, api.error(400, "INVALID_ARGUMENT", f"JSON mode is not enabled for models/{REFUSER}"), 0, None, False
        reply = super().next_reply(request)
        self.served.append(reply[1])
        return reply


# --- running one step ---------------------------------------------------------------------------------------
def supervise(root, env, *args, limit_file_size=False):
    prefix = ["-c", "import resource, runpy, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
              "resource.setrlimit(resource.RLIMIT_FSIZE, (30_000, 30_000)); sys.argv = sys.argv[1:]; "
              "runpy.run_path('fallback.py', run_name='__main__')"] if limit_file_size else []
    return subprocess.Popen([sys.executable, *prefix, "fallback.py", "--delay", "0", "--timeout", str(TIMEOUT),
                             *args], cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(process, seconds=90):
    """Wait for a supervisor; True if it ended in time (else it is killed and the step counts as stuck)."""
    try:
        process.communicate(timeout=seconds)
        return True
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        return False


def run_step(kind, fake, root, env, rng):
    """Run one step; True if every supervisor it started ended in time."""
    if kind == "refused":
        return finish(supervise(root, dict(env, GEMINI_API_BASE="http://127.0.0.1:9"), "--iterations", "1"))
    if kind == "file size":
        fake.reply(good_answer(rng))
        return finish(supervise(root, env, "--iterations", "1", limit_file_size=True))
    if kind in ("kill", "interrupt", "second"):
        fake.reply(good_answer(rng), delay=rng.uniform(0, 1.5))
        first = supervise(root, env, "--iterations", "1")
        time.sleep(rng.uniform(0.05, 2.0))
        if kind == "second":
            ok = finish(supervise(root, env, "--iterations", "1"), 20)
            first.send_signal(signal.SIGINT)
        else:
            first.send_signal(signal.SIGKILL if kind == "kill" else signal.SIGINT)
            ok = True
        ok = finish(first, 20) and ok
        if kind == "kill":  # the restart, which must put things right
            fake.reply(good_answer(rng))
            ok = finish(supervise(root, env, "--iterations", "1")) and ok
        return ok
    return finish(supervise(root, env, "--iterations", "1"))


# --- the invariants -----------------------------------------------------------------------------------------
def code_files(root):
    found = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in NOT_CODE]
        for name in files:
            path = Path(folder) / name
            if not path.is_symlink() and path.relative_to(root).as_posix() not in NOT_CODE_FILES:
                found[path.relative_to(root).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def snapshot_files(root, sid):
    """{path: sha256} of a snapshot, read from backups/ as its format is documented (a list of folders,
    each folder's listing an object)."""
    read = lambda sha: json.loads((root / "backups" / "objects" / sha[:2] / sha[2:]).read_bytes())
    folders = json.loads((root / "backups" / f"{sid}.json").read_bytes())
    return {folder + name: sha for folder, listing in folders.items() for name, sha in read(listing).items()}


def broken_code(root):
    """The first .py that does not compile, or the import error of a top-level module; '' when all is well."""
    check = ("import importlib, pathlib, sys\nsys.path.append('.')\nfor p in sys.argv[1:]:\n    compile(pathlib.Path(p).read_bytes(), p, 'exec')\n"
             "for p in sys.argv[1:]:\n    if '/' not in p and p[:-3].isidentifier() and p != 'fallback.py':\n"
             "        importlib.import_module(p[:-3])\n")
    files = [rel for rel in code_files(root) if rel.endswith(".py")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEMINI_")}
    done = subprocess.run([sys.executable, "-P", "-c", check, *files], cwd=root, capture_output=True, text=True,
                          timeout=120, env=env)
    return "" if done.returncode == 0 else (done.stderr.strip().splitlines() or ["?"])[-1]


def left_running(root):
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and os.readlink(entry / "cwd").startswith(str(root)):
                pids.append(int(entry.name))
        except OSError:
            pass
    return pids


def check(root, outside, before):
    """The broken invariants, by name, after a step."""
    broken = []
    if broken_code(root):
        broken.append("broken")
    status = subprocess.run([sys.executable, "fallback.py", "--status"], cwd=root, capture_output=True, timeout=60)
    if status.returncode != 0:
        broken.append("broken")
    if any((root / p).read_bytes() != before["protected"][p] for p in PROTECTED) or \
            (root / "goal.md").read_text() != before["goal"]:
        broken.append("lost")
    log = (root / "iteration_log.md").read_bytes()
    if not log.startswith(before["log"]):
        broken.append("lost")
    tasks = (root / "pending_tasks.md").read_text().splitlines()
    if any(t not in tasks for t in PERSON_TASKS):  # never ticked (no landed answer ticks them), never dropped
        broken.append("wrongly ticked" if any(t.replace("[ ]", "[x]") in tasks for t in PERSON_TASKS) else "lost")
    kept = set(code_files(root).items())
    index = json.loads((root / "backups" / "index.json").read_text()) if (root / "backups" / "index.json").exists() else {}
    for entry in index.get("snapshots", []):
        kept |= set(snapshot_files(root, entry["id"]).items())
    if not set(before["code"].items()) <= kept:
        broken.append("lost")
    if sorted(p.name for p in outside.parent.iterdir()) != ["outside", "workspace"] or any(outside.iterdir()) \
            or Path("/tmp/soak-absolute.py").exists():
        broken.append("escaped")
    for path in root.rglob("*"):
        if path.is_file() and path.name != ".env" and not path.is_symlink() and KEY.encode() in path.read_bytes():
            broken.append("leaked")
            break
    if left_running(root):
        broken.append("left running")
        for pid in left_running(root):
            os.kill(pid, signal.SIGKILL)
    return broken


# --- the soak -----------------------------------------------------------------------------------------------
def live_in(root, outside):
    """A workspace as it is after weeks: see the module's docstring."""
    for rel in FILES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, root / rel)
    for rel, text in LIVED_IN_CODE.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / ".env").write_text(f"GEMINI_API_KEY={KEY}\n")
    (root / "outside_link").symlink_to(outside)
    (root / "pending_tasks.md").write_text("# Pending tasks\n\n" + "\n".join(PERSON_TASKS) + "\n" + FAILURE_TASKS)
    (root / "iteration_log.md").write_text("# Iteration log\n" + "".join(
        f"\n## Iteration {n} — 2026-11-01 10:00:00 UTC — {'landed: 1 file(s) changed' if n % 3 else 'no change'}\n\n"
        f"- Tasks:\n  1. step {n}\n- Files: m{n}.py +1 −0\n" for n in range(1, 3001)))


def new_sections(root, log_before):
    return (root / "iteration_log.md").read_bytes()[len(log_before):].decode("utf-8", "replace")


def soak(steps, seed, fault_share=0.6):
    rng = random.Random(seed)
    base = Path(tempfile.mkdtemp(prefix=f"seed-soak-{seed}-"))
    root, outside = base / "workspace", base / "outside"
    outside.mkdir()
    live_in(root, outside)
    fake = LivedInGemini()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "SEED_"))}
    env.update(GEMINI_API_BASE=fake.url, GEMINI_MODEL=",".join(MODELS), SEED_BACKOFF="0.05", SEED_FAULT_PAUSE="0",
               GEMINI_LIMITS=",".join(f"{model}=1000/10000000/100000" for model in MODELS))  # no pacing
    table, totals, since_fault, worst, started = defaultdict(Counter), Counter(), None, 0, time.monotonic()
    dirty = False  # code from a fault landed and was not rolled back yet: the next runs may walk back for it
    for step in range(1, steps + 1):
        kind = rng.choice(sorted(FAULTS)) if rng.random() < fault_share else rng.choice(sorted(GOOD))
        before = {"protected": {p: (root / p).read_bytes() for p in PROTECTED}, "code": code_files(root),
                  "log": (root / "iteration_log.md").read_bytes(), "goal": (root / "goal.md").read_text()}
        fake.replies.clear()
        action = FAULTS.get(kind)
        good = GOOD[kind](fake, rng, root, step) if kind in GOOD else None
        if callable(action):
            action(fake, rng)
        ok = run_step(action if isinstance(action, str) else "", fake, root, env, rng)
        before["goal"] = (root / "goal.md").read_text() if kind in GOOD else before["goal"]  # the person's edit
        broken = check(root, outside, before) + ([] if ok else ["stuck"])
        sections = new_sections(root, before["log"])
        landed = "— landed" in sections
        if good is not None and any(body is good for body in fake.served):
            totals["served"] += 1
            totals["served and landed"] += landed
            if not landed:
                broken.append("good answer not landed")
        after = code_files(root)
        gone = sorted(rel for rel, sha in before["code"].items() if after.get(rel) != sha)
        if kind in WORLD and not dirty and gone:
            broken.append("landed work lost to the world")
            print(f"step {step} ({kind}): landed work gone from the folder: {', '.join(gone[:5])}", flush=True)
        dirty = (dirty or (kind in CODE_THAT_LANDS and landed)) and not re.search(r"— rolled back|went back", sections)
        if kind not in GOOD:
            totals["faults"] += 1
            since_fault = since_fault if since_fault is not None else 0
        elif since_fault is not None:
            since_fault += 1
            if landed:
                worst, since_fault = max(worst, since_fault), None
            elif since_fault > RECOVERY_BOUND:
                broken.append("stuck")
                since_fault = None
        table[kind]["steps"] += 1
        for name in broken:
            table[kind][name] += 1
            totals[name] += 1
    fake.close()
    iterations = len(re.findall(r"^## Iteration ", (root / "iteration_log.md").read_text(), re.M)) - 3000
    print(f"{'step':<40}{'runs':>6}{'broken':>8}{'stuck':>7}{'lost':>6}{'ticked':>8}{'escaped':>9}{'leaked':>8}"
          f"{'left':>6}")
    for kind in sorted(table, key=lambda k: (k not in GOOD, k)):
        row = table[kind]
        print(f"{kind:<40}{row['steps']:>6}{row['broken']:>8}{row['stuck']:>7}{row['lost']:>6}{row['wrongly ticked']:>8}"
              f"{row['escaped']:>9}{row['leaked']:>8}{row['left running']:>6}")
    failures = sum(totals[k] for k in ("stuck", "lost", "wrongly ticked", "escaped", "leaked", "broken", "left running",
                                       "good answer not landed", "landed work lost to the world"))
    print(f"\n{steps} steps ({iterations} iterations) in {(time.monotonic() - started) / 60:.1f} min, seed {seed}; "
          + (f"the workspace is kept for a look: {root}" if failures else "the workspace is removed"))
    if not failures:
        shutil.rmtree(base)
    print(f"good answers: {totals['served']} served, {totals['served and landed']} landed; landed work lost to faults "
          f"from outside the code: {totals['landed work lost to the world']}; tasks lost or wrongly ticked: "
          f"{totals['wrongly ticked']}")
    print(f"{iterations} iterations, {totals['faults']} faults injected, {totals['stuck']} stuck, {totals['lost']} lost, "
          f"{totals['escaped']} escaped, {totals['leaked']} leaked, {totals['broken']} broken, "
          f"{totals['left running']} left running, worst recovery {worst} iterations")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    sys.exit(1 if soak(args.steps, args.seed) else 0)


if __name__ == "__main__":
    main()
