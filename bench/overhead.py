"""Benchmark: the supervisor's own work per iteration, and what backups/ costs, as the codebase grows.

    python bench/overhead.py                 # 10, 200 and 2,000 files (the largest about 20 MB); about 9 minutes
    python bench/overhead.py --sizes 2000 --iterations 20

For each size, 50 iterations that each change 3 files (a second apart, untimed), timed phase by phase with
fallback.py's own functions (snapshot with change detection, change summary, compile check, log, and now
and then a rollback's restore). Beside it, two baselines doing the same job in the same run: a snapshot
before each run and the change summary after it, by full copies (copy every file; compare every file with
the copy) and by git (`git add -A && git commit`; `git add -A && git diff --cached --numstat`; restore by
checkout). The gate's subprocesses (import check, pytest) are timed once each, as their own rows, and so
is one round of pruning at the default retention. Then the disk backups/ uses, and the time to restore
the first snapshot. Prints figures; asserts nothing.
"""
import argparse
import hashlib
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FILE_BYTES = 10_000  # each file of the made-up codebase; 2,000 of them make about 20 MB


def make_workspace(root, files):
    """A codebase of `files` Python files in a few packages, two top-level modules and one test."""
    for n in range(files):
        path = root / f"pkg{n % 20}" / f"mod{n}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code(n, 0))
    (root / "app.py").write_text("def main():\n    return 1\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_app.py").write_text("from app import main\n\n\ndef test_main():\n    assert main() == 1\n")
    for name in ("fallback.py", "seed.py", "goal.md", "pending_tasks.md", "iteration_log.md"):
        shutil.copy2(REPO / name, root / name)
    (root / "backups").mkdir()


def code(n, version):
    line = f"VALUE_{n}_{version} = {n} * {version}  # padding to make the file about ten kilobytes long\n"
    return line * (FILE_BYTES // len(line))


def load_supervisor(root):
    spec = importlib.util.spec_from_file_location(f"fallback_{root.name}", root / "fallback.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timed(function, *args):
    started = time.perf_counter()
    value = function(*args)
    return value, (time.perf_counter() - started) * 1000


def change_three(root, files, iteration, pause=1.0):
    """What a seed run does here: rewrite three files, after the second a real run takes at the least
    (so, as in real use, files are not all changed within the last second, which none of the three
    approaches trusts a timestamp for). The pause is not timed."""
    time.sleep(pause)
    for n in (iteration * 7 % files, (iteration * 13 + 1) % files, (iteration * 31 + 2) % files):
        (root / f"pkg{n % 20}" / f"mod{n}.py").write_text(code(n, iteration + 1))


def ours(root, files, iterations):
    fb = load_supervisor(root)
    index, rows = fb.load_index(), {k: [] for k in ("snapshot", "change summary", "compile check", "log",
                                                     "rollback restore")}
    _, genesis_ms = timed(fb.snapshot, index, "genesis", 0)  # once in a workspace's life: every file stored
    time.sleep(1.1)  # as between real iterations: files older than a second are trusted by their stat
    for i in range(iterations):
        start, ms = timed(fb.snapshot, index, "before", i)
        rows["snapshot"].append(ms)
        change_three(root, files, i)
        changes, ms = timed(fb.changes_since, start)
        rows["change summary"].append(ms)
        _, ms = timed(lambda: [fb.compile_error(rel) for rel, *_ in changes if rel.endswith(".py")])
        rows["compile check"].append(ms)
        result = {"outcome": f"landed: {len(changes)} file(s) changed", "changes": changes, "record": None}
        _, ms = timed(fb.log_iteration, i, result, 1.0)
        rows["log"].append(ms)
        if i % 10 == 9:  # now and then a rollback, back to the run's start
            _, ms = timed(fb.restore, start)
            rows["rollback restore"].append(ms)
    disk = fb.disk_use(fb.BACKUPS)
    _, restore_ms = timed(fb.restore, index["snapshots"][0])
    gate = {"import check (subprocess)": run_ms(root, [sys.executable, "-c", fb.IMPORT_CHECK, "app", "seed"]),
            "pytest, one test (subprocess)": run_ms(root, [sys.executable, "-m", "pytest", "-q", "-p",
                                                           "no:cacheprovider", "tests/test_app.py"])}
    while len(index["snapshots"]) <= fb.KEEP_LAST + 1 + fb.KEEP_LAST // 10:  # up to the next round of pruning
        change_three(root, files, len(index["snapshots"]), pause=0)
        fb.snapshot(index, "before", len(index["snapshots"]))
    _, prune_ms = timed(fb.prune, index)
    return rows, gate, disk, restore_ms, genesis_ms, prune_ms


def naive(root, files, iterations):
    """A full copy before each run; the change summary by comparing every file with that copy."""
    fb, store, rows = load_supervisor(root), root.parent / "naive-backups", {"snapshot": [], "change summary": []}
    for i in range(iterations):
        copy = store / f"{i:04d}"
        _, ms = timed(lambda: shutil.copytree(root, copy, ignore=shutil.ignore_patterns("backups", "__pycache__")))
        rows["snapshot"].append(ms)
        change_three(root, files, i)
        _, ms = timed(compare_with_copy, fb, root, copy)
        rows["change summary"].append(ms)
    started = time.perf_counter()
    for path in root.glob("pkg*"):
        shutil.rmtree(path)
    shutil.copytree(store / "0000", root, dirs_exist_ok=True)
    return rows, disk_use(store), (time.perf_counter() - started) * 1000


def compare_with_copy(fb, root, copy):
    """(path, added, removed) of every code file that differs from the copy."""
    found = []
    for path in sorted(root.rglob("*.py")):
        old, new = (copy / path.relative_to(root)).read_bytes(), path.read_bytes()
        if old != new:
            found.append((path.relative_to(root).as_posix(), *fb.line_changes(old.decode(), new.decode())))
    return found


def git(root, files, iterations):
    """What other self-modifying tools do: a commit before each run, git's own diff after it."""
    run = lambda *args: subprocess.run(["git", *args], cwd=root, capture_output=True, check=True)
    run("init", "-q")
    run("config", "user.email", "bench@example.invalid")
    run("config", "user.name", "bench")
    rows = {"snapshot": [], "change summary": []}
    for i in range(iterations):
        _, ms = timed(lambda: (run("add", "-A"), run("commit", "-q", "--allow-empty", "-m", f"iteration {i}")))
        rows["snapshot"].append(ms)
        change_three(root, files, i)
        _, ms = timed(lambda: (run("add", "-A"), run("diff", "--cached", "--numstat")))
        rows["change summary"].append(ms)
    first = run("rev-list", "--max-parents=0", "HEAD").stdout.decode().strip()
    started = time.perf_counter()
    run("checkout", "-q", first, "--", ".")
    return rows, disk_use(root / ".git"), (time.perf_counter() - started) * 1000


def run_ms(root, command):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEMINI_")}
    started = time.perf_counter()
    subprocess.run(command, cwd=root, capture_output=True, env=env)
    return (time.perf_counter() - started) * 1000


def disk_use(folder):
    sizes = {}
    for path in folder.rglob("*"):
        if path.is_file():
            stat = path.stat()
            sizes[stat.st_dev, stat.st_ino] = stat.st_size
    return sum(sizes.values())


def mean(values):
    return sum(values) / len(values) if values else float("nan")


def median(values):
    return sorted(values)[len(values) // 2] if values else float("nan")


def report(files, iterations):
    base = Path(tempfile.mkdtemp(prefix=f"seed-overhead-{files}-"))
    for name in ("ours", "naive", "git"):
        make_workspace(base / name / "workspace", files)
    size = sum(p.stat().st_size for p in (base / "ours" / "workspace").rglob("*.py"))
    changed = 3 * FILE_BYTES * iterations
    rows, gate, our_disk, our_restore, genesis_ms, prune_ms = ours(base / "ours" / "workspace", files, iterations)
    baselines = {"full copy": naive(base / "naive" / "workspace", files, iterations),
                 "git": git(base / "git" / "workspace", files, iterations)}
    total = [sum(parts) for parts in zip(*(rows[k] for k in ("snapshot", "change summary", "compile check", "log")))]
    print(f"\n{files:,} files, {size / 1e6:.1f} MB of code; {iterations} iterations changing 3 files each "
          f"({changed / 1e6:.1f} MB changed in all)")
    print(f"  {'per iteration, in process':<40}{'median':>9}{'mean':>9}{'max ms':>9}")
    line = lambda name, values, note="": print(f"  {name:<40}{median(values):>9.1f}{mean(values):>9.1f}"
                                              f"{max(values, default=float('nan')):>9.1f}{note}")
    for name, values in rows.items():
        line(name, values)
    line("total (snapshot to log)", total)
    print(f"  {'prune, at BACKUPS_KEEP=100':<40}{prune_ms:>9.1f}{'':>18}   (once in 10 iterations)")
    print(f"  {'first snapshot (genesis)':<40}{genesis_ms:>9.1f}{'':>18}   (once in a workspace's life)")
    print("  the baselines doing the same job: a snapshot before the run, the change summary after it")
    for name, (times, _, _) in baselines.items():
        both = [a + b for a, b in zip(times["snapshot"], times["change summary"])]
        line(f"{name}: snapshot", times["snapshot"], f"   ours {median(times['snapshot']) / median(rows['snapshot']):.1f}x faster")
        line(f"{name}: change summary", times["change summary"])
        line(f"{name}: both", both, f"   ours (total) {median(both) / median(total):.1f}x faster (medians), "
                                    f"{mean(both) / mean(total):.1f}x (means)")
    for name, ms in gate.items():
        print(f"  {name:<40}{ms:>9.1f}{'':>18}   (only when a .py file changed)")
    share = median(total) / (median(total) + sum(gate.values()))
    print(f"  in process: {share:.0%} of the supervisor's time in an iteration whose gate runs; the rest is "
          "the gate's two subprocesses, mostly their start-up")
    bound = 1.3 * size + changed
    print(f"  backups after {iterations} iterations: ours {our_disk / 1e6:.1f} MB "
          f"({our_disk / (size + changed):.2f}x workspace + changes; target under 1.3x = {bound / 1e6:.1f} MB), "
          f"full copies {baselines['full copy'][1] / 1e6:.1f} MB, git {baselines['git'][1] / 1e6:.1f} MB")
    print(f"  restore of the first snapshot: ours {our_restore:.0f} ms, full copy {baselines['full copy'][2]:.0f} ms, "
          f"git checkout {baselines['git'][2]:.0f} ms")
    shutil.rmtree(base)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 200, 2000])
    parser.add_argument("--iterations", type=int, default=50)
    args = parser.parse_args()
    print(f"python {platform.python_version()} on {platform.system()} {platform.machine()}, {os.cpu_count()} cores")
    for files in args.sizes:
        report(files, args.iterations)


if __name__ == "__main__":
    main()
