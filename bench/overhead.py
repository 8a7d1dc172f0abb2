"""Benchmark: the supervisor's own work per iteration, and what backups/ costs, as the codebase grows.

    python bench/overhead.py                 # 10, 200 and 2,000 files (the largest about 20 MB); about 6 minutes
    python bench/overhead.py --sizes 2000 --iterations 20

For each size, 50 iterations that each change 3 files, timed phase by phase with fallback.py's own
functions (snapshot with change detection, change summary, compile check, log, and now and then a
rollback's restore). Beside it, two baselines doing the same job, each on its own copy of the workspace:
a snapshot before each run and the change summary after it, by full copies (copy every file; compare every
file with the copy) and by git (`git add -A && git commit`; `git add -A && git diff --cached --numstat`;
restore by checkout). Ours and git take turns within each iteration, so that a machine slowing down
or speeding up weighs on both alike; the full copies run after them, as their writing would slow the
others. The first snapshot (every file stored) is timed apart, for ours and git alike. The gate's
subprocesses (import check, pytest) are timed once each, as their own rows, and so are two rounds of
pruning at the default retention. Then the disk backups/ uses, and the time to restore the first
snapshot. Prints figures; asserts nothing.
"""
import argparse
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
    """What a seed run does here: rewrite three files."""
    for n in (iteration * 7 % files, (iteration * 13 + 1) % files, (iteration * 31 + 2) % files):
        (root / f"pkg{n % 20}" / f"mod{n}.py").write_text(code(n, iteration + 1))


class Ours:
    """fallback.py's own functions, phase by phase."""
    def __init__(self, root):
        self.root, self.fb = root, load_supervisor(root)
        self.index = self.fb.load_index()
        self.rows = {k: [] for k in ("snapshot", "change summary", "compile check", "log", "rollback restore")}
        _, self.genesis_ms = timed(self.fb.snapshot, self.index, "genesis", 0)  # every file stored, once

    def before(self, i):
        self.start, ms = timed(self.fb.snapshot, self.index, "before", i)
        self.rows["snapshot"].append(ms)

    def after(self, i):
        changes, ms = timed(self.fb.changes_since, self.start)
        self.rows["change summary"].append(ms)
        _, ms = timed(lambda: [self.fb.compile_error(rel) for rel, *_ in changes if rel.endswith(".py")])
        self.rows["compile check"].append(ms)
        result = {"outcome": f"landed: {len(changes)} file(s) changed", "changes": changes, "record": None}
        _, ms = timed(self.fb.log_iteration, i, result, 1.0)
        self.rows["log"].append(ms)
        if i % 10 == 9:  # now and then a rollback, back to the run's start
            _, ms = timed(self.fb.restore, self.start)
            self.rows["rollback restore"].append(ms)

    def restore_first(self):
        return timed(self.fb.restore, self.index["snapshots"][0])[1]

    def prune_rounds(self, files):
        """Two rounds of pruning at the default retention, each after the snapshots that bring it on
        (untimed): the first reads every listing, the later ones only those it has not read yet."""
        times, taken = [], 1000  # numbers past the timed iterations', so each change is a new one
        for _ in range(2):
            while len(self.index["snapshots"]) <= self.fb.KEEP_LAST + 1 + self.fb.KEEP_LAST // 10:
                taken += 1
                change_three(self.root, files, taken)
                self.fb.snapshot(self.index, "before", taken)
            times.append(timed(self.fb.prune, self.index)[1])
        return times

    def gate_ms(self):
        return {"import check (subprocess)": run_ms(self.root, [sys.executable, "-c", self.fb.IMPORT_CHECK, "app", "seed"]),
                "pytest, one test (subprocess)": run_ms(self.root, [sys.executable, "-m", "pytest", "-q", "-p",
                                                                    "no:cacheprovider", "tests/test_app.py"])}


class FullCopy:
    """A full copy before each run; the change summary by comparing every file with that copy."""
    def __init__(self, root):
        self.root, self.store = root, root.parent / "copies"
        self.line_changes = load_supervisor(root).line_changes
        self.rows = {"snapshot": [], "change summary": []}

    def before(self, i):
        self.copy = self.store / f"{i:04d}"
        _, ms = timed(shutil.copytree, self.root, self.copy, False, shutil.ignore_patterns("backups", "__pycache__"))
        self.rows["snapshot"].append(ms)

    def after(self, i):
        _, ms = timed(self.compare)
        self.rows["change summary"].append(ms)

    def compare(self):
        """(path, added, removed) of every code file that differs from the copy."""
        found = []
        for path in sorted(self.root.rglob("*.py")):
            old, new = (self.copy / path.relative_to(self.root)).read_bytes(), path.read_bytes()
            if old != new:
                found.append((path.relative_to(self.root).as_posix(), *self.line_changes(old.decode(), new.decode())))
        return found

    def restore_first(self):
        started = time.perf_counter()
        for path in self.root.glob("pkg*"):
            shutil.rmtree(path)
        shutil.copytree(self.store / "0000", self.root, dirs_exist_ok=True)
        return (time.perf_counter() - started) * 1000


class Git:
    """What other self-modifying tools do: a commit before each run, git's own diff after it."""
    def __init__(self, root):
        self.root, self.rows = root, {"snapshot": [], "change summary": []}
        self.git("init", "-q")
        self.git("config", "user.email", "bench@example.invalid")
        self.git("config", "user.name", "bench")
        _, self.genesis_ms = timed(lambda: (self.git("add", "-A"), self.git("commit", "-q", "-m", "genesis")))

    def git(self, *args):
        return subprocess.run(["git", *args], cwd=self.root, capture_output=True, check=True)

    def before(self, i):
        _, ms = timed(lambda: (self.git("add", "-A"), self.git("commit", "-q", "--allow-empty", "-m", f"run {i}")))
        self.rows["snapshot"].append(ms)

    def after(self, i):
        _, ms = timed(lambda: (self.git("add", "-A"), self.git("diff", "--cached", "--numstat")))
        self.rows["change summary"].append(ms)

    def restore_first(self):
        first = self.git("rev-list", "--max-parents=0", "HEAD").stdout.decode().strip()
        return timed(self.git, "checkout", "-q", first, "--", ".")[1]


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
    for name in ("ours", "copies", "git"):
        make_workspace(base / name / "workspace", files)
    size = sum(p.stat().st_size for p in (base / "ours" / "workspace").rglob("*.py"))
    changed = 3 * FILE_BYTES * iterations
    ours = Ours(base / "ours" / "workspace")
    baselines = {"full copy": FullCopy(base / "copies" / "workspace"), "git": Git(base / "git" / "workspace")}
    for group in ([ours, baselines["git"]], [baselines["full copy"]]):  # the copies' writing would slow the others
        time.sleep(1.1)  # as between real iterations: files older than a second are trusted by their stat
        for i in range(iterations):
            turns = group if i % 2 == 0 else group[::-1]
            for one in turns:
                one.before(i)
            time.sleep(1.0)  # a seed run takes a second at the least, so the files it writes are not the
            for one in turns:  # ones just hashed within the same second (which none of the three would trust)
                change_three(one.root, files, i)
                one.after(i)
    disks = {"ours": ours.fb.disk_use(ours.fb.BACKUPS), "full copy": disk_use(baselines["full copy"].store),
             "git": disk_use(baselines["git"].root / ".git")}
    restores = {name: one.restore_first() for name, one in (("ours", ours), *baselines.items())}
    gate, prunes = ours.gate_ms(), ours.prune_rounds(files)
    rows = ours.rows
    total = [sum(parts) for parts in zip(*(rows[k] for k in ("snapshot", "change summary", "compile check", "log")))]
    print(f"\n{files:,} files, {size / 1e6:.1f} MB of code; {iterations} iterations changing 3 files each "
          f"({changed / 1e6:.1f} MB changed in all)")
    print(f"  {'per iteration, in process':<40}{'median':>9}{'mean':>9}{'max ms':>9}")
    line = lambda name, values, note="": print(f"  {name:<40}{median(values):>9.1f}{mean(values):>9.1f}"
                                              f"{max(values, default=float('nan')):>9.1f}{note}")
    for name, values in rows.items():
        line(name, values)
    line("total (snapshot to log)", total)
    print(f"  {'prune, at BACKUPS_KEEP=100':<40}{prunes[1]:>9.1f}{'':>18}   (once in 10 iterations; the first "
          f"round after a start {prunes[0]:.1f})")
    print(f"  {'first snapshot (genesis)':<40}{ours.genesis_ms:>9.1f}{'':>18}   (once in a workspace's life; "
          f"git's first commit {baselines['git'].genesis_ms:.1f})")
    print("  the baselines doing the same job: a snapshot before the run, the change summary after it")
    for name, one in baselines.items():
        both = [a + b for a, b in zip(one.rows["snapshot"], one.rows["change summary"])]
        line(f"{name}: snapshot", one.rows["snapshot"],
             f"   ours {median(one.rows['snapshot']) / median(rows['snapshot']):.1f}x faster")
        line(f"{name}: change summary", one.rows["change summary"])
        line(f"{name}: both", both, f"   ours (total) {median(both) / median(total):.1f}x faster (medians), "
                                    f"{mean(both) / mean(total):.1f}x (means)")
    for name, ms in gate.items():
        print(f"  {name:<40}{ms:>9.1f}{'':>18}   (only when a .py file changed)")
    share = median(total) / (median(total) + sum(gate.values()))
    print(f"  in process: {share:.0%} of the supervisor's time in an iteration whose gate runs; the rest is "
          "the gate's two subprocesses, mostly their start-up")
    print(f"  backups after {iterations} iterations: ours {disks['ours'] / 1e6:.1f} MB "
          f"({disks['ours'] / (size + changed):.2f}x workspace + changes; target under 1.3x = "
          f"{(1.3 * size + changed) / 1e6:.1f} MB), full copies {disks['full copy'] / 1e6:.1f} MB, "
          f"git {disks['git'] / 1e6:.1f} MB")
    print(f"  restore of the first snapshot: ours {restores['ours']:.0f} ms, full copy {restores['full copy']:.0f} ms, "
          f"git checkout {restores['git']:.0f} ms")
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
