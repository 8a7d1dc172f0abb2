"""Benchmark: iterations per hour against an instant local model server (the keeper's own ceiling: the model is free).

    python bench/local.py                               # 10 and 2,000 files, 20 iterations each (about 5 minutes)
    python bench/local.py --sizes 2000 --iterations 5   # a quick one

For each size, a made-up codebase in a temporary copy of the workspace: seed.py, modules of about 13 kB in a
few packages (one per 500 files, each with its __init__.py), and a test file of nine tests for one module in
three, in tests/<package>/; 2,000 files make about 20 MB (as in bench/overhead.py) and 4,482 tests. Its .env
holds OPENAI_BASE_URL, pointing at the tests' fake OpenAI-compatible server (supervisor/tests/test_openai_compatible.py)
with Ollama's side paths (/api/ps: the model runs with a context of 32,768 tokens), and OPENAI_MODEL; there is
no GEMINI_API_KEY. The fake answers every chat request at once with a good answer, one module rewritten (its
VERSION line) and its test, so every iteration lands and the gate runs pytest over every test file.

`python fallback.py --delay 0 --iterations N` runs there twice, each time a process of its own: a warm-up (the
first snapshot stores every file, the working copy is made), then the timed run. Meanwhile its children are
watched in /proc every 5 ms (when each seed run and each gate child is first seen, and when it is gone), and
the fake notes when each chat request arrives (a run the preloaded process forked is its child, told apart by the
folder it stands in once confined). Prints, per size: iterations, landed, wall time and iterations
per hour; the median iteration as the log has it ("; X.X s"); the median cycle (a seed run's start to the
next's) split into the seed run (and its part until its request reached the fake), the gate child, and the
keeper's own work in its process. Last, that no request reached anything but the fake (a trap listens at
GEMINI_API_BASE and as the HTTP(S) proxy, loopback excepted) and that the ledger (the record's requests) and the
log counted every request the fake answered. Asserts nothing.
"""
import argparse
import contextlib
import json
import math
import os
import platform
import re
import shutil
import socketserver
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from importlib.metadata import entry_points
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "supervisor" / "tests"))
from test_openai_compatible import QWEN, FakeServer, ollama, ollama_answer  # noqa: E402  (the tests' fake)

FILES = ["seed.py", "fallback.py", "goal.md", "supervisor/tests/conftest.py",
         "supervisor/tests/fake_gemini.py", "supervisor/tests/test_seed.py",
         *sorted(p.relative_to(REPO).as_posix() for p in (REPO / "supervisor").rglob("*.py")
                 if "tests" not in p.relative_to(REPO).parts)]
PACKAGES = ["billing", "catalog", "ledger", "reports", "shipping"]  # one per 500 files, none named like the stdlib
CONTEXT = 32_768      # tokens: the context Ollama's /api/ps says the model runs with
WARM_UP = 1           # iterations run first, in a process of their own, and not timed
MODULE_BYTES = 13_000  # each module; with a test file (about 1 kB) for one in three, 2,000 files make ~20 MB
TESTS_PER_FILE = 8    # tests of functions in each test file, besides its test of VERSION
POLL = 0.005          # seconds between looks at the supervisor's children in /proc (about 4 % of a core)
RUN_LIMIT = 600       # seconds a run of fallback.py may take; then it is stopped (SIGTERM, then SIGKILL)
FUNCTION = '''

def scaled_{k}_{j}(values, factor={j}):
    """Each of the values times the factor, for records of kind {k}."""
    return [value * factor for value in values]
'''
TEST = '''

def test_scaled_{k}_{j}():
    assert mod.scaled_{k}_{j}([1, 2]) == [{j}, {double}]
'''


# --- the codebase -------------------------------------------------------------------------------
def layout(files):
    """(packages, modules, test files) for a codebase of `files` files, seed.py and the __init__.py files included."""
    packages = PACKAGES[:1 + files // 500]
    rest = files - 1 - len(packages)
    return packages, rest - rest // 4, rest // 4


def module_path(packages, k):
    return f"{packages[k % len(packages)]}/mod_{k:04d}.py"


def test_path(packages, k):
    return f"tests/{packages[k % len(packages)]}/test_mod_{k:04d}.py"


def module_text(k, version):
    """A module of about MODULE_BYTES: small functions with docstrings, and a VERSION line the answers change."""
    count = MODULE_BYTES // len(FUNCTION.format(k=k, j=10))
    return (f'"""Helpers for the records of kind {k}."""\n\nVERSION = {version}\n'
            + "".join(FUNCTION.format(k=k, j=j) for j in range(count)))


def test_text(packages, k, version):
    """The tests of module k: its version, and TESTS_PER_FILE of its functions."""
    name = module_path(packages, k)[:-3].replace("/", ".")
    return (f"import {name} as mod\n\n\ndef test_version():\n    assert mod.VERSION == {version}\n"
            + "".join(TEST.format(k=k, j=j, double=2 * j) for j in range(TESTS_PER_FILE)))


def make_codebase(root, files):
    """The made-up codebase (see the module's docstring), beside seed.py; its bytes, seed.py's included. Module k,
    for k under the number of test files, has a test."""
    packages, modules, tests = layout(files)
    texts = {f"{package}/__init__.py": f'"""The {package} package."""\n' for package in packages}
    texts.update({module_path(packages, k): module_text(k, 0) for k in range(modules)})
    texts.update({test_path(packages, k): test_text(packages, k, 0) for k in range(tests)})
    for rel, text in texts.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return sum(map(len, texts.values())) + (root / "seed.py").stat().st_size


def make_workspace(root, files, server):
    """A temporary copy of the workspace holding the made-up codebase, its .env pointing at the fake server; the
    codebase's bytes."""
    for rel in FILES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, root / rel)
    (root / "pending_tasks.md").write_text("# Pending tasks\n\n")  # as a first start makes them (a clone has none)
    (root / "iteration_log.md").write_text("# Iteration log\n")
    (root / ".env").write_text(f"OPENAI_BASE_URL={server.base}\nOPENAI_MODEL={QWEN}\n")
    return make_codebase(root, files)


def queue_answers(server, files, first, count):
    """Queue `count` good answers, numbered from `first`: answer i rewrites a tested module, at VERSION i, and its
    test."""
    packages, _, tests = layout(files)
    for i in range(first, first + count):
        k = i % tests
        payload = {"tasks": [f"Bump kind {k} to version {i}", "Test it", "Keep the rest"], "done": [],
                   "files": [{"path": module_path(packages, k), "content": module_text(k, i)},
                             {"path": test_path(packages, k), "content": test_text(packages, k, i)}]}
        server.answer(ollama_answer(json.dumps(payload)))


# --- the fake, the trap and the watcher -----------------------------------------------------------
class TimedServer(FakeServer):
    """The tests' fake OpenAI-compatible server, noting when each chat request arrives."""

    def __init__(self, routes):
        self.arrivals = []
        super().__init__(routes)

    def reply_to(self, method, path):
        if path == "/v1/chat/completions":
            self.arrivals.append(time.monotonic())
        return super().reply_to(method, path)


class TrapHandler(socketserver.StreamRequestHandler):
    def handle(self):
        self.server.seen.append(self.rfile.readline(500).decode("latin-1").strip())


def open_trap():
    """A loopback listener standing for everything but the fake: it notes the first line of what reaches it."""
    trap = socketserver.ThreadingTCPServer(("127.0.0.1", 0), TrapHandler)
    trap.daemon_threads, trap.seen = True, []
    threading.Thread(target=trap.serve_forever, args=(0.05,), daemon=True).start()
    return trap


def bench_env(trap):
    """This shell's environment without model settings, every proxy and GEMINI_API_BASE pointing at the trap."""
    proxy = f"http://127.0.0.1:{trap.server_address[1]}"
    names = ("http_proxy", "https_proxy", "all_proxy")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GEMINI_", "OPENAI_", "SEED_")) and k.lower() not in names + ("no_proxy",)}
    env.update({name: proxy for name in names + tuple(n.upper() for n in names)}, GEMINI_API_BASE=proxy)
    env.update(no_proxy="127.0.0.1,localhost", NO_PROXY="127.0.0.1,localhost")
    return env


class Watcher:
    """The children of a process as /proc shows them, every POLL seconds: [kind, first seen, gone] for each."""

    def __init__(self, pid):
        self.pid, self.live, self.runs, self.done = pid, {}, [], threading.Event()
        self.thread = threading.Thread(target=self.watch, daemon=True)
        self.thread.start()

    def watch(self):
        while not self.done.is_set():
            now, kinds = time.monotonic(), {}
            for pid in children_of(self.pid):
                if kind_of(pid) == "zygote":  # its children: the runs it forked (an ended one is kept unreaped)
                    kinds.update(dict.fromkeys(filter(running, children_of(pid)), forked_kind))
                else:
                    kinds[pid] = kind_of
            for pid in kinds.keys() - self.live.keys():
                self.live[pid] = [kinds[pid](pid), now, None]
                self.runs.append(self.live[pid])
            for pid in self.live.keys() - kinds.keys():
                self.live.pop(pid)[2] = now
            for pid in kinds:  # a child seen between fork and exec (or confinement) is not yet told apart
                if self.live[pid][0] == "other":
                    self.live[pid][0] = kinds[pid](pid)
            time.sleep(POLL)

    def stop(self):
        self.done.set()
        self.thread.join()
        return [run for run in self.runs if run[2] is not None]


def children_of(pid):
    try:
        return {int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}
    except OSError:
        return set()


def running(pid):
    """Whether the process runs still (neither gone nor a zombie)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def kind_of(pid):
    """A child's kind: "seed" for a seed run, "gate" for the gate's child (its launcher holds the same arguments),
    "zygote" for the preloaded process, else "other"."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().decode("utf-8", "replace").split("\0")
    except OSError:
        return "other"
    if any(arg.endswith("preloaded.py") for arg in args):
        return "zygote"
    return "seed" if "seed.py" in args else "gate" if "--" in args and "fallback.py" not in args else "other"


def forked_kind(pid):
    """A run the zygote forked (it holds the zygote's arguments): "seed" or "gate" by the folder its confined process
    stands in (the working copy, or the gate's copy), or "other" while it is not yet confined."""
    folders, queue = set(), [pid]
    while queue:
        process = queue.pop()
        queue += children_of(process)
        try:
            folders.add(os.readlink(f"/proc/{process}/cwd"))
        except OSError:
            pass
    return "seed" if any(f.endswith("/.seed/work") for f in folders) else \
        "gate" if any(f.endswith("/.seed/judged") for f in folders) else "other"


# --- running the keeper -------------------------------------------------------------------------------
def run_fallback(root, env, iterations):
    """`python fallback.py --delay 0 --iterations N` in root, its children watched: {code, started, wall, runs,
    output}, times in time.monotonic() seconds."""
    started = time.monotonic()
    process = subprocess.Popen([sys.executable, "fallback.py", "--delay", "0", "--iterations", str(iterations)],
                               cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    watcher = Watcher(process.pid)
    try:
        output = process.communicate(timeout=RUN_LIMIT)[0]
    except subprocess.TimeoutExpired:
        output = stop(process) + f"\n(stopped after {RUN_LIMIT} s)"
    return {"code": process.returncode, "started": started, "wall": time.monotonic() - started,
            "runs": watcher.stop(), "output": output}


def stop(process):
    """Stop a run of fallback.py that took too long: SIGTERM (it ends its children), then SIGKILL. Its output."""
    process.terminate()
    try:
        return process.communicate(timeout=30)[0]
    except subprocess.TimeoutExpired:
        process.kill()
        return process.communicate()[0]


def read_sections(root):
    """(outcome, requests, seconds) of each section of the workspace's iteration_log.md, oldest first."""
    text = (root / "iteration_log.md").read_text()
    found = re.findall(r"^## Iteration \d+ — [^\n]*? — (.*?)$.*?(\d+) request\(s\).*?; ([\d.]+) s$", text,
                       re.M | re.S)
    return [(outcome, int(requests), float(seconds)) for outcome, requests, seconds in found]


def ledger_requests(root):
    """The requests the record books for the model, over every day."""
    with contextlib.closing(sqlite3.connect(f"file:{root / 'backups' / 'record.sqlite'}?mode=ro", uri=True)) as db:
        return db.execute("SELECT count(*) FROM requests WHERE model = ?", (QWEN,)).fetchone()[0]


# --- the figures -------------------------------------------------------------------------------------
def split_iterations(runs, arrivals, sections):
    """Per timed iteration, by the order of the seed runs: its log's seconds and its cycle, split (see split_cycle)."""
    seeds = [run for run in runs if run[0] == "seed"]
    gates = [run for run in runs if run[0] == "gate"]
    starts = [began for _, began, _ in seeds[1:]] + [math.inf]  # the last cycle has no end
    return [{"log": logged[2], **split_cycle(seed, until, gates, arrivals)}
            for seed, until, logged in zip(seeds, starts, sections)]


def split_cycle(seed, until, gates, arrivals):
    """Seconds from a seed run's start to the next's: the seed run, its part until its request reached the fake,
    the keeper's work before the gate child and after it, the gate child, and the whole cycle."""
    gate = [run for run in gates if seed[1] <= run[1] < until]
    checked, settled = (gate[0][1], gate[-1][2]) if gate else (seed[2], seed[2])
    asked = next((t - seed[1] for t in arrivals if seed[1] <= t <= seed[2]), math.nan)
    return {"seed": seed[2] - seed[1], "asked": asked, "before gate": checked - seed[2],
            "gate": sum(end - began for _, began, end in gate), "after gate": until - settled, "cycle": until - seed[1]}


def median_of(rows, name):
    values = [row[name] for row in rows if math.isfinite(row[name])]
    return statistics.median(values) if values else math.nan


def report_size(files, iterations):
    """Run the bench at one size and print its figures."""
    base = Path(tempfile.mkdtemp(prefix=f"seed-local-{files}-"))
    server, trap = TimedServer(ollama(running=CONTEXT)), open_trap()
    try:
        root = base / "workspace"
        size = make_workspace(root, files, server)
        warm, timed, sections, arrivals = run_both(root, server, bench_env(trap), files, iterations)
        show_size(files, size, warm, timed, sections, arrivals)
        show_requests(root, server, trap)
    finally:
        server.close()
        trap.shutdown()
        trap.server_close()
        shutil.rmtree(base)


def run_both(root, server, env, files, iterations):
    """The warm-up, then the timed run: (the warm-up, the timed run, its log sections, its chat requests' arrivals)."""
    queue_answers(server, files, 1, WARM_UP)
    warm = run_fallback(root, env, WARM_UP)
    before, asked_before = len(read_sections(root)), len(server.arrivals)
    queue_answers(server, files, 1 + WARM_UP, iterations)
    timed = run_fallback(root, env, iterations)
    return warm, timed, read_sections(root)[before:], server.arrivals[asked_before:]


def show_size(files, size, warm, timed, sections, arrivals):
    packages, modules, tests = layout(files)
    counted = re.search(r"codebase (\d+) → (\d+) files", timed["output"])
    print(f"\n{files:,} files ({size / 1e6:.1f} MB: seed.py, {len(packages)} package(s), {modules:,} modules, "
          f"{tests:,} test files of {tests * (TESTS_PER_FILE + 1):,} tests; the keeper counts "
          f"{counted.group(2) if counted else '?'}); warm-up: {WARM_UP} iteration(s) in {warm['wall']:.1f} s (exit "
          f"{warm['code']}); then {len(sections)} timed (exit {timed['code']})")
    for run in (warm, timed):
        if run["code"] != 0:
            print("  its output ends:\n    " + "\n    ".join(run["output"].strip().splitlines()[-8:]))
    show_rate(sections, timed)
    show_split(split_iterations(timed["runs"], arrivals, sections), tests * (TESTS_PER_FILE + 1))


def show_rate(sections, timed):
    landed = sum(outcome.startswith("landed") for outcome, _, _ in sections)
    seeds = [began for kind, began, _ in timed["runs"] if kind == "seed"]
    print(f"  iterations {len(sections)}, landed {landed}; wall {timed['wall']:.1f} s, from the start of fallback.py "
          f"to its exit: {3600 * len(sections) / timed['wall']:,.0f} iterations per hour")
    print(f"  the first seed run started {seeds[0] - timed['started']:.1f} s after fallback.py; the first iteration "
          f"took {sections[0][2]:.1f} s as the log has it, the others' median "
          f"{statistics.median(s[2] for s in sections[1:]):.1f} s")


def show_split(rows, tests):
    """The median iteration as the log has it, and the median cycle split into the seed run, the gate child and
    the keeper's own work in its process, before the gate child and after it."""
    cycle = median_of(rows, "cycle")
    print(f"  median iteration as the log has it ('; X.X s'): {median_of(rows, 'log'):.1f} s; median cycle, from a "
          f"seed run's start to the next's: {cycle:.2f} s = {3600 / cycle:,.0f} iterations per hour at steady state")
    print("  the medians of the cycle's parts (they need not add up to the median cycle):")
    print(f"    seed run (the confined child, start to end)     {median_of(rows, 'seed'):6.2f} s   "
          f"{median_of(rows, 'asked'):.2f} s of it until its request reached the fake")
    print(f"    the keeper, before the gate child               {median_of(rows, 'before gate'):6.2f} s   tidy, "
          "change summary, compile check")
    print(f"    gate child (imports, then pytest)               {median_of(rows, 'gate'):6.2f} s   over all "
          f"{tests:,} tests")
    print(f"    the keeper, after the gate child                {median_of(rows, 'after gate'):6.2f} s   land, "
          "snapshots, log, prune, report.html; the next plan, snapshot and sync")


def show_requests(root, server, trap):
    """That no request reached anything but the fake, and that the ledger and the log counted every one."""
    chats = len(server.chats())
    paths = sorted({f"{r['method']} {r['path']}" for r in server.requests} - {"POST /v1/chat/completions"})
    ledger, logged = ledger_requests(root), sum(requests for _, requests, _ in read_sections(root))
    print(f"  requests: the fake answered {chats} chat requests (warm-up included) and "
          f"{len(server.requests) - chats} others ({', '.join(paths)}); the trap (GEMINI_API_BASE, HTTP(S)_PROXY) "
          f"got {len(trap.seen)}{': ' + '; '.join(trap.seen[:3]) if trap.seen else ''}")
    verdict = "all counted" if ledger == logged == chats else "MISCOUNTED"
    print(f"  counted: the ledger (the record's requests) {ledger}, the log {logged}, the fake {chats}: {verdict}")


def installed_plugins():
    return sorted({point.dist.name if point.dist else point.name for point in entry_points(group="pytest11")})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 2000], help="files in the codebase (at least 10)")
    parser.add_argument("--iterations", type=int, default=20, help="timed iterations per size (at least 2)")
    args = parser.parse_args()
    if min(args.sizes) < 10 or args.iterations < 2:
        parser.error("each size must be 10 files or more, and --iterations 2 or more")
    print(f"python {platform.python_version()} on {platform.system()} {platform.machine()}, {os.cpu_count()} cores; "
          f"a fake Ollama serving {QWEN} with a context of {CONTEXT:,} tokens, answering at once; pytest plugins "
          f"installed, which the gate's pytest loads every iteration: {', '.join(installed_plugins()) or 'none'}")
    for files in args.sizes:
        report_size(files, args.iterations)


if __name__ == "__main__":
    main()
