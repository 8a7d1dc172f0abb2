"""Benchmark: the supervisor's own work per iteration, and what backups/ costs, as the codebase grows.

    python bench/overhead.py                 # 10, 200 and 2,000 files (the largest about 20 MB); about 7 minutes
    python bench/overhead.py --sizes 2000 --iterations 20

For each size, 50 iterations that each change 3 files, timed phase by phase with the keeper's own parts
(supervisor/, copied into each made-up workspace and loaded by its path under a name of its own), in the
order fallback.py's run_iteration calls them: the snapshot with change detection, the working copy's sync
(catching up with the folder after the last landing), the capture of what the run changed, the
compile check and whether the seed's contract must run (seed.py's imports, followed), the gate's reading of
the model's tests from their source (the conftest.py allow-list before they run, the ratchet's count and the
made-up ids after), then the landing (a
snapshot for a person's edits, the crash-safe copy into the folder, the landed snapshot) and the log. One
iteration in ten is rolled back instead (keep the failed state, restore, sync). Beside it, two baselines
doing the same job, each on its own copy of the workspace: a snapshot before each run and the change summary
after it, by full copies (copy every file; compare every file with the copy) and by git (`git add -A && git
commit`; `git add -A && git diff --cached --numstat`; restore by checkout). Git also runs the seed in a
working copy of its own, a worktree: synced by `git reset --hard` and `git clean`, a change landed by a
commit there and `git merge --ff-only` in the folder. Ours and git take turns within each iteration, so that
a machine slowing down or speeding up weighs on both alike; the full copies run after them, as their writing
would slow the others. The first snapshot (every file stored) and the first sync (the working copy made) are
timed apart. Then, as their own rows: the gate's child (imports and pytest), confined and not; the
launcher's start-up (`python -c pass` plain, and through the sandbox with the seed's and the gate's policy), the
gateway's check of a request for secrets and the one scrub (scrub.py), on a prompt of the largest budget;
two rounds of pruning at the default retention; the disk backups/ uses, and the time to restore the first
snapshot. Prints figures; asserts nothing.
"""
import argparse
import json
import importlib
import importlib.util
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parent.parent
FILE_BYTES = 10_000  # each file of the made-up codebase; 2,000 of them make about 20 MB
PROVIDED_TESTS = ["supervisor/tests/conftest.py", "supervisor/tests/fake_gemini.py", "supervisor/tests/test_seed.py"]  # the working copy holds them
GATEWAY_PORT = 40_000  # any port: the seed's policy allows TCP to this one only
LAUNCHES = 20          # runs of `python -c pass` per way of starting it (the median is shown)
GATE_RUNS = 3          # runs of the gate's child, confined and not (the median is shown)
OLD_PHASES = ["snapshot", "capture (read the run's changes)", "compile check", "record and log"]  # "in process"


def make_workspace(root, files, keeper=False):
    """A codebase of `files` Python files in a few packages, two top-level modules and one test; with
    `keeper`, also the keeper's package and the tests its working copy holds (ours runs them)."""
    for n in range(files):
        path = root / f"pkg{n % 20}" / f"mod{n}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code(n, 0))
    (root / "app.py").write_text("def main():\n    return 1\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_app.py").write_text("from app import main\n\n\ndef test_main():\n    assert main() == 1\n")
    if keeper:
        shutil.copytree(REPO / "supervisor", root / "supervisor", ignore=shutil.ignore_patterns("__pycache__", "tests"))
    for name in ("fallback.py", "seed.py", "goal.md", *(PROVIDED_TESTS if keeper else [])):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, root / name)
    (root / "pending_tasks.md").write_text("# Pending tasks\n\n")  # as a first start makes them (a clone has none)
    (root / "iteration_log.md").write_text("# Iteration log\n")
    if keeper:
        shutil.copytree(REPO / "supervisor", root / "supervisor", ignore=shutil.ignore_patterns("__pycache__"),
                        dirs_exist_ok=True)
    (root / "backups").mkdir()


def code(n, version):
    line = f"VALUE_{n}_{version} = {n} * {version}  # padding to make the file about ten kilobytes long\n"
    return line * (FILE_BYTES // len(line))


def load_keeper(root):
    """The keeper's parts in root, loaded by their path as fallback.py loads them, under a package name of
    this workspace's own: they take their paths from where they lie and keep state in their modules."""
    name = "keeper_" + re.sub(r"\W", "_", str(root))
    spec = importlib.util.spec_from_file_location(name, root / "supervisor" / "__init__.py",
                                                  submodule_search_locations=[str(root / "supervisor")])
    sys.modules[name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sys.modules[name])
    parts = ("settings", "snapshots", "terrarium", "gate", "source", "journal", "record", "sandbox", "kinds",
             "scrub", "check")
    where = {p.stem: ".".join(p.relative_to(root / "supervisor").with_suffix("").parts)
             for p in (root / "supervisor").rglob("*.py") if "tests" not in p.relative_to(root).parts}
    return SimpleNamespace(**{part: importlib.import_module(f"{name}.{where[part]}") for part in parts})


def timed(function, *args):
    started = time.perf_counter()
    value = function(*args)
    return value, (time.perf_counter() - started) * 1000


def change_three(root, files, iteration):
    """What a seed run does here: rewrite three files."""
    for n in (iteration * 7 % files, (iteration * 13 + 1) % files, (iteration * 31 + 2) % files):
        (root / f"pkg{n % 20}" / f"mod{n}.py").write_text(code(n, iteration + 1))


def call(i):
    """A request as the gateway reports it: its ledger facts and its bytes, a prompt much like the one before."""
    prompt = json.dumps({"contents": [{"parts": [{"text": f"Goal\nthe codebase, iteration {i}\n" * 40}]}]}).encode()
    return {"day": "2026-11-24", "model": "gemini-3.5-flash", "kind": "answer", "latency": 4.1,
            "tokens": {"prompt": 31_000, "output": 900, "thinking": 400}, "sent": prompt, "received": b'{"candidates": []}',
            "cleaned": b'{"candidates": []}'}


def rolls_back(i):
    return i % 10 == 9  # now and then a change fails the gate


class Phases:
    """Milliseconds per phase, one dict per iteration."""
    def __init__(self):
        self.iterations = []

    def time(self, phase, function, *args):
        value, ms = timed(function, *args)
        self.iterations[-1][phase] = ms
        return value

    def row(self, phase):
        return [it[phase] for it in self.iterations if phase in it]

    def total(self, phases=None, landed=False):
        """Per iteration, the sum of these phases (all of them when None), of landed iterations only if asked."""
        return [sum(ms for phase, ms in it.items() if phases is None or phase in phases)
                for it in self.iterations if not landed or "land" in it]


class Ours(Phases):
    """The keeper's own parts, phase by phase, in the order of fallback.py's run_iteration."""
    def __init__(self, root):
        super().__init__()
        self.root, self.k = root, load_keeper(root)
        self.runs_in = self.k.settings.WORK
        self.index = self.k.snapshots.load_index()
        _, self.genesis_ms = timed(self.k.snapshots.snapshot, self.index, "genesis", 0)  # every file stored, once
        _, self.first_sync_ms = timed(self.k.terrarium.sync_work)  # every file copied, once
        self.numbered = self.k.record.last_number(root)  # the record's next iterations follow the ones it holds

    def before(self, i):
        self.iterations.append({})
        self.start = self.time("snapshot", self.k.snapshots.snapshot, self.index, "before", i)
        self.time("sync working copy", self.k.terrarium.sync_work, self.k.snapshots.files_of(self.start))

    def after(self, i):
        snap, gate, terrarium = self.k.snapshots, self.k.gate, self.k.terrarium
        taken = self.time("capture (read the run's changes)", terrarium.capture_work, snap.files_of(self.start))
        changes, self.files = taken["changes"], taken["files"]
        self.time("compile check", lambda: [gate.compile_error(rel, self.files[rel]) for rel, kind, *_ in changes
                                            if rel.endswith(".py") and kind != "deleted"])
        self.time("seed's imports (contract or not)", gate.touches_seed, changes, self.files)
        self.time("conftest.py allow-list, pytest_plugins", self.k.source.refused, self.files)
        self.time("the tests' source (ratchet, made-up ids)", self.read_tests)
        self.time("the gate's read-only copy", terrarium.judged_copy, self.files)
        if rolls_back(i):
            self.time("rollback (keep, sync)", self.roll_back, i)
        else:
            self.time("a person's edits? (only the changed files)", snap.edited_since, self.start,
                      [rel for rel, *_ in changes])
            plan, _ = self.time("land", terrarium.land, changes, self.files)
            landed = {rel: sha for rel, sha in {**snap.files_of(self.start), **plan}.items() if sha}
            self.time("snapshot after landing (known files)", snap.snapshot, self.index, "landed", i,
                      self.k.settings.ROOT, landed)
        kinds = self.k.kinds
        result = kinds.Result(kinds.Outcome.ROLLED_BACK, "tests failed", failure=kinds.Failure.TESTS, changes=changes) \
            if rolls_back(i) else kinds.Result(kinds.Outcome.LANDED, f"{len(changes)} file(s) changed", changes=changes)
        self.time("record and log", self.keep, self.k.record.row_of(self.numbered + i + 1, result, 1.0), i)

    def read_tests(self):
        """As gate.tampering and gate.count_passing read the tests pytest reported: against what the source defines."""
        reported = ["tests/test_app.py::test_main"]
        self.k.source.made_up(reported, self.files, ["tests/test_app.py"])
        return self.k.gate.count_passing({reported[0]: "passed"}, reported, ["tests/test_app.py"], self.files)

    def keep(self, row, i):
        """As fallback.py's record_iteration: the row and its request into the record, then its section into the log."""
        self.k.record.writer().write(row, [call(i)])
        self.k.journal.log_iteration(row)

    def roll_back(self, i):
        """As fallback.py's roll_back after a seed that ran: the folder never had the change."""
        self.k.snapshots.snapshot(self.index, "failed", i, files=self.files)
        self.k.terrarium.sync_work()

    def restore_first(self):
        return timed(self.k.snapshots.restore, self.index["snapshots"][0])[1]

    def prune_rounds(self, files):
        """Two rounds of pruning at the default retention, each after the snapshots that bring it on
        (untimed): the first reads every listing, the later ones only those it has not read yet."""
        times, taken, keep = [], 1000, self.k.settings.KEEP_LAST  # numbers past the timed iterations'
        for _ in range(2):
            while len(self.index["snapshots"]) <= keep + 1 + keep // 10:
                taken += 1
                change_three(self.root, files, taken)
                self.k.snapshots.snapshot(self.index, "before", taken)
            times.append(timed(self.k.snapshots.prune, self.index)[1])
        return times

    def gate_ms(self):
        """The gate's child (the modules import, then pytest over tests/), as the keeper runs it, confined, and
        the same command run plainly; medians, interleaved."""
        gate, terrarium = self.k.gate, self.k.terrarium
        judged = self.k.settings.JUDGED
        plain = [sys.executable, "-P", str(gate.CHECK), str(judged), "FACTS", "TOKEN", "1", "150", "app", "seed", "--",
                 "tests/test_app.py"]
        confined, unconfined = [], []
        for _ in range(GATE_RUNS):
            confined.append(timed(gate.run_checks, self.files, False)[1])
            unconfined.append(self.k.check.listen(lambda facts, token: run_ms(
                judged, [str(facts) if a == "FACTS" else str(token) if a == "TOKEN" else a for a in plain],
                terrarium.clean_env(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1"), pass_fds=(facts, token)))[1])
        return {"gate's child, confined (run_checks)": median(confined),
                "gate's child, the same command unconfined": median(unconfined)}

    def launch_ms(self):
        """`python -c pass` plain, and through the launcher with the seed's and the gate's policy; medians of
        LAUNCHES runs each, taken in turns."""
        terrarium, sandbox, command = self.k.terrarium, self.k.sandbox, [sys.executable, "-c", "pass"]
        launched = lambda rules: (sandbox.command(command, rules, self.runs_in), sandbox.START)  # as run_bounded
        ways = {"python -c pass, plain": (command, self.runs_in),
                "through the launcher, seed's policy": launched(terrarium.policy(GATEWAY_PORT)),
                "through the launcher, gate's policy": launched(terrarium.policy(own_servers=True))}
        times = {name: [] for name in ways}
        for _ in range(LAUNCHES):
            for name, (argv, start) in ways.items():
                times[name].append(run_ms(start, argv, terrarium.clean_env(), check=True))
        return {name: median(values) for name, values in times.items()}


    def scrub_ms(self):
        """The gateway's check of a request for secrets (every encoding of each), and the one scrub of the same
        bytes, on a prompt of the largest budget (about 180 KB) with two keys set; medians of LAUNCHES."""
        scrub = self.k.scrub
        os.environ.update(GEMINI_API_KEY="AIza" + "k" * 35, OPENAI_API_KEY="sk-" + "o" * 40)
        body = json.dumps({"contents": [{"parts": [{"text": code(0, 1) * 18}]}]}).encode()
        return {f"the gateway's secret check, {len(body) >> 10} KB request": median(
                    [timed(scrub.secret_in, body)[1] for _ in range(LAUNCHES)]),
                f"the one scrub, the same {len(body) >> 10} KB": median(
                    [timed(scrub.redact, body)[1] for _ in range(LAUNCHES)])}


class FullCopy(Phases):
    """A full copy before each run; the change summary by comparing every file with that copy."""
    def __init__(self, root, line_changes):
        super().__init__()
        self.root, self.runs_in, self.store, self.line_changes = root, root, root.parent / "copies", line_changes

    def before(self, i):
        self.iterations.append({})
        self.copy = self.store / f"{i:04d}"
        self.time("snapshot", shutil.copytree, self.root, self.copy, False,
                  shutil.ignore_patterns("backups", "__pycache__"))

    def after(self, i):
        self.time("change summary", self.compare)

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


class Git(Phases):
    """What other self-modifying tools do: a commit before each run, git's own diff after it; the seed runs
    in a worktree, synced by reset and clean, its change landed by a commit there and a fast-forward here."""
    def __init__(self, root):
        super().__init__()
        self.root, self.runs_in = root, root.parent / "work"
        git(root, "init", "-q", "-b", "main")
        git(root, "config", "user.email", "bench@example.invalid")
        git(root, "config", "user.name", "bench")
        _, self.genesis_ms = timed(lambda: (git(root, "add", "-A"), git(root, "commit", "-q", "-m", "genesis")))
        git(root, "worktree", "add", "-q", "-b", "work", str(self.runs_in), "main")

    def before(self, i):
        self.iterations.append({})
        self.time("snapshot", lambda: (git(self.root, "add", "-A"),
                                       git(self.root, "commit", "-q", "--allow-empty", "-m", f"run {i}")))
        self.time("sync working copy", lambda: (git(self.runs_in, "reset", "-q", "--hard", "main"),
                                                git(self.runs_in, "clean", "-fdq")))

    def after(self, i):
        self.time("change summary", lambda: (git(self.runs_in, "add", "-A"),
                                             git(self.runs_in, "diff", "--cached", "--numstat")))
        if not rolls_back(i):  # a rolled-back change stays in the worktree until the next sync
            self.time("land", lambda: (git(self.runs_in, "commit", "-q", "-m", f"landed {i}"),
                                       git(self.root, "merge", "-q", "--ff-only", "work")))

    def restore_first(self):
        first = git(self.root, "rev-list", "--max-parents=0", "HEAD").stdout.decode().strip()
        return timed(git, self.root, "checkout", "-q", first, "--", ".")[1]


def git(root, *args):
    return subprocess.run(["git", *args], cwd=root, capture_output=True, check=True)


def run_ms(root, command, env, check=False, pass_fds=()):
    started = time.perf_counter()
    subprocess.run(command, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=check,
                   pass_fds=pass_fds)
    return (time.perf_counter() - started) * 1000


def disk_use(folder):
    """Bytes the files under folder take, each hard-linked file counted once."""
    sizes = {}
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            stat = path.stat()
            sizes[stat.st_dev, stat.st_ino] = stat.st_size
    return sum(sizes.values())


def mean(values):
    return sum(values) / len(values) if values else float("nan")


def median(values):
    return sorted(values)[len(values) // 2] if values else float("nan")


def iterate(groups, files, iterations):
    """Run the iterations, the members of each group taking turns; a group's writing cannot slow the next."""
    for group in groups:
        time.sleep(1.1)  # as between real iterations: files older than a second are trusted by their stat
        for i in range(iterations):
            turns = group if i % 2 == 0 else group[::-1]
            for one in turns:
                one.before(i)
            time.sleep(1.0)  # a seed run takes a second at the least, so the files it writes are not the
            for one in turns:  # ones just hashed within the same second (which none of the three would trust)
                change_three(one.runs_in, files, i)
                one.after(i)


def report(files, iterations):
    base = Path(tempfile.mkdtemp(prefix=f"seed-overhead-{files}-"))
    for name in ("ours", "copies", "git"):
        make_workspace(base / name / "workspace", files, keeper=name == "ours")
    size = sum(p.stat().st_size for p in (base / "copies" / "workspace").rglob("*.py"))
    ours = Ours(base / "ours" / "workspace")
    by_git = Git(base / "git" / "workspace")
    copies = FullCopy(base / "copies" / "workspace", ours.k.snapshots.line_changes)
    iterate([[ours, by_git], [copies]], files, iterations)  # the copies' writing would slow the others
    disks = {"ours": disk_use(ours.k.settings.BACKUPS), "full copy": disk_use(copies.store),
             "git": disk_use(by_git.root / ".git")}
    restores = {name: one.restore_first() for name, one in (("ours", ours), ("full copy", copies), ("git", by_git))}
    gate, launches, prunes = ours.gate_ms(), {**ours.launch_ms(), **ours.scrub_ms()}, ours.prune_rounds(files)
    print(f"\n{files:,} files, {size / 1e6:.1f} MB of code; {iterations} iterations changing 3 files each, one in "
          f"ten rolled back ({3 * FILE_BYTES * iterations / 1e6:.1f} MB changed in all)")
    show_ours(ours, prunes)
    show_baselines(ours, {"full copy": copies, "git": by_git})
    show_subprocesses(ours, gate, launches)
    show_disk(disks, restores, size, 3 * FILE_BYTES * iterations, iterations)
    shutil.rmtree(base)


def line(name, values, note=""):
    print(f"  {name:<44}{median(values):>9.1f}{mean(values):>9.1f}{max(values, default=float('nan')):>9.1f}{note}")


def show_ours(ours, prunes):
    print(f"  {'per iteration, in process':<44}{'median':>9}{'mean':>9}{'max ms':>9}")
    phases = dict.fromkeys(phase for it in ours.iterations for phase in it)
    for phase in phases:
        line(phase, ours.row(phase), "   (once in ten iterations)" if phase.startswith("rollback") else "")
    line("total, the README's phases", ours.total(OLD_PHASES), f"   ({', '.join(OLD_PHASES)})")
    line("total, a landed iteration", ours.total(landed=True), "   (all of the above but the rollback)")
    print(f"  {'prune, at BACKUPS_KEEP=100':<44}{prunes[1]:>9.1f}{'':>18}   (once in 10 iterations; the first "
          f"round after a start {prunes[0]:.1f})")
    print(f"  {'first snapshot (genesis)':<44}{ours.genesis_ms:>9.1f}{'':>18}   (once in a workspace's life)")
    print(f"  {'first sync (the working copy made)':<44}{ours.first_sync_ms:>9.1f}{'':>18}   (once in a workspace's "
          "life)")


def show_baselines(ours, baselines):
    print("  the baselines doing the same job: a snapshot before the run, the change summary after it")
    total, landed = ours.total(OLD_PHASES), ours.total(landed=True)
    for name, one in baselines.items():
        both = one.total(["snapshot", "change summary"])
        line(f"{name}: snapshot", one.row("snapshot"),
             f"   ours {median(one.row('snapshot')) / median(ours.row('snapshot')):.1f}x faster")
        line(f"{name}: change summary", one.row("change summary"))
        line(f"{name}: both", both, f"   ours (the README's phases) {median(both) / median(total):.1f}x faster "
                                    f"(medians), {mean(both) / mean(total):.1f}x (means)")
    by_git = baselines["git"]
    line("git: sync working copy (reset --hard, clean)", by_git.row("sync working copy"))
    line("git: land (commit there, merge --ff-only)", by_git.row("land"))
    line("git: a landed iteration, all four", by_git.total(landed=True))
    for name, theirs in (("git's landed iteration, all four", by_git.total(landed=True)),
                         ("git's snapshot and summary alone", by_git.total(["snapshot", "change summary"]))):
        verdict = "below" if median(landed) < median(theirs) else "ABOVE"
        print(f"  target: ours, a landed iteration, {median(landed):.1f} ms, is {verdict} {name}, "
              f"{median(theirs):.1f} ms ({median(landed) / median(theirs):.2f}x; medians)")


def show_subprocesses(ours, gate, launches):
    for name, ms in gate.items():
        print(f"  {name:<44}{ms:>9.1f}{'':>18}   (only when a .py file changed; median of {GATE_RUNS})")
    plain = launches["python -c pass, plain"]
    for name, ms in launches.items():
        extra = f"; +{ms - plain:.1f} for the launcher" if name.startswith("through") else ""
        print(f"  {name:<44}{ms:>9.1f}{'':>18}   (median of {LAUNCHES}{extra})")
    landed = median(ours.total(landed=True))
    share = landed / (landed + gate["gate's child, confined (run_checks)"])
    print(f"  in process: {share:.0%} of the supervisor's time in a landed iteration whose gate runs; the rest is "
          "the gate's child, mostly its start-up")


def show_disk(disks, restores, size, changed, iterations):
    print(f"  backups after {iterations} iterations: ours {disks['ours'] / 1e6:.1f} MB "
          f"({disks['ours'] / (size + changed):.2f}x workspace + changes; target under 1.3x = "
          f"{(1.3 * size + changed) / 1e6:.1f} MB), full copies {disks['full copy'] / 1e6:.1f} MB, "
          f"git {disks['git'] / 1e6:.1f} MB")
    print(f"  restore of the first snapshot: ours {restores['ours']:.0f} ms, full copy {restores['full copy']:.0f} ms, "
          f"git checkout {restores['git']:.0f} ms")


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
