"""Benchmark: seed's iteration against OpenEvolve's on the same tiny problem, with a model that answers at once.

    python bench/peers.py                       # 5 rounds of 20 timed iterations each
    python bench/peers.py --rounds 3 --iterations 10
    python bench/peers.py --cache DIR           # another place for OpenEvolve's throwaway virtual environment
    python bench/peers.py --zygote 0            # seed's gate launching every check (SEED_ZYGOTE=0)

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
  `python -m pytest` over the test as the evaluator runs it; both without a bytecode cache, as the keeper runs
  them (PYTHONDONTWRITEBYTECODE=1). The zygote floor: the same seed.py, then pytest.main in a child forked from
  this process, which has imported pytest once (the least a gate with a preloaded pytest can cost).
Each fake answers at once. An iteration's time is what the fake sees: from one request to the next, WARM_UP of
them left out. Its CPU time is that of every process of the peer (its children's, as the kernel counts them at
exit): a turn runs the peer twice, WARM_UP + 1 iterations and then --iterations more, and the difference is
divided, so no start-up weighs in. CPU time is the steadier figure on a machine others share: waiting for a core
lengthens the times, not the CPU. The peers take turns, a round each, so a machine that slows down weighs on both;
the environment is this shell's without PYTHONDONTWRITEBYTECODE (a person's: bytecode is cached). Prints each
round's CPU and time per iteration of each peer and their ratios as it goes, then each one's median time and
quartiles, CPU, the median of the rounds' ratios, seed's iteration against both floors, how many iterations landed
or scored, the versions and the load.
Asserts nothing.
"""
import argparse
import contextlib
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "supervisor" / "tests"))
import fake_gemini  # noqa: E402  (the keeper's tests' fakes)
from conftest import STEERING, TEST_MODELS, fresh_workspace  # noqa: E402
from test_openai_compatible import FakeServer, ollama_answer  # noqa: E402

CACHE = Path.home() / ".cache" / "seed-bench" / "peers"
PYTEST = "pytest==" + pytest.__version__  # the one this project runs, for OpenEvolve's evaluator too
WARM_UP = 3          # intervals left out at each start: the first snapshot, the working copy, the worker's start
FLOOR_RUNS = 5       # runs of each bare process per round
RUN_LIMIT = 900      # seconds one run of either peer may take
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
EVALUATOR = f'''"""OpenEvolve's evaluator for the tiny problem: pytest over its test in a child, as seed's gate does."""
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


def run_seed(folder, iterations, settings):
    """seed for `iterations`: {"arrivals", "cpu", "landed": iterations the log says landed, "ran", "output"}."""
    root = fresh_workspace(folder)
    three_files(root)
    with served(TimedGemini()) as fake:
        env = person_env(GEMINI_API_KEY="AIzaSyBENCH" + os.urandom(14).hex(), GEMINI_API_BASE=fake.url,
                         GEMINI_MODEL=TEST_MODELS[0], GEMINI_LIMITS=f"{TEST_MODELS[0]}=1000/10000000/100000",
                         **settings)
        done, cpu = measured([sys.executable, "fallback.py", "--delay", "0", "--iterations", str(iterations)], root,
                             env)
    landed = (root / "iteration_log.md").read_text().count(" — landed: ")
    return {"arrivals": fake.arrivals, "cpu": cpu, "landed": landed, "ran": iterations, "output": done.stdout}


def run_openevolve(folder, iterations, python):
    """OpenEvolve for `iterations`: {"arrivals", "cpu", "landed": evaluations that passed, "ran", "output"}."""
    folder.mkdir(parents=True)
    (folder / "solve.py").write_text(PROGRAM.format(version=0))
    (folder / "evaluator.py").write_text(EVALUATOR)
    with served(TimedOpenAI()) as fake:
        config = {"max_iterations": iterations, "diff_based_evolution": False,
                  "llm": {"api_base": fake.base, "api_key": "bench", "models": [{"name": "fake", "weight": 1.0}]}}
        (folder / "config.yaml").write_text(json.dumps(config))  # JSON is YAML
        done, cpu = measured([str(python.parent / "openevolve-run"), "solve.py", "evaluator.py", "--config",
                              "config.yaml", "--output", "out", "--iterations", str(iterations)], folder, person_env())
    scores = (folder / "scores.txt").read_text().split() if (folder / "scores.txt").exists() else []
    return {"arrivals": fake.arrivals, "cpu": cpu, "landed": scores.count("1.0") - 1, "ran": len(scores) - 1,
            "output": done.stdout}  # less the first program's evaluation


def take_turn(run, folder, iterations, *args):
    """A peer's turn: a short run, then one of `iterations` more. Its times between requests past WARM_UP, and its
    CPU per iteration: the difference of the two runs' (every process of the peer), so no start-up weighs in."""
    short = run(folder / "short", WARM_UP + 1, *args)
    long = run(folder / "long", WARM_UP + 1 + iterations, *args)
    times = [later - earlier for earlier, later in zip(long["arrivals"], long["arrivals"][1:])][WARM_UP:]
    return {**long, "times": times, "cpu": (long["cpu"] - short["cpu"]) / iterations}


def run_floor(folder, runs):
    """seed's two processes bare, `runs` times each: {"seed": [(seconds, CPU seconds)], "pytest": the same}."""
    folder.mkdir(parents=True)
    (folder / "seed.py").write_bytes((REPO / "seed.py").read_bytes())
    for rel, text in STEERING.items():
        (folder / rel).write_text(text)
    three_files(folder)
    with served(TimedGemini(clean=True)) as fake:
        env = person_env(GEMINI_API_BASE=fake.url, GEMINI_API_KEY="bench", GEMINI_MODEL=TEST_MODELS[0],
                         PYTHONDONTWRITEBYTECODE="1")
        seed = [timed([sys.executable, "seed.py"], folder, env) for _ in range(runs)]
    env = person_env(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTHONDONTWRITEBYTECODE="1")
    return {"seed": seed, "pytest": [timed([sys.executable, *PYTEST_ARGS, "tests"], folder, env) for _ in range(runs)],
            "zygote": [forked_pytest(folder, env) for _ in range(runs)]}


def forked_pytest(folder, env):
    """(seconds, CPU seconds) of pytest over the test in a child forked from this process, which has imported pytest
    (the zygote floor's gate); it must pass."""
    start, before = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            quiet = os.open(os.devnull, os.O_WRONLY)
            os.dup2(quiet, 1)
            os.dup2(quiet, 2)
            os.chdir(folder)
            sys.path.insert(0, str(folder))  # as python -m puts the folder it starts in first
            os.environ.clear()
            os.environ.update(env)
            code = pytest.main([*PYTEST_ARGS[2:], "tests"])
        finally:
            sys.stdout.flush()
            os._exit(code if isinstance(code, int) else 1)
    _, status = os.waitpid(pid, 0)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"pytest forked from this process failed in {folder}")
    return time.monotonic() - start, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


@contextlib.contextmanager
def served(fake):
    """A fake server, closed after the block."""
    try:
        yield fake
    finally:
        fake.close()


def measured(argv, cwd, env):
    """Run argv to its end: (what it printed, the CPU seconds of every process of it that was waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=RUN_LIMIT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return done, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def timed(argv, cwd, env):
    """(seconds, CPU seconds) of argv, start to exit; it must succeed."""
    start = time.monotonic()
    done, cpu = measured(argv, cwd, env)
    if done.returncode:
        raise SystemExit(f"{' '.join(argv)} failed in {cwd}:\n{done.stdout[-2000:]}")
    return time.monotonic() - start, cpu


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


def median_ms(values):
    return statistics.median(values) * 1000


def show(name, turns):
    """One peer's row: its median time per iteration (and quartiles) and CPU per iteration, in milliseconds; None
    when it ran too few iterations."""
    times = sorted(t for turn in turns for t in turn["times"])
    if len(times) < 2:
        print(f"  {name}: too few iterations; its output ends:\n    "
              + "\n    ".join(turns[-1]["output"].strip().splitlines()[-8:]))
        return None
    low, median, high = (t * 1000 for t in statistics.quantiles(times, n=4))
    cpu = statistics.median(turn["cpu"] for turn in turns) * 1000
    print(f"  {name:<44} {median:5.0f} ms (quartiles {low:.0f} to {high:.0f}; {len(times)})   CPU {cpu:5.0f} ms")
    return median, cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="turns each peer takes (default 5)")
    parser.add_argument("--iterations", type=int, default=20, help="timed iterations per turn (default 20)")
    parser.add_argument("--cache", type=Path, default=CACHE, help="OpenEvolve's throwaway virtual environment")
    parser.add_argument("--zygote", type=int, help="SEED_ZYGOTE for seed's keeper (default: the keeper's own)")
    args = parser.parse_args()
    settings = {} if args.zygote is None else {"SEED_ZYGOTE": str(args.zygote)}
    if args.rounds < 1 or args.iterations < 2:
        parser.error("--rounds must be 1 or more, and --iterations 2 or more")
    python = venv(args.cache)
    print(f"python {platform.python_version()} on {platform.system()} {platform.machine()}, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f}; OpenEvolve {' (openai '.join(versions(python))}), {PYTEST}; models "
          "that answer at once", flush=True)
    seed, evolve, floor = [], [], []
    with tempfile.TemporaryDirectory(prefix="seed-peers-") as base:
        for n in range(args.rounds):
            seed.append(take_turn(run_seed, Path(base, f"seed{n}"), args.iterations, settings))
            evolve.append(take_turn(run_openevolve, Path(base, f"openevolve{n}"), args.iterations, python))
            floor.append(run_floor(Path(base, f"floor{n}"), FLOOR_RUNS))
            show_round(n, seed[-1], evolve[-1], floor[-1])
    report(seed, evolve, floor)


def show_round(n, seed, evolve, floor):
    """One round's figures as it ends: each peer's CPU and median time per iteration, and their ratios."""
    ours, theirs = (median_ms(turn["times"]) if turn["times"] else float("nan") for turn in (seed, evolve))
    zygote = median_ms([r[1] for r in floor["seed"]]) + median_ms([r[1] for r in floor["zygote"]])
    print(f"  round {n + 1}: seed CPU {seed['cpu'] * 1000:.0f} ms, time {ours:.0f} ms; OpenEvolve CPU "
          f"{evolve['cpu'] * 1000:.0f} ms, time {theirs:.0f} ms; seed / OpenEvolve {seed['cpu'] / evolve['cpu']:.2f} "
          f"in CPU, {ours / theirs:.2f} in time; the zygote floor's CPU {zygote:.0f} ms", flush=True)


def report(seed, evolve, floor):
    """The figures, from each turn of each peer and the floor's runs."""
    print(f"per iteration: the median time from one request to the model to the next, and the CPU time of every "
          f"process of the peer (load {os.getloadavg()[0]:.1f} at the end)")
    ours = show("seed (fallback.py: seed.py, the gate's pytest)", seed)
    theirs = show("OpenEvolve (its evaluator's pytest in a child)", evolve)
    if ours and theirs:
        ratios = [(statistics.median(s["times"]) / statistics.median(e["times"]), s["cpu"] / e["cpu"])
                  for s, e in zip(seed, evolve) if s["times"] and e["times"]]
        print(f"  seed / OpenEvolve, the median of the rounds' ratios: {statistics.median(r[0] for r in ratios):.2f} in "
              f"time, {statistics.median(r[1] for r in ratios):.2f} in CPU")
    bare = {name: [run for turn in floor for run in turn[name]] for name in ("seed", "pytest", "zygote")}
    for name, gate in [("the floor, seed's two processes bare", "pytest"),
                       ("the zygote floor, pytest forked preloaded", "zygote")]:
        wall, cpu = (median_ms([r[i] for r in bare["seed"]]) + median_ms([r[i] for r in bare[gate]]) for i in (0, 1))
        print(f"  {name}: seed.py {median_ms([r[0] for r in bare['seed']]):.0f} ms + pytest "
              f"{median_ms([r[0] for r in bare[gate]]):.0f} ms = {wall:.0f} ms (CPU {cpu:.0f} ms)"
              + (f"; seed's iteration is {ours[0] / wall:.2f} times it in time, {ours[1] / cpu:.2f} in CPU" if ours
                 else ""))
    for name, turns, what in [("seed", seed, "landed"), ("OpenEvolve", evolve, "scored 1.0")]:
        print(f"  {name}: {sum(t['landed'] for t in turns)} of {sum(t['ran'] for t in turns)} iterations {what} "
              "(the timed runs)")


if __name__ == "__main__":
    main()
