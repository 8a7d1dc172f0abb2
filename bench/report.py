"""Benchmark: the time to regenerate report.html and to export the history to git, at 1,000 iterations.

    python bench/report.py                          # about ten seconds on 2 cores
    python bench/report.py --iterations 3000 --files 600 --runs 9

Builds a synthetic workspace with the tests' builder (supervisor/tests/test_report.py): a codebase of --files
modules and their tests, three of them growing each iteration, which lands, rolls back, waits or changes
nothing at random; an iteration every 43 minutes (1,000 of them span 30 days of the ledger); snapshots
pruned to genesis and the newest --keep, as the keeper keeps them. Then times write_report cold (no
backups/report-cache.json, nothing in memory), warm from disk (the cache file, a fresh process, as
`fallback.py --report`) and warm in memory (the loop, after each iteration), medians of --runs; the page's
size; and export_git to a new folder, then again with nothing new. Prints figures; asserts nothing.
"""
import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "supervisor" / "tests"))
from test_report import export, grow, history, report  # noqa: E402  (the tests' builder and their way of loading the parts)
from conftest import load_keeper  # noqa: E402

snapshots = load_keeper("snapshots")


def timed(action, before=lambda: None, runs=5):
    """The median seconds of `action` over `runs`, `before` run untimed ahead of each."""
    times = []
    for _ in range(runs):
        before()
        began = time.perf_counter()
        action()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def forget(root, cache_file):
    """Empty the caches in memory, and the cache file too if asked: the state of a fresh process."""
    history.measure_file.cache_clear()
    snapshots.listings_read = snapshots.Listings()
    if cache_file:
        (root / "backups" / "report-cache.json").unlink(missing_ok=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--files", type=int, default=300, help="modules in the codebase at the start")
    parser.add_argument("--keep", type=int, default=100, help="snapshots kept besides genesis")
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each kind (the median is shown)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="report-bench-") as folder:
        root = Path(folder) / "workspace"
        root.mkdir()
        began = time.perf_counter()
        run = grow(root, args.iterations, files=args.files, keep=args.keep, every=43)
        print(f"workspace: {args.iterations:,} iterations, {len(run.files):,} files now, {len(run.snapshots)} "
              f"snapshots kept, {len(run.ledger)} days in the ledger (built in {time.perf_counter() - began:.0f} s)")
        time_report(root, args.runs)
        time_export(root, Path(folder) / "history")


def time_report(root, runs):
    write = lambda: report.write_report(root)
    cold = timed(write, lambda: forget(root, True), runs)
    from_disk = timed(write, lambda: forget(root, False), runs)
    in_memory = timed(write, runs=runs)
    size = (root / "report.html").stat().st_size
    print(f"report.html: cold {cold * 1000:.0f} ms, warm from disk {from_disk * 1000:.0f} ms, warm in memory "
          f"{in_memory * 1000:.0f} ms (medians of {runs}); {size / 1024:.0f} KB")


def time_export(root, dest):
    began = time.perf_counter()
    summary = export.export_git(root, dest)
    first = time.perf_counter() - began
    began = time.perf_counter()
    export.export_git(root, dest)
    print(f"export: {first:.2f} s the first time, {time.perf_counter() - began:.2f} s with nothing new; {summary}")


if __name__ == "__main__":
    main()
