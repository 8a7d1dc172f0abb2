"""Benchmark: does a year of running cost what a day does? The keeper on an aged workspace beside a fresh one.

    python bench/aged.py                 # 2,000 files; a year of snapshots (8 landings a day), 100,000 log sections
    python bench/aged.py --check         # exit 1 when a target below is missed
    python bench/aged.py --sections 10000 --gate-tests 20 1000   # a quicker one

Both workspaces hold the same 2,000-file codebase (bench/overhead.py's) and the keeper's own parts. The aged one
is made quickly, in the keeper's own formats: a year of landed snapshots (three files changed each, eight a day)
pruned by the retention policy as the loop would have, a year of the gateway's ledger, and a record of 100,000
iterations (brought in from a log of as many sections) with 150,000 requests (the newest 5,000 iterations'
with their bytes). On each, in a child process of its own (for its peak memory): ten iterations of the keeper's
own work as fallback.py's run_iteration does it (bench/overhead.py's phases, a request and its bytes recorded
with each), then the journal's prune and the page as the loop does them after each iteration, `--status` as a
person runs it, and the size of backups/ and of the page. Then the cascade gate: a three-file change to codebases
of 20, 1,000 and 4,482 tests, the gate's median over the tests that change can affect against the whole suite
(in two processes at once where it has SEED_PARALLEL_FROM test files, and in one). `--gate-only`: that part alone.

Targets (--check): on the aged workspace the keeper's own work per iteration and --status within 2x the fresh
one's, the peak memory under 100 MB, backups/ within the retention policy's cap, the page under 2 MB; the
cascade's median at 4,482 tests at most a third of the whole suite's.
"""
import argparse
import importlib
import json
import multiprocessing
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import overhead  # noqa: E402  (the made-up codebase and the keeper's phases, reused)

REPO = BENCH.parent
FILES, DAYS, PER_DAY, ITERATIONS, RUNS = 2_000, 365, 8, 10, 3
TESTS_PER_FILE = 10
BYTES = 5_000  # the newest iterations whose requests the aged record holds with their bytes


def age(root, sections):
    """Make root a year old: landed snapshots over 365 days, pruned as the loop would, a ledger, a long log."""
    k = overhead.load_keeper(root)
    snaps, index = k.snapshots, k.snapshots.load_index()
    files = snaps.manifest(root)
    snaps.snapshot(index, "genesis", 0)
    began = datetime.utcnow() - timedelta(days=DAYS)
    for number in range(1, DAYS * PER_DAY + 1):
        for n in (number * 7 % FILES, (number * 13 + 1) % FILES, (number * 31 + 2) % FILES):
            files[f"pkg{n % 20}/mod{n}.py"] = snaps.store_object(overhead.code(n, number).encode())
        taken = began + timedelta(hours=24 / PER_DAY * number)
        entry = snaps.snapshot(index, "landed", number, root, files)
        entry.update(time=f"{taken:%Y-%m-%d %H:%M:%S} UTC", good=True)
        if number % 200 == 0:  # the loop prunes as it goes, a tenth more or a new day at a time
            snaps.prune(index, taken)
    snaps.prune(index, datetime.utcnow())
    index["iteration"] = DAYS * PER_DAY
    snaps.save_index(index)
    snaps.restore(index["snapshots"][-1])
    ledger = {f"{began + timedelta(days=d):%Y-%m-%d}": {model: {"requests": 20, "prompt": 600_000, "output": 9_000,
                                                                "thinking": 3_000, "kinds": {"answer": 20}, "wasted": {}}
                                                        for model in ("gemini-3.5-flash", "gemini-3.5-flash-lite")}
              for d in range(DAYS)}
    (root / "backups" / "usage.json").write_text(json.dumps(ledger))
    with open(root / "iteration_log.md", "w") as log:
        log.write("# Iteration log\n")
        for number in range(1, sections + 1):
            log.write(f"\n## Iteration {number} — 2026-01-01 00:00:00 UTC — landed: 3 file(s) changed\n\n- Tasks:\n"
                      f"  1. Add feature {number}\n- Files: pkg1/mod1.py +3 −3, pkg2/mod2.py +1 −1\n- Model: "
                      f"gemini-3.5-flash, 1 request(s), tokens 31,000 prompt + 900 output + 400 thinking; 4.1 s\n")
    record = importlib.import_module(f"{k.settings.__name__.rsplit('.', 1)[0]}.store.record")
    book = record.writer(root)  # the keeper's record, made from that log as a first start would make it
    with record.Transaction(book.db):  # and a year of requests, three for two iterations (the newest with their
        for number in range(1, sections + 1):  # bytes: storing a year of them would take minutes here)
            day = f"{began + timedelta(days=number * DAYS // sections):%Y-%m-%d}"
            call = overhead.call(number)
            for _ in range(1 + number % 2):
                book.insert_request(number, {**call, "day": day} if number > sections - BYTES else
                                    {key: call[key] for key in ("model", "kind", "latency", "tokens")} | {"day": day},
                                    None)
    book.db.close()


def measure(root):
    """In a child of its own: the keeper's work per iteration, prune and the page after it, peak memory."""
    ours = overhead.Ours(root)
    prune, page = [], []
    report = __import__(f"{ours.k.settings.__name__.rsplit('.', 1)[0]}.views.report", fromlist=["write_report"])
    for i in range(ITERATIONS):
        ours.before(i)
        time.sleep(1.0)  # as overhead.py: the files a run writes are not those just hashed within the same second
        overhead.change_three(ours.runs_in, FILES, i)
        ours.after(i)
        ours.index.pop("pruned", None)  # as on a new day: the amortised prune does its whole work
        prune.append(overhead.timed(ours.k.snapshots.prune, ours.index)[1])
        page.append(overhead.timed(report.write_report, root)[1])
    whole = [it + p for it, p in zip(ours.total(landed=True), page)]  # fallback.py writes the page every iteration
    return {"iteration": statistics.median(ours.total(landed=True)), "with page": statistics.median(whole),
            "prune": statistics.median(prune), "page": statistics.median(page),
            "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def status_ms(root):
    times = []
    for _ in range(RUNS):
        began = time.perf_counter()
        subprocess.run([sys.executable, "fallback.py", "--status"], cwd=root, capture_output=True, check=True)
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


def gate_figures(base, tests):
    """(the cascade's median ms, the whole suite's in two parts where it has SEED_PARALLEL_FROM test files, the
    whole suite's in one process, as the cadence runs it) for a three-file change to a codebase of `tests` tests."""
    root = base / f"gate-{tests}" / "workspace"
    overhead.make_workspace(root, FILES, keeper=True)
    for j in range(-(-tests // TESTS_PER_FILE)):
        body = "".join(f"\n\ndef test_{t}():\n    assert mod{j}.VALUE_{j}_0 == {j} * 0\n"
                       for t in range(min(TESTS_PER_FILE, tests - j * TESTS_PER_FILE)))
        (root / "tests" / f"test_m{j}.py").write_text(f"from pkg{j % 20} import mod{j}\n{body}")
    (root / "tests" / "test_app.py").unlink()
    k = overhead.load_keeper(root)
    files = k.snapshots.manifest(root)
    for sha, rel in ((k.snapshots.store_object((root / rel).read_bytes()), rel) for rel in files):
        files[rel] = sha
    first = k.gate.gate([(rel, "new", 1, 0) for rel in files], files)
    before = first.passing
    cascade, whole, one = [], [], []
    for i in range(RUNS):
        changed = dict(files)
        tested = -(-tests // TESTS_PER_FILE)  # modules with a test file of their own
        picks = [(i * 7 + 3) % tested, (i * 13 + 5) % tested, (i * 31 + 1) % tested]
        for n in picks:  # the same values, another text: every test still passes
            changed[f"pkg{n % 20}/mod{n}.py"] = k.snapshots.store_object(overhead.code(n, 0).encode() + b"# again\n")
        changes = [(f"pkg{n % 20}/mod{n}.py", "changed", 1, 0) for n in picks]
        cascade.append(overhead.timed(k.gate.gate, changes, changed, before, False)[1])
        one.append(overhead.timed(k.gate.gate, changes, changed, before, True)[1])  # the cadence's: one process
        whole.append(overhead.timed(k.gate.gate, changes, changed, None, True)[1])  # counts unknown: in parts
    return statistics.median(cascade), statistics.median(whole), statistics.median(one)


def workspace_figures(figures):
    """Print the fresh and aged workspaces' figures side by side; the targets they meet or miss."""
    print(f"  {'':<40}{'fresh':>10}{'aged':>10}")
    for key, label in (("iteration", "keeper's own work per iteration, ms"),
                       ("with page", "  and the page it writes after it, ms"), ("prune", "prune when it runs, ms"),
                       ("page", "the page, ms"), ("page_mb", "the page, MB"), ("status", "--status, ms"),
                       ("rss", "peak memory, MB"), ("backups", "backups/, MB"), ("snapshots", "snapshots kept")):
        print(f"  {label:<40}{figures['fresh'][key]:>10.1f}{figures['aged'][key]:>10.1f}")
    aged, fresh = figures["aged"], figures["fresh"]
    return [("work per iteration within 2x", aged["iteration"] <= 2 * fresh["iteration"]),
            ("work per iteration with the page within 2x", aged["with page"] <= 2 * fresh["with page"]),
            ("--status within 2x", aged["status"] <= 2 * fresh["status"]),
            ("peak memory under 100 MB", aged["rss"] < 100), ("the page under 2 MB", aged["page_mb"] < 2),
            ("backups/ within the cap (2,048 MB)", aged["backups"] < 2048)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", type=int, default=100_000)
    parser.add_argument("--gate-tests", type=int, nargs="*", default=[20, 1_000, 4_482])
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--gate-only", action="store_true", help="only the gate's figures")
    args = parser.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="seed-aged-"))
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; {FILES:,} files, a year of {PER_DAY} landings a "
          f"day, {args.sections:,} log sections")
    figures, missed, targets = {}, [], []
    for name in () if args.gate_only else ("fresh", "aged"):
        root = base / name / "workspace"
        overhead.make_workspace(root, FILES, keeper=True)
        began = time.perf_counter()
        if name == "aged":
            with multiprocessing.get_context("fork").Pool(1) as pool:
                pool.apply(age, (root, args.sections))
            print(f"  made the aged workspace in {time.perf_counter() - began:.0f} s")
        with multiprocessing.get_context("fork").Pool(1) as pool:
            figures[name] = pool.apply(measure, (root,))
        figures[name].update(status=status_ms(root), backups=overhead.disk_use(root / "backups") / 1e6,
                             page_mb=(root / "report.html").stat().st_size / 1e6,
                             snapshots=len(json.loads((root / "backups" / "index.json").read_text())["snapshots"]))
    if figures:
        targets = workspace_figures(figures)
    for tests in args.gate_tests:
        cascade, parts, one = gate_figures(base, tests)
        print(f"  gate, a three-file change at {tests:>5,} tests: cascade {cascade:6.0f} ms, whole suite {one:6.0f} ms"
              f" ({cascade / one:.2f}x); the whole suite in two parts {parts:6.0f} ms")
        if tests == 4_482:
            targets.append(("the cascade at 4,482 tests at most a third of the whole", cascade <= one / 3))
    for what, met in targets:
        print(f"  target: {what}: {'met' if met else 'MISSED'}")
        missed += [] if met else [what]
    shutil.rmtree(base)
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
