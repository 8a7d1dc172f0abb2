"""gate: the checks a change must pass to land. They judge the captured candidate, never the moment.

    verdict = gate(changes, files, before, full)    # Verdict(failure or None, detail, output, passing, tests_ran)

The candidate's changed .py files must compile (here, from the bytes captured: compiling runs nothing), and its
conftest.py files and test modules keep to what the model's may do with pytest (source.refused: read, not run). Then
the candidate is laid out in .seed/judged/ (terrarium.judged_copy), which the checks may read but not write, and one
confined child with no key and no way to the gateway (check.py, run by its path) imports the codebase's top-level
modules (seed.py and its imports only when it or a module it imports changed), then runs pytest over tests/ (the
model's tests, and the seed's contract when the seed or a module it imports changed) under the keeper's
configuration: `-c /dev/null`, so no pytest.ini, setup.cfg, tox.ini, pyproject.toml or addopts of the model's
changes how its tests are collected or reported. The verdict is read from what the keeper's own plugin in that child
reports, test by test, through a pipe of the keeper's as they happen, each line signed (not from an exit code): a
child that ends early, collects nothing where tests exist, or reports fewer tests than it collected, fails. And the
tests are a ratchet: fewer of the model's test functions passing than at the landed state the change started from is
a failure, "tests removed". What shows the code reached for the verdict instead (a hook or plugin the plugin found,
pytest's code patched, a line on the pipe the plugin did not sign, a test no source defines) is Failure.TAMPERED.

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
import contextlib
import hashlib
import importlib.metadata
import json
import os
import re
import sys
import sysconfig
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

from . import blame, selection, source, zygote
from .check import listen, unlink_folders
from ..events import phase
from ..kinds import Failure, Verdict
from ..settings import CONTRACT, GATE_TIMEOUT, JUDGED, PARALLEL_FROM, ROOT, SCRATCH, write_atomically
from ..store.snapshots import object_path
from .terrarium import clean_env, judged_copy, policy, run_bounded

CHECK = Path(__file__).with_name("check.py")  # the child's program, run by its path
EVERY_TEST = "all test files"  # what a gate ran: these, or how many of the test files
COUNTED = "test functions"  # what the ratchet counts: a landed state's counts are of these, or of an older kind
TEST_FILE = re.compile(r"tests/(.*/)?test_[^/]*\.py")  # what pytest collects tests from
EMPTY_RULE = ("A test file a change adds must test something: a function whose name starts with test (or a "
              "class named Test... holding such methods) that asserts what the code does.")
TAKEN_RULE = ("A module of the codebase may not take the name of a module of the standard library or of an installed "
              "package (json.py, signal.py, requests/): wherever the folder comes first on the path, it would "
              "stand in for the real one. Give it a name of its own (notes_json.py, not json.py).")
SEEDS_CONTRACT = "seed.py's contract"  # the contract's path as the model is told it (the file is the keeper's)
SEED_BROKEN = "seed.py breaks its docstring's rules"  # what a failure of the contract says first


def gate(changes, files, before=None, full=False):
    """The Verdict on a candidate. `files`: its {path: sha256}, its objects stored; `before`: the ratchet's counts at
    the landed state the change started from, when known; `full`: run every test even where a selection would be
    sound (the cadence). A change of any file is checked: a data file can break a test that reads it."""
    phase("checking: the changed .py files compile")
    broken = [compile_error(rel, files[rel]) for rel, kind, *_ in changes if rel.endswith(".py") and kind != "deleted"]
    if any(broken):
        return Verdict(Failure.COMPILE, output="\n".join(b for b in broken if b))
    refused = source.refused(files)  # before any of the model's code runs
    if refused:
        return Verdict(Failure.TAMPERED, refused, source.RULE)
    taken = [name for rel, kind, *_ in changes if kind != "deleted" and (name := taken_name(rel))]
    if taken:
        return Verdict(Failure.TAKEN, ", ".join(taken), TAKEN_RULE)
    empty = [rel for rel, kind, *_ in changes if kind == "new" and TEST_FILE.fullmatch(rel)
             and not source.may_hold_tests(files[rel])]
    if empty:
        return Verdict(Failure.TESTS_EMPTY, f"{empty[0]} defines no test", EMPTY_RULE)
    selected = None if full or before is None else changes
    verdict = run_checks(files, touches_seed(changes, files), selected, split=before is None or not full)
    if verdict.passing is None:
        return replace(verdict, passing=before)
    passing = {**{test: count for test, count in (before or {}).items() if test in files}, **verdict.passing}
    if not verdict.failure and before is not None and sum(passing.values()) < sum(before.values()):
        return replace(verdict, failure=Failure.TESTS_REMOVED, passing=passing,
                       detail=f"{sum(before.values())} passing before, {sum(passing.values())} now",
                       output="A change may rename or rewrite tests, never lower the number of test functions that "
                              "pass (deleted, emptied, skipped or expected to fail).")
    return replace(verdict, passing=passing)


def taken_name(rel):
    """"json.py (json: the standard library)" when the path `rel` is a top-level module, or lies in a top-level
    folder (a package, or a namespace package: org/python/core.py with no __init__.py imports as org.python.core),
    whose name Python has or looks for here, else ''."""
    top = rel.split("/")[0] if "/" in rel else rel.removesuffix(".py") if rel.endswith(".py") else ""
    owner = python_names().get(top)
    return f"{rel} ({top}: {owner})" if owner else ""


@lru_cache(maxsize=1)
def python_names():
    """{top-level module name: whose it is} for every name Python has here or looks for before the codebase: the
    standard library's, the start-up hooks site imports from the path, each installed distribution's (this
    interpreter's site-packages, as the keeper's own path has them: the folder is never on it), and every name their
    own code imports, found or not (copy.py tries Jython's org.python.core, urllib3 tries socks: a module of that
    name in the folder ran in the scorer, and in a person's `python -m http.server` there, reading .env). Worked out
    from their sources, never listed, in about half a second, and kept in the user's cache for this interpreter and
    these packages as installed (packages()): the tests start the keeper hundreds of times. The standard library's
    names and the start-up hooks are never read from that file."""
    names = {name: "the standard library" for name in sys.stdlib_module_names}  # never from a file
    names.update(sitecustomize="a start-up hook of Python's", usercustomize="a start-up hook of Python's")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "seed"
    kept = cache / f"python-owners-{packages()}.json"
    try:
        found = json.loads(kept.read_text())
        if isinstance(found, dict) and all(isinstance(owner, str) for owner in found.values()):
            return {**found, **names}
    except (OSError, ValueError):
        pass
    found = {}
    for name, owners in importlib.metadata.packages_distributions().items():
        found.setdefault(name, f"the installed package {owners[0]}")
    for name in imported_by_python():
        found.setdefault(name, "a name the standard library or an installed package imports")
    with contextlib.suppress(OSError):  # a home that cannot be written: it is worked out again next time
        write_atomically(kept, json.dumps(found, sort_keys=True).encode())
    return {**found, **names}


def packages():
    """Sixteen hex digits naming this interpreter and its installed packages as they are now: each distribution's
    name and version (blame.world), and when each was installed (a package installed again at the same version,
    with other modules, is another)."""
    world, installed = blame.world(), []
    for folder in sys.path:
        with contextlib.suppress(OSError):  # not a folder, or one that cannot be read: nothing installed there
            installed += sorted((entry.path, entry.stat().st_mtime_ns) for entry in os.scandir(folder)
                                if entry.name.endswith((".dist-info", ".egg-info")))
    return hashlib.sha256(json.dumps([world["python"], world["packages"], installed]).encode()).hexdigest()[:16]


DOTTED_NAME = rb"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*"
IMPORT_LINE = re.compile(rb"^[ \t]*(?:from[ \t]+(" + DOTTED_NAME + rb")[ \t]+import[ \t(]|import[ \t]+(" + DOTTED_NAME +
                         rb"(?:[ \t]+as[ \t]+\w+)?(?:[ \t]*,[ \t]*" + DOTTED_NAME + rb"(?:[ \t]+as[ \t]+\w+)?)*)[ \t]*(?:#.*)?$)",
                         re.M)  # a whole statement, not prose ("import a module", "from the start")


def imported_by_python():
    """The top-level names every module of the standard library and of this interpreter's site-packages imports
    (their tests but not: nothing runs those here), read as text."""
    found = set()
    roots = {sysconfig.get_paths()[kind] for kind in ("stdlib", "platstdlib", "purelib", "platlib")}
    for root in roots:
        for folder, folders, files in os.walk(root):
            folders[:] = [name for name in folders if name not in ("test", "tests", "__pycache__", "site-packages")]
            for name in files:
                try:
                    text = open(os.path.join(folder, name), "rb").read() if name.endswith(".py") else b""
                except OSError:
                    continue
                for module, listed in IMPORT_LINE.findall(text):
                    found.update(part.strip().split(b" ")[0].split(b".")[0].decode()
                                 for part in (module or listed).split(b","))
    return {name for name in found if name.isidentifier()}


def ratchet_of(start):
    """The ratchet's counts at a landed state (snapshot entry), when they are known and of test functions."""
    passing = start.get("passing")
    return passing if isinstance(passing, dict) and start.get("counted") == COUNTED else None


def touches_seed(changes, files):
    """Whether a change reached seed.py or a module it imports: then the seed's contract runs too."""
    return bool({rel for rel, *_ in changes} & seed_and_its_modules(files))


def run_checks(files, contract, changes=None, split=False):
    """The Verdict on the candidate's top-level modules importing (seed.py with its contract only) and pytest over
    tests/ (with the seed's contract if asked), its counts those of this run alone. With `changes`, the tests they
    can affect run first, and alone when that selection is sound and the seed's contract is not asked. With `split`,
    a run of SEED_PARALLEL_FROM test files or more goes in two parts at once where that is sound. The code runs in a
    child of the terrarium, in the judged copy it may not write, with no key and no way to the API."""
    judged_copy(files, with_contract=contract)
    modules = [rel[:-3] for rel in files if rel.endswith(".py") and "/" not in rel and rel[:-3].isidentifier()
               and (contract or rel != "seed.py")]  # seed.py (and its imports) only when it or its modules changed
    modules += [rel.split("/")[0] for rel in files if re.fullmatch(r"[A-Za-z_]\w*/__init__\.py", rel)]
    every = sorted(rel for rel in files if TEST_FILE.fullmatch(rel))
    first, sound = selection.affected(every, changes, files) if changes is not None and not contract else (every, False)
    contract = [CONTRACT] if contract and (ROOT / CONTRACT).is_file() else []  # as judged_copy lays it out
    tests = first if sound else [*first, *contract, *(rel for rel in every if rel not in first)]
    phase(f"checking: {len(modules)} module(s) import, pytest over {len(tests)} of {len(every) + len(contract)} "
          "test file(s)")
    parts = 2 if split and len(tests) >= PARALLEL_FROM and cores() >= 2 and apart(files) else 1
    rules = policy(own_servers=True, judged=JUDGED)
    rules["read"].append(str(CHECK))  # the one file of the keeper's the child reads
    heard, (code, output) = listen(lambda facts, token: run_bounded(
        [sys.executable, "-P", str(CHECK), str(JUDGED), str(facts), str(token), str(parts), str(GATE_TIMEOUT // 2),
         *modules, "--", *tests], clean_env(GEMINI_API_BASE="http://127.0.0.1:9", PYTEST_DISABLE_PLUGIN_AUTOLOAD="1"),
        GATE_TIMEOUT + GATE_TIMEOUT // 2 * (parts > 1), rules, cwd=JUDGED, pass_fds=(facts, token),
        start=zygote.start))
    unlink_folders(SCRATCH)
    output = output.replace(f"{JUDGED}/", "")  # paths as the model knows them: a small model wrote .seed/judged/...
    output = source.import_hints(output, files)
    # the one process that judges what did not pass in parts has the gate's whole time
    which = EVERY_TEST if len(tests) == len(every) + len(contract) else \
        f"{len(tests)} of {len(every)} test files, those this change can affect"
    tampered = tampering(heard, files, tests)
    if tampered:
        return Verdict(Failure.TAMPERED, tampered[0], "\n".join([output, *tampered, "", source.RULE]), tests_ran=which)
    if not any("imported" in fact for fact in heard.facts):
        return Verdict(Failure.IMPORT_TIMEOUT if code is None else Failure.IMPORT, output=output, tests_ran=which)
    return replace(judge_tests(heard.facts, code, output, tests, files), tests_ran=which)


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


def tampering(heard, files, tests):
    """What the child found tampered with, what wrote on its pipe besides its plugin, and the tests pytest reported
    that no source defines (a made-up collection)."""
    found = [fact["tampered"] for fact in heard.facts if "tampered" in fact]
    if heard.foreign:
        found.append(f"{heard.foreign} line(s) on the keeper's pipe that its plugin did not write")
    reported = [test for fact in heard.facts for test in fact.get("collected", [fact.get("test")]) if test]
    forged = source.made_up([test for test in reported if not test.startswith(f"{CONTRACT}::")], files, tests)
    if forged:
        found.append(f"pytest reported {len(forged)} test(s) that no source defines: {', '.join(forged[:3])}"
                     + (", ..." if len(forged) > 3 else ""))
    return found


def judge_tests(facts, code, output, tests, files):
    """The gate's judgement of the tests from what the keeper's plugin reported (the exit code can only fail it):
    a Verdict with, per test file, the test functions it defines whose every collected case passed."""
    collected = next((fact["collected"] for fact in facts if "collected" in fact), None)
    outcomes = {fact["test"]: fact["outcome"] for fact in facts if "test" in fact and fact["outcome"] != "passed"}
    outcomes.update({fact["test"]: "passed" for fact in facts if fact.get("when") == "call"
                     and fact["outcome"] == "passed" and fact["test"] not in outcomes})
    passing = count_passing(outcomes, collected or (), tests, files)
    if not tests:
        return Verdict()
    if code is None:
        return Verdict(Failure.TESTS_TIMEOUT, output=output, passing=passing)
    if "failed" in outcomes.values() or (code not in (0, 5) and collected is not None):
        return Verdict(Failure.TESTS, contract_broken(outcomes), output.replace(CONTRACT, SEEDS_CONTRACT), passing,
                       failed=tuple(sorted(test for test, outcome in outcomes.items() if outcome == "failed")))
    finished = next((fact["finished"] for fact in facts if "finished" in fact), None)
    expected = sum(len(source.defined_tests(files[rel])) for rel in tests if rel in files)
    why = ("pytest ended before it collected the tests" if collected is None else
           "pytest ended before its session finished" if finished is None else
           f"pytest collected no tests, where the test files define {expected}" if not collected and expected else
           f"pytest reported {len(outcomes)} of the {len(collected)} tests it collected"
           if set(collected) - outcomes.keys() else "")
    if why:
        return Verdict(Failure.TESTS_UNREPORTED, f"{why} (exit {code})", output, passing)
    return Verdict(passing=passing)


def contract_broken(outcomes):
    """The rules of the seed's contract that failed, in words the model can act on ('' when none did): the
    contract is the keeper's file, which the model never sees, and its tests' names say the rules."""
    rules = [re.sub(r"\[.*\]$", "", test.split("::")[-1]).removeprefix("test_").replace("_", " ")
             for test, outcome in outcomes.items() if test.startswith(f"{CONTRACT}::") and outcome != "passed"]
    return f"{SEED_BROKEN}: {'; '.join(dict.fromkeys(rules))}" if rules else ""


def count_passing(outcomes, collected, tests, files):
    """{test file: how many of the test functions its source defines passed}: a function counts once, however many
    cases pytest made of it, and only when each one it collected passed."""
    cases = {}
    for test in collected:
        path, name = source.key_of(test)
        if path in files and path != CONTRACT and name in source.defined_tests(files[path]):
            cases.setdefault((path, name), []).append(outcomes.get(test) == "passed")
    passing = {rel: 0 for rel in tests if rel != CONTRACT}
    for (path, _), passed in cases.items():
        if path in passing and all(passed):
            passing[path] += 1
    return passing


def seed_and_its_modules(files):
    """seed.py and the files it imports, directly or not, in the candidate or deleted by the change: a change to one
    of them runs the contract."""
    found, queue = set(), ["seed.py"]
    while queue:
        rel = queue.pop()
        if rel in found:
            continue
        found.add(rel)
        if rel not in files:
            continue  # one the change deleted, or an installed package's name
        for top in imported_tops(files[rel]):
            queue += [f"{top}.py", f"{top}/__init__.py"] + [rel for rel in files if rel.startswith(f"{top}/")
                                                              and rel.endswith(".py")]
    return found


@lru_cache(maxsize=4096)
def imported_tops(sha):
    """The top names a module imports absolutely, but the standard library's (none when it does not parse): by
    its content, once (the seed is read at every gate, and changes seldom)."""
    tree = selection.tree_of(sha) or ast.Module(body=[], type_ignores=[])
    imports = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]  # one walk of the tree
    names = [a.name for n in imports if isinstance(n, ast.Import) for a in n.names]
    names += [n.module for n in imports if isinstance(n, ast.ImportFrom) and n.module and not n.level]
    return frozenset(name.split(".")[0] for name in names) - set(sys.stdlib_module_names)


def compile_error(rel, sha):
    """Why a .py file does not compile, or ''. Too large a file is not compiled here: it fails."""
    path = object_path(sha)
    if path.stat().st_size > 8 << 20:
        return f"{rel}: larger than 8 MB, too large to be code"
    if selection.tree_of(sha) is None:  # the tree every later reader uses: it must read, wherever it is read from
        return f"{rel}: it does not parse here (not Python, or nested deeper than Python reads)"
    try:
        compile(path.read_bytes(), rel, "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        return f"{rel}: {type(error).__name__}: {error}"
    return ""
