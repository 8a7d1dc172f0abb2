"""gate: the checks a change must pass to land. They judge the captured candidate, never the moment.

The candidate's changed .py files must compile (here, from the bytes captured: compiling runs nothing). Then
the candidate is laid out in .seed/judged/ (terrarium.judged_copy), which the checks may read but
not write, and one confined child with no key and no way to the gateway imports the codebase's top-level
modules, then runs pytest over tests/ (the model's tests, and the seed's contract when the seed or a module it
imports changed) under the keeper's configuration: `-c /dev/null`, so no pytest.ini, setup.cfg, tox.ini,
pyproject.toml or addopts of the model's changes how its tests are collected or reported. The verdict is read
from what the keeper's own plugin in that child reports, test by test, through a pipe as they happen (not from
an exit code): a child that ends early, collects nothing where tests exist, or reports fewer tests than it
collected, fails. And the tests are a ratchet: fewer of the model's tests passing than at the landed state the
change started from is a failure, "tests removed".

The checks run as a cascade, cheap and likely failures first: compile; import; the test files the change can
affect (selection.py), failing at the first failure; then the rest of the suite, unless the selection is sound
to stand alone. Every test runs when the seed changed (with its contract), when the selection cannot be sound,
when the counts of the state the change started from are not known, and at least every SEED_FULL_GATE_EVERY
landings (the cadence is the caller's: `full`). On two cores or more, a run of SEED_PARALLEL_FROM test files or
more, where no two test files share a name, deals them into two pytest processes at once (each its own temp folder);
only a pass there is taken: anything else runs them all again in one process, whose verdict counts, in the gate's
whole time. Tests may lean on each other's state, so the cadence's run is always in one process: a break that parts
or a selection hid is found within SEED_FULL_GATE_EVERY landings.
"""
import ast
import json
import os
import re
import sys
import threading
from dataclasses import dataclass, replace
from enum import Enum

from . import selection
from .console import show_phase
from .settings import CONTRACT, GATE_TIMEOUT, JUDGED, PARALLEL_FROM, ROOT
from .snapshots import object_path
from .terrarium import clean_env, judged_copy, policy, run_bounded

PYTEST = """import json, os, sys
import pytest
def run_tests(root, tests, facts, basetemp=None):
    def tell(**fact):
        facts.write(json.dumps(fact) + "\\n")
        facts.flush()

    class Keeper:
        @pytest.hookimpl(trylast=True)
        def pytest_collection_finish(self, session):
            tell(collected=[item.nodeid for item in session.items])

        @pytest.hookimpl(hookwrapper=True, tryfirst=True)
        def pytest_runtest_makereport(self, item, call):
            report = (yield).get_result()
            if call.when == "call" or report.outcome != "passed":  # a test marked to fail never counts as passing
                raised = call.excinfo is not None and not call.excinfo.errisinstance(pytest.skip.Exception)
                outcome = "xfailed" if hasattr(report, "wasxfail") else "failed" if raised else report.outcome
                tell(test=item.nodeid, when=call.when, outcome=outcome)

        def pytest_sessionfinish(self, session, exitstatus):
            tell(finished=int(exitstatus))

    return pytest.main(["-c", os.devnull, "--rootdir", root, "--confcutdir", root, "-q", "-x",
                        "--tb=short", "-rN", "-p", "no:cacheprovider", "--import-mode=append",
                        *(["--basetemp", basetemp] if basetemp else []), *tests], plugins=[Keeper()])
"""  # pytest under the keeper's configuration, each outcome written to `facts` as it happens
PART = PYTEST + """sys.path.append(sys.argv[1])
sys.exit(run_tests(sys.argv[1], sys.argv[4:], os.fdopen(int(sys.argv[2]), "w", buffering=1), sys.argv[3]))
"""  # one of the parts a run's tests are dealt into: its own process, its own temp folder, its own pipe
CHECKS = PYTEST + f"PART = {PART!r}\n" + """import importlib, signal, subprocess, tempfile, threading, time, traceback
root, facts, parts, seconds = sys.argv[1], os.fdopen(int(sys.argv[2]), "w", buffering=1), *map(int, sys.argv[3:5])
modules, tests = sys.argv[5:sys.argv.index("--")], sys.argv[sys.argv.index("--") + 1:]
def tell(**fact):
    facts.write(json.dumps(fact) + "\\n")
    facts.flush()
def in_parts():
    # The tests dealt in turn into `parts` processes at once, for `seconds` at most. True when each ran to its end
    # with no failure (their facts are then told as one run's); else False, and they all run again in this one
    # process, whose verdict counts (a part may have failed or hung only beside the other).
    runs, pipes, told = [], [], [[] for _ in range(parts)]
    for n in range(parts):
        read_end, write_end = os.pipe()
        runs.append(subprocess.Popen([sys.executable, "-P", "-c", PART, root, str(write_end),
                                      os.path.join(tempfile.gettempdir(), f"part{n}"), *tests[n::parts]],
                                     pass_fds=(write_end,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     process_group=0))
        os.close(write_end)
        pipes.append(os.fdopen(read_end, "rb"))
    def drain(n):
        for line in pipes[n]:
            try:
                fact = json.loads(line)
            except ValueError:
                continue
            told[n].append(fact)
            if isinstance(fact, dict) and fact.get("outcome") == "failed":
                for run in runs:  # fail fast: the other parts are stopped
                    run.kill()
    readers = [threading.Thread(target=drain, args=(n,), daemon=True) for n in range(parts)]
    for reader in readers:
        reader.start()
    deadline = time.monotonic() + seconds
    try:
        for run in runs:
            run.wait(max(0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        for run in runs:
            run.kill()
    codes = [run.wait() for run in runs]
    for run in runs:  # what a part left (a server of a test killed before its teardown) is gone before one process runs
        try:
            os.killpg(run.pid, signal.SIGKILL)
        except OSError:
            pass
    read_by = time.monotonic() + 2  # a process a part left may hold its pipe open: what the part wrote is read by then
    for reader in readers:
        reader.join(max(0, read_by - time.monotonic()))
    facts_of = [[fact for fact in list(part) if isinstance(fact, dict)] for part in told]
    whole = all(code in (0, 5) and any("collected" in f for f in part) and any("finished" in f for f in part)
                and not any(f.get("outcome") == "failed" for f in part) for code, part in zip(codes, facts_of))
    if not whole:
        return False
    # each part's first collection, as one process's verdict takes it: a later one can only be a test's
    tell(collected=[test for part in facts_of for test in next(f["collected"] for f in part if "collected" in f)])
    for fact in (f for part in facts_of for f in part if "test" in f):
        tell(**fact)
    tell(finished=min(codes))
    return True
sys.path.append(root)
try:
    for name in modules:
        importlib.import_module(name)
except BaseException:
    traceback.print_exc()
    sys.exit(97)
tell(imported=True)
print("the modules import", flush=True)
if tests and parts > 1 and in_parts():
    sys.exit(0)
code = run_tests(root, tests, facts) if tests else 0
if tests and parts > 1:
    print(f"(the tests ran first in {parts} parts at once, and one did not pass: the verdict is this run's, "
          "in one process)")
sys.exit(code)
"""  # one child: the modules import, then pytest runs over the tests (one interpreter start-up, not two)
IMPORT_FAILED = 97
EVERY_TEST = "all test files"  # what a gate ran: these, or how many of the test files
FACTS_BYTES = 8 << 20  # the most of the plugin's report read (about 80,000 tests)
FACTS = {"imported": bool, "collected": list, "test": str, "when": str, "outcome": str, "finished": int}
SHAPES = [{"imported"}, {"collected"}, {"test", "when", "outcome"}, {"finished"}]  # the facts the plugin tells


class Failure(str, Enum):
    """What a gate can fail on (the start of the reason the log and the task give)."""
    COMPILE = "does not compile"
    IMPORT = "import check failed"
    IMPORT_TIMEOUT = "import check timed out"
    TESTS = "tests failed"
    TESTS_TIMEOUT = "tests timed out"
    TESTS_UNREPORTED = "tests did not report"
    TESTS_REMOVED = "tests removed"
    UNTRUSTED = "the run left what the keeper does not take"


@dataclass(frozen=True)
class Verdict:
    """What the gate found: `failure` None when the candidate passed, else its kind, what it says beyond the kind
    (`detail`, one line) and the output that shows it; the model's passing tests per test file (None when unknown)
    and which tests ran (EVERY_TEST, or how many of the test files)."""
    failure: Failure | None = None
    detail: str = ""
    output: str = ""
    passing: dict | None = None
    tests_ran: str | None = None

    @property
    def why(self):
        """The failure as people read it: its kind, then what it says."""
        return f"{self.failure.value}: {self.detail}" if self.detail else self.failure.value


def gate(changes, files, before=None, full=False):
    """The Verdict on a candidate: its passing counts are those of the model's tests. `files`: the candidate's
    {path: sha256}, its objects stored; `before`: the same counts at the landed state the change started from, when
    known (the ratchet); `full`: run every test even where a selection would be sound (the cadence). A change of any
    file is checked: a data file can break a test that reads it."""
    show_phase("checking: the changed .py files compile")
    broken = [compile_error(rel, files[rel]) for rel, kind, *_ in changes if rel.endswith(".py") and kind != "deleted"]
    if any(broken):
        return Verdict(Failure.COMPILE, output="\n".join(b for b in broken if b))
    selected = None if full or before is None else changes
    found = run_checks(files, touches_seed(changes, files), selected, split=before is None or not full)
    if found.passing is None:
        return replace(found, passing=before)
    passing = {**{test: count for test, count in (before or {}).items() if test in files}, **found.passing}
    if not found.failure and before is not None and sum(passing.values()) < sum(before.values()):
        return replace(found, failure=Failure.TESTS_REMOVED, passing=passing,
                       detail=f"{sum(before.values())} passing before, {sum(passing.values())} now",
                       output="A change may rename or rewrite tests, never lower the number that pass (deleted, "
                              "emptied, skipped or expected to fail).")
    return replace(found, passing=passing)


def touches_seed(changes, files):
    """Whether a change reached seed.py or a module it imports: then the seed's contract runs too."""
    return bool({rel for rel, *_ in changes} & seed_and_its_modules(files))


def run_checks(files, contract, changes=None, split=False):
    """The Verdict of the candidate's top-level modules importing and pytest passing over tests/ (with the seed's
    contract if asked); its passing counts are those of the tests that ran. With `changes`, the tests they can affect run first, and alone
    when that selection is sound and the seed's contract is not asked. With `split`, a run of SEED_PARALLEL_FROM
    test files or more goes in two parts at once where that is sound. The code runs in a child of the terrarium,
    in the judged copy it may not write, with no key and no way to the API."""
    judged_copy(files, with_contract=contract)
    modules = [rel[:-3] for rel in files if rel.endswith(".py") and "/" not in rel and rel[:-3].isidentifier()]
    modules += [rel.split("/")[0] for rel in files if re.fullmatch(r"[A-Za-z_]\w*/__init__\.py", rel)]
    every = sorted(rel for rel in files if re.fullmatch(r"tests/(.*/)?test_[^/]*\.py", rel))
    first, sound = selection.affected(every, changes, files) if changes is not None and not contract else (every, False)
    contract = [CONTRACT] if contract and (ROOT / CONTRACT).is_file() else []  # as judged_copy lays it out
    tests = first if sound else [*first, *contract, *(rel for rel in every if rel not in first)]
    show_phase(f"checking: {len(modules)} module(s) import, pytest over {len(tests)} of {len(every) + len(contract)} "
               "test file(s)")
    parts = 2 if split and len(tests) >= PARALLEL_FROM and cores() >= 2 and apart(files) else 1
    facts, (code, output) = listen(lambda fd: run_bounded(
        [sys.executable, "-P", "-c", CHECKS, str(JUDGED), str(fd), str(parts), str(GATE_TIMEOUT // 2), *modules, "--",
         *tests],
        clean_env(GEMINI_API_BASE="http://127.0.0.1:9", PYTEST_DISABLE_PLUGIN_AUTOLOAD="1"),
        GATE_TIMEOUT + GATE_TIMEOUT // 2 * (parts > 1), policy(own_servers=True, judged=JUDGED), cwd=JUDGED,
        pass_fds=(fd,)))  # the one process that judges what did not pass in parts has the gate's whole time
    which = EVERY_TEST if len(tests) == len(every) + len(contract) else \
        f"{len(tests)} of {len(every)} test files, those this change can affect"
    if not any("imported" in fact for fact in facts):
        return Verdict(Failure.IMPORT_TIMEOUT if code is None else Failure.IMPORT, output=output, tests_ran=which)
    return replace(verdict(facts, code, output, tests, expected_tests(files, tests)), tests_ran=which)


def apart(files):
    """Whether pytest collects the tests in parts as it does in one process: no two .py files under tests/ (but
    packages' __init__.py) of one name. Importing by name, one process refuses the second ('import file mismatch');
    in parts, each could be alone."""
    names = [rel.rsplit("/", 1)[-1] for rel in files if rel.startswith("tests/") and rel.endswith(".py")]
    names = [name for name in names if name != "__init__.py"]
    return len(names) == len(set(names))


def cores():
    """The cores this process may run on (macOS has no affinity: all of them)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def verdict(facts, code, output, tests, expected):
    """The Verdict on the tests from what the keeper's plugin reported (the exit code can only fail it)."""
    collected = next((fact["collected"] for fact in facts if "collected" in fact), None)
    outcomes = {fact["test"]: fact["outcome"] for fact in facts if "test" in fact and fact["outcome"] != "passed"}
    outcomes.update({fact["test"]: "passed" for fact in facts if fact.get("when") == "call"
                     and fact["outcome"] == "passed" and fact["test"] not in outcomes})
    passing = {rel: 0 for rel in tests if rel != CONTRACT}
    for test, outcome in outcomes.items():  # only what pytest collected counts: a fact written by a test does not
        if outcome == "passed" and test.split("::")[0] in passing and test in (collected or ()):
            passing[test.split("::")[0]] += 1
    if not tests:
        return Verdict()
    if code is None:
        return Verdict(Failure.TESTS_TIMEOUT, output=output, passing=passing)
    if "failed" in outcomes.values() or (code not in (0, 5) and collected is not None):
        return Verdict(Failure.TESTS, output=output, passing=passing)
    finished = next((fact["finished"] for fact in facts if "finished" in fact), None)
    why = ("pytest ended before it collected the tests" if collected is None else
           "pytest ended before its session finished" if finished is None else
           f"pytest collected no tests, where the test files define {expected}" if not collected and expected else
           f"pytest reported {len(outcomes)} of the {len(collected)} tests it collected"
           if set(collected) - outcomes.keys() else "")
    if why:
        return Verdict(Failure.TESTS_UNREPORTED, f"{why} (exit {code})", output, passing)
    return Verdict(passing=passing)


def listen(run):
    """Run `run(fd)` with the write end of a pipe as fd; the JSON facts written to it, and what run returned."""
    read_end, write_end = os.pipe()
    facts, lines = [], []
    def drain():
        with os.fdopen(read_end, "rb") as pipe:
            lines.extend(pipe.read(FACTS_BYTES).splitlines())
    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        result = run(write_end)
    finally:
        os.close(write_end)
    reader.join(5)
    for line in lines:
        try:
            fact = json.loads(line)
        except ValueError:
            continue
        if is_fact(fact):
            facts.append(fact)
    return facts, result


def is_fact(fact):
    """Whether a line read is of a shape the keeper's plugin tells (a test may write anything there)."""
    return isinstance(fact, dict) and set(fact) in SHAPES and all(isinstance(fact[k], FACTS[k]) for k in fact) \
        and all(isinstance(test, str) for test in fact.get("collected", ()))


def expected_tests(files, tests):
    """How many test functions the test files define, read from their source (pytest may find more)."""
    count = 0
    for rel in tests:
        try:
            tree = ast.parse(object_path(files[rel]).read_bytes()) if rel in files else None
        except (SyntaxError, ValueError):
            continue
        count += sum(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test")
                     for node in ast.walk(tree)) if tree else 0
    return count


def seed_and_its_modules(files):
    """seed.py and the candidate's files it imports, directly or not: a change to one of them runs the contract."""
    found, queue = set(), ["seed.py"]
    while queue:
        rel = queue.pop()
        if rel in found or rel not in files:
            continue
        found.add(rel)
        try:
            tree = ast.parse(object_path(files[rel]).read_bytes())
        except (SyntaxError, ValueError):
            continue
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and not n.level]
        for top in {name.split(".")[0] for name in names} - set(sys.stdlib_module_names):
            queue += [f"{top}.py"] + [rel for rel in files if rel.startswith(f"{top}/") and rel.endswith(".py")]
    return found


def compile_error(rel, sha):
    """Why a .py file does not compile, or ''. Too large a file is not compiled here: it fails."""
    path = object_path(sha)
    if path.stat().st_size > 8 << 20:
        return f"{rel}: larger than 8 MB, too large to be code"
    try:
        compile(path.read_bytes(), rel, "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        return f"{rel}: {type(error).__name__}: {error}"
    return ""
