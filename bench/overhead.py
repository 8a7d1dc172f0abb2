"""Benchmark: the supervisor's own work per iteration, and what backups/ costs, as the codebase grows.

    python bench/overhead.py                 # 10, 200 and 2,000 files (the largest about 20 MB); about 9 minutes
    python bench/overhead.py --sizes 2000 --iterations 20

For each size, 50 iterations that each change 3 files (a second apart, untimed), timed phase by phase with fallback.py's
own functions (snapshot with change detection, change summary, compile check, log, and a rollback's
restore), beside two baselines timed the same way: a full copy per snapshot (every file hashed and
copied), and git (`git add -A && git commit`; restore by checkout). The gate's subprocesses (import
check, pytest) are timed once each, as their own rows. Then the disk backups/ uses, and the time to
restore the first snapshot. Prints figures; asserts nothing.
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


def change_three(root, files, iteration):
    """What a seed run does here: rewrite three files, after the second a real run takes at the least
    (so, as in real use, files are not all changed within the last second, which none of the three
    approaches trusts a timestamp for). The pause is not timed."""
    time.sleep(1.0)
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
    _, restore_ms = timed(fb.restore, index["snapshots"][0])
    gate = {"import check (subprocess)": run_ms(root, [sys.executable, "-c", fb.IMPORT_CHECK, "app", "seed"]),
            "pytest, one test (subprocess)": run_ms(root, [sys.executable, "-m", "pytest", "-q", "-p",
                                                           "no:cacheprovider", "tests/test_app.py"])}
    return rows, gate, fb.disk_use(fb.BACKUPS), restore_ms, genesis_ms


def naive(root, files, iterations):
    """Every file hashed to see what changed, and every file copied into a new folder."""
    store, times = root.parent / "naive-backups", []
    time.sleep(1.1)
    for i in range(iterations):
        started = time.perf_counter()
        for path in sorted(root.glob("pkg*/*.py")):
            hashlib.sha256(path.read_bytes()).hexdigest()
        shutil.copytree(root, store / f"{i:04d}", ignore=shutil.ignore_patterns("backups", "__pycache__"))
        times.append((time.perf_counter() - started) * 1000)
        change_three(root, files, i)
    started = time.perf_counter()
    for path in root.glob("pkg*"):
        shutil.rmtree(path)
    shutil.copytree(store / "0000", root, dirs_exist_ok=True)
    return times, disk_use(store), (time.perf_counter() - started) * 1000


def git(root, files, iterations):
    """What other self-modifying tools do: a commit per snapshot, a checkout to restore."""
    run = lambda *args: subprocess.run(["git", *args], cwd=root, capture_output=True, check=True)
    run("init", "-q")
    run("config", "user.email", "bench@example.invalid")
    run("config", "user.name", "bench")
    times = []
    for i in range(iterations):
        started = time.perf_counter()
        run("add", "-A")
        run("commit", "-q", "--allow-empty", "-m", f"iteration {i}")
        times.append((time.perf_counter() - started) * 1000)
        change_three(root, files, i)
    first = run("rev-list", "--max-parents=0", "HEAD").stdout.decode().strip()
    started = time.perf_counter()
    run("checkout", "-q", first, "--", ".")
    return times, disk_use(root / ".git"), (time.perf_counter() - started) * 1000


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
    rows, gate, our_disk, our_restore, genesis_ms = ours(base / "ours" / "workspace", files, iterations)
    naive_times, naive_disk, naive_restore = naive(base / "naive" / "workspace", files, iterations)
    git_times, git_disk, git_restore = git(base / "git" / "workspace", files, iterations)
    total = [sum(parts) for parts in zip(*(rows[k] for k in ("snapshot", "change summary", "compile check", "log")))]
    print(f"\n{files:,} files, {size / 1e6:.1f} MB of code; {iterations} iterations changing 3 files each "
          f"({changed / 1e6:.1f} MB changed in all)")
    print(f"  {'per iteration, in process':<34}{'median':>9}{'mean':>9}{'max ms':>9}")
    for name, values in rows.items():
        print(f"  {name:<34}{median(values):>9.1f}{mean(values):>9.1f}{max(values, default=float('nan')):>9.1f}")
    print(f"  {'total (snapshot to log)':<34}{median(total):>9.1f}{mean(total):>9.1f}{max(total):>9.1f}")
    print(f"  {'first snapshot (genesis), once':<34}{genesis_ms:>9.1f}{'':>18}   (every file stored, once in a "
          "workspace's life)")
    for name, times in (("baseline: full copy", naive_times), ("baseline: git add -A && commit", git_times)):
        print(f"  {name:<34}{median(times):>9.1f}{mean(times):>9.1f}{max(times):>9.1f}   ours is "
              f"{median(times) / median(total):.1f}x faster (medians), {mean(times) / mean(total):.1f}x (means)")
    for name, ms in gate.items():
        print(f"  {name:<34}{ms:>9.1f}{'':>18}   (only when a .py file changed)")
    bound = 1.3 * size + changed
    print(f"  backups after {iterations} iterations: ours {our_disk / 1e6:.1f} MB "
          f"({our_disk / (size + changed):.2f}x workspace + changes; target under 1.3x = {bound / 1e6:.1f} MB), "
          f"full copies {naive_disk / 1e6:.1f} MB, git {git_disk / 1e6:.1f} MB")
    print(f"  restore of the first snapshot: ours {our_restore:.0f} ms, full copy {naive_restore:.0f} ms, "
          f"git checkout {git_restore:.0f} ms")
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
