"""Benchmark: seed's iteration against OpenEvolve's on the same tiny problem, with a model that answers at once.

    python bench/peers.py                       # 3 rounds of 10 timed iterations each; about two minutes
    python bench/peers.py --rounds 5 --iterations 20
    python bench/peers.py --cache DIR           # another place for OpenEvolve's throwaway virtual environment

The tiny problem: solve.py (a function that sorts, and a VERSION line) and tests/test_solve.py, which pytest runs.
Every answer rewrites solve.py whole at a new VERSION, and it passes.
- seed: `python fallback.py --delay 0` in a throwaway copy of the workspace (seed.py and the two files: a codebase
  of three), against the tests' fake Gemini (supervisor/tests/fake_gemini.py) on loopback; each iteration lands.
- OpenEvolve, from PyPI in a throwaway virtual environment (~/.cache/seed-bench/peers, made the first time, never
  this project's), as its command `openevolve-run` with its defaults (one worker) but full rewrites, against the
  tests' fake OpenAI-compatible server (supervisor/tests/test_openai_compatible.py) answering solve.py in a fenced
  block. Its evaluator writes the program beside the test and runs pytest in a child, as seed's gate does (plain
  pytest: `-p no:cacheprovider`, no plugins loaded, this project's version of it).
- the floor: the two processes seed's iteration needs, bare (no keeper, no launcher, no confinement), one after
  the other in a folder of the same three files: `python seed.py` asking the fake (as the gateway answers), then
  `python -m pytest` over the test as the evaluator runs it.
Each fake answers at once. An iteration's time is what the fake sees: from one request to the next, WARM_UP of
them left out at each start. The peers take turns, a round each, so a machine that slows down weighs on both; the
environment is this shell's without PYTHONDONTWRITEBYTECODE (a person's: bytecode is cached). Prints each one's
median and quartiles, the ratio, seed's iteration above the floor, what landed or scored, and the versions.
Asserts nothing.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "supervisor" / "tests"))
import fake_gemini  # noqa: E402  (the keeper's tests' fakes)
from conftest import STEERING, TEST_MODELS, fresh_workspace  # noqa: E402
from test_openai_compatible import FakeServer, ollama_answer  # noqa: E402

CACHE = Path.home() / ".cache" / "seed-bench" / "peers"
PYTEST = "pytest==" + __import__("pytest").__version__  # the one this project runs, for OpenEvolve's evaluator too
WARM_UP = 3          # intervals left out at each start: the first snapshot, the working copy, the worker's start
FLOOR_RUNS = 5       # runs of each bare process per round
RUN_LIMIT = 600      # seconds one round of either peer may take
TASKS = ["Keep it sorted", "Keep it tested", "Keep it small"]
PROGRAM = '''"""The tiny problem: sort numbers."""

VERSION = {version}


# EVOLVE-BLOCK-START
def solve(values):
    """The values in increasing order."""
    return sorted(values)
# EVOLVE-BLOCK-END
'''
TEST = '''from solve import solve


def test_sorts():
    assert solve([3, 1, 2]) == [1, 2, 3]
'''
PYTEST_ARGS = ["-m", "pytest", "-q", "-p", "no:cacheprovider"]  # plain pytest, as seed's gate runs it
EVALUATOR = f'''"""OpenEvolve's evaluator for the tiny problem: pytest over its test, in a child, as seed's gate runs it."""
import os
import shutil
import subprocess
import sys
import tempfile

TEST = {TEST!r}


def evaluate(program_path):
    with tempfile.TemporaryDirectory() as folder:
        shutil.copy(program_path, os.path.join(folder, "solve.py"))
        with open(os.path.join(folder, "test_solve.py"), "w") as test:
            test.write(TEST)
        done = subprocess.run([sys.executable, *{PYTEST_ARGS!r}, folder], cwd=folder, capture_output=True,
                              env={{**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}})
    score = 1.0 if done.returncode == 0 else 0.0
    with open("scores.txt", "a") as scores:  # for the bench: what each evaluation came to
        scores.write(f"{{score}}\\n")
    return {{"combined_score": score}}
'''


# --- the fakes: each answers at once with solve.py at a new version, noting when each request came -------------
class TimedGemini(fake_gemini.FakeGemini):
    """The tests' fake Gemini; `clean`: the answer as the gateway hands it to the seed (for the bare seed.py)."""

    def __init__(self, clean=False):
        self.arrivals, self.clean = [], clean
        super().__init__()

    def next_reply(self, request):
        self.arrivals.append(time.monotonic())
        files = [("solve.py", PROGRAM.format(version=len(self.arrivals)))]
        body = fake_gemini.clean(files, TASKS) if self.clean else fake_gemini.answer(files, TASKS)
        return 200, body, 0, None, False


class TimedOpenAI(FakeServer):
    """The tests' fake OpenAI-compatible server, answering every chat request with solve.py at a new version."""

    def __init__(self):
        self.arrivals = []
        super().__init__()

    def reply_to(self, method, path):
        if (method, path) != ("POST", "/v1/chat/completions"):
            return super().reply_to(method, path)
        self.arrivals.append(time.monotonic())
        return 200, ollama_answer(f"```python\n{PROGRAM.format(version=len(self.arrivals))}```")


# --- the peers --------------------------------------------------------------------------------------------
def person_env(**settings):
    """This shell's environment as a person's: no model settings of its own, bytecode cached as usual."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "OPENAI_", "SEED_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return {**env, **settings}


def three_files(root):
    """The tiny problem's files beside seed.py (which root already holds)."""
    (root / "solve.py").write_text(PROGRAM.format(version=0))
    (root / "tests").mkdir()
    (root / "tests" / "test_solve.py").write_text(TEST)


def run_seed(folder, iterations):
    """One round of seed: {"times": seconds between requests, "landed": iterations the log says landed}."""
    root = fresh_workspace(folder)
    three_files(root)
    fake = TimedGemini()
    env = person_env(GEMINI_API_KEY="AIzaSyBENCH" + os.urandom(14).hex(), GEMINI_API_BASE=fake.url,
                     GEMINI_MODEL=TEST_MODELS[0], GEMINI_LIMITS=f"{TEST_MODELS[0]}=1000/10000000/100000")
    try:
        done = subprocess.run([sys.executable, "fallback.py", "--delay", "0", "--iterations", str(iterations)],
                              cwd=root, env=env, capture_output=True, text=True, timeout=RUN_LIMIT)
    finally:
        fake.close()
    landed = (root / "iteration_log.md").read_text().count(" — landed: ")
    return {"times": gaps(fake.arrivals), "landed": landed, "ran": iterations, "output": done.stdout + done.stderr}


def run_openevolve(folder, python, iterations):
    """One round of OpenEvolve: {"times": seconds between requests, "landed": evaluations that passed}."""
    folder.mkdir()
    (folder / "solve.py").write_text(PROGRAM.format(version=0))
    (folder / "evaluator.py").write_text(EVALUATOR)
    fake = TimedOpenAI()
    config = {"max_iterations": iterations, "diff_based_evolution": False,
              "llm": {"api_base": fake.base, "api_key": "bench", "models": [{"name": "fake", "weight": 1.0}]}}
    (folder / "config.yaml").write_text(json.dumps(config))  # JSON is YAML
    try:
        done = subprocess.run([str(python.parent / "openevolve-run"), "solve.py", "evaluator.py", "--config",
                               "config.yaml", "--output", "out", "--iterations", str(iterations)], cwd=folder,
                              env=person_env(), capture_output=True, text=True, timeout=RUN_LIMIT)
    finally:
        fake.close()
    scores = (folder / "scores.txt").read_text().split() if (folder / "scores.txt").exists() else []
    return {"times": gaps(fake.arrivals), "landed": scores.count("1.0") - 1, "ran": len(scores) - 1,
            "output": done.stdout + done.stderr}  # less the first program's evaluation


def run_floor(folder, runs):
    """seed's two processes bare, `runs` times each: {"seed": seconds of each, "pytest": seconds of each}."""
    folder.mkdir()
    (folder / "seed.py").write_bytes((REPO / "seed.py").read_bytes())
    for rel, text in STEERING.items():
        (folder / rel).write_text(text)
    three_files(folder)
    fake = TimedGemini(clean=True)
    seed_env = person_env(GEMINI_API_BASE=fake.url, GEMINI_API_KEY="bench", GEMINI_MODEL=TEST_MODELS[0])
    try:
        seed = [timed([sys.executable, "seed.py"], folder, seed_env) for _ in range(runs)]
    finally:
        fake.close()
    pytest = [timed([sys.executable, *PYTEST_ARGS, "tests"], folder, person_env(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1"))
              for _ in range(runs)]
    return {"seed": seed, "pytest": pytest}


def timed(argv, cwd, env):
    """Seconds `argv` took, start to exit; it must succeed."""
    start = time.monotonic()
    subprocess.run(argv, cwd=cwd, env=env, check=True, capture_output=True)
    return time.monotonic() - start


def gaps(arrivals):
    """Seconds between one request and the next, the first WARM_UP left out."""
    return [later - earlier for earlier, later in zip(arrivals, arrivals[1:])][WARM_UP:]


# --- set-up and figures ------------------------------------------------------------------------------------
def venv(cache):
    """The throwaway virtual environment with OpenEvolve and this project's pytest (made once, then reused)."""
    python = cache / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(cache)], check=True)
    check = f"import openevolve, pytest; assert pytest.__version__ == {PYTEST.split('==')[1]!r}"
    if subprocess.run([str(python), "-c", check], capture_output=True).returncode:
        print(f"installing openevolve and {PYTEST} into {cache}", flush=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "openevolve", PYTEST], check=True)
    return python


def versions(python):
    code = "import importlib.metadata as m; print(' '.join(m.version(n) for n in ('openevolve', 'openai')))"
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True).stdout.split()


def milliseconds(times):
    """(median, lower quartile, upper quartile) of seconds, in milliseconds."""
    ordered = sorted(t * 1000 for t in times)
    low, median, high = statistics.quantiles(ordered, n=4) if len(ordered) > 1 else ordered * 3
    return median, low, high


def show(name, runs):
    """One peer's row; its median in milliseconds, or None when it ran too few iterations."""
    times = [t for run in runs for t in run["times"]]
    if len(times) < 2:
        print(f"  {name}: too few iterations; its output ends:\n    "
              + "\n    ".join(runs[-1]["output"].strip().splitlines()[-8:]))
        return None
    median, low, high = milliseconds(times)
    print(f"  {name:<58} {median:5.0f} ms  (quartiles {low:.0f} to {high:.0f}; {len(times)} iterations)")
    return median


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="turns each peer takes (default 3)")
    parser.add_argument("--iterations", type=int, default=10, help="timed iterations per round (default 10)")
    parser.add_argument("--cache", type=Path, default=CACHE, help="OpenEvolve's throwaway virtual environment")
    args = parser.parse_args()
    if args.rounds < 1 or args.iterations < 2:
        parser.error("--rounds must be 1 or more, and --iterations 2 or more")
    python = venv(args.cache)
    openevolve, openai = versions(python)
    print(f"python {platform.python_version()} on {platform.system()} {platform.machine()}, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f}; OpenEvolve {openevolve} (openai {openai}), {PYTEST}; models that answer "
          "at once")
    seed, evolve, floor, total = [], [], [], args.iterations + WARM_UP + 1
    with tempfile.TemporaryDirectory(prefix="seed-peers-") as base:
        for n in range(args.rounds):
            seed.append(run_seed(Path(base, f"seed{n}"), total))
            evolve.append(run_openevolve(Path(base, f"openevolve{n}"), python, total))
            floor.append(run_floor(Path(base, f"floor{n}"), FLOOR_RUNS))
    report(seed, evolve, floor)


def report(seed, evolve, floor):
    print("time per iteration, from one request to the model to the next (the median):")
    ours = show("seed (fallback.py: seed.py, then the gate's pytest)", seed)
    theirs = show("OpenEvolve (one worker; its evaluator's pytest in a child)", evolve)
    if ours and theirs:
        print(f"  seed / OpenEvolve: {ours / theirs:.2f}")
    bare_seed = milliseconds([t for run in floor for t in run["seed"]])[0]
    bare_pytest = milliseconds([t for run in floor for t in run["pytest"]])[0]
    print(f"  the floor, seed's two processes bare: seed.py {bare_seed:.0f} ms + pytest {bare_pytest:.0f} ms = "
          f"{bare_seed + bare_pytest:.0f} ms" + (f"; seed's iteration is {ours - bare_seed - bare_pytest:.0f} ms above "
                                                 "it" if ours else ""))
    for name, runs, what in [("seed", seed, "landed"), ("OpenEvolve", evolve, "scored 1.0")]:
        print(f"  {name}: {sum(run['landed'] for run in runs)} of {sum(run['ran'] for run in runs)} iterations {what}")


if __name__ == "__main__":
    main()
