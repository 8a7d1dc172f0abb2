"""check: the gate's check program, run by its path in one confined child in the judged copy (gate.run_checks).

    python -P check.py ROOT FACTS TOKEN PARTS SECONDS MODULE... -- TEST...    the gate's child
    python -P check.py --part ROOT FACTS TOKEN BASETEMP TEST...               one part of its tests

The codebase's top-level modules import, then pytest runs over the tests under the keeper's configuration (`-c
/dev/null`: no ini file or addopts of the model's) with the keeper's plugin, which tells each outcome as it
happens. What it tells goes to the keeper's pipe (descriptor FACTS), each line signed with a token read once from
descriptor TOKEN: neither is a module global, the pipe is closed in every program the tests start, and a line
without the token is someone else's. The plugin also tells where the tests reached into pytest itself: a hook
outside what a model's conftest.py may implement, a plugin the model's code registered, pytest's own code changed.
Each test runs in a temporary folder of its own that links to the copy's top-level entries. On two cores or more
the gate may ask for PARTS processes at once (SECONDS each at most): only a clean pass there is told; anything else
runs again in this one process, whose verdict counts. Imports only the standard library,
and pytest when there are tests: nothing of the model's, and nothing of the keeper's.

The channel's other end is here too, the keeper's: `listen(run)` gives a child the pipe and the token, and reads
back what was signed (gate.py and evaluate.py hear their children through it).
"""
import json
import os
import sys
import tempfile
import threading
import types
from typing import NamedTuple

CONFTEST_HOOKS = frozenset({"pytest_addoption", "pytest_assertrepr_compare"})  # a model's conftest.py may implement
# these of pytest's hooks, undecorated: they add options and explain a failed assert, and change nothing collected,
# run or reported (every other hook is given the config, the session or the items, and can)
SHAPES = [{"imported"}, {"collected"}, {"test", "when", "outcome"}, {"finished"}, {"tampered"}, {"said"}]  # facts told
TYPES = {"imported": bool, "collected": list, "test": str, "when": str, "outcome": str, "finished": int,
         "tampered": str, "said": str}
IMPORT_FAILED = 97
HERE = "keeper-here-"  # how the folders each test runs in are named, in the run's temporary folder
PYTEST_OWN = ("_pytest", "pytest", "pluggy")  # the packages whose code is pytest's own
FACTS_BYTES = 8 << 20  # the most of the plugin's report read (about 80,000 tests)


def main(argv):
    """The gate's child: the modules import, then pytest runs over the tests (one interpreter start-up, not two)."""
    if argv[0] == "--part":
        return part(*argv[1:5], argv[5:])
    root, facts, token, parts, seconds = argv[:5]
    modules, tests = argv[5:argv.index("--")], argv[argv.index("--") + 1:]
    tell = teller(int(facts), int(token))
    pristine = Pristine() if tests else None  # pytest's code as installed, before any of the model's runs
    sys.path.append(root)
    if not imported(modules):
        return IMPORT_FAILED
    tell(imported=True)
    print("the modules import", flush=True)
    if tests and int(parts) > 1 and in_parts(root, tests, int(parts), int(seconds), tell):
        return 0
    code = run_tests(root, tests, tell, pristine) if tests else 0
    if tests and int(parts) > 1:
        print(f"(the tests ran first in {parts} parts at once, and one did not pass: the verdict is this run's, "
              "in one process)")
    return code


def part(root, facts, token, basetemp, tests):
    """One part of the tests, in a process, a temp folder and a pipe of its own: its exit code."""
    tell = teller(int(facts), int(token))
    pristine = Pristine()
    sys.path.append(root)
    return run_tests(root, tests, tell, pristine, basetemp)


def imported(modules):
    """Whether the codebase's top-level modules import (the traceback printed if not)."""
    import importlib
    import traceback
    try:
        for name in modules:
            importlib.import_module(name)
    except BaseException:
        traceback.print_exc()
        return False
    return True


# --- the keeper's channel -------------------------------------------------------------------------
def teller(fd, token_fd):
    """`tell(**fact)`: one line on the keeper's pipe `fd`, signed with the token read (once) from token_fd."""
    with os.fdopen(token_fd, "rb") as source:
        token = source.read(64).strip()
    os.set_inheritable(fd, False)  # a process the tests start gets no copy of it
    write, dumps = os.write, json.dumps  # as they are now: what the model's code replaces later is not used here

    def tell(**fact):
        data = b"\n" + token + b" " + dumps(fact).encode() + b"\n"  # the newline first ends a line someone left open
        while data:
            data = data[write(fd, data):]
    return tell


def token_pipe():
    """(a new token, the read end of a pipe that holds it): what a child reads once to sign what it tells."""
    token = os.urandom(16).hex().encode()
    read_end, write_end = os.pipe()
    os.write(write_end, token)
    os.close(write_end)
    return token, read_end


class Heard(NamedTuple):
    facts: list  # what the child's plugin told, signed with the token
    foreign: int  # how many other lines came on its pipe


def listen(run):
    """Run `run(fd, token_fd)` with the write end of a pipe and a descriptor holding the token its lines must carry:
    (Heard, what run returned). A channel of the keeper's own: a child's output is not read for a verdict."""
    token, token_end = token_pipe()
    read_end, write_end = os.pipe()
    lines = []

    def drain():
        with os.fdopen(read_end, "rb") as pipe:
            lines.extend(pipe.read(FACTS_BYTES).splitlines())
    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        result = run(write_end, token_end)
    finally:
        os.close(write_end)
        os.close(token_end)
    reader.join(5)
    return Heard(*signed(lines, token)), result


def signed(lines, token):
    """(the facts among `lines` signed with `token`, in order; how many other lines there were, not empty)."""
    facts, foreign = [], 0
    for line in lines:
        stamp, _, text = line.strip().partition(b" ")
        if not stamp:
            continue
        try:
            fact = json.loads(text) if stamp == token else None
        except ValueError:
            fact = None
        if isinstance(fact, dict) and set(fact) in SHAPES and all(type(fact[k]) is TYPES[k] for k in fact) and \
                all(isinstance(test, str) for test in fact.get("collected", ())):
            facts.append(fact)
        else:
            foreign += 1
    return facts, foreign


# --- pytest with the keeper's plugin -------------------------------------------------------------
def run_tests(root, tests, tell, pristine, basetemp=None):
    """pytest under the keeper's configuration over `tests`, each outcome told as it happens; its exit code."""
    import pytest
    return pytest.main(["-c", os.devnull, "--rootdir", root, "--confcutdir", root, "-q", "-x", "--tb=short", "-rN",
                        "-p", "no:cacheprovider", "--import-mode=append",
                        *(["--basetemp", basetemp] if basetemp else []), *tests],
                       plugins=[keeper(root, tell, pristine)])


def keeper(root, tell, pristine):
    """The keeper's plugin: it tells the collection, each test's outcome, the session's end, and every way the code
    it runs reached into pytest (each once)."""
    import pytest
    audit = Audit(root, tell, pristine)

    class Keeper:
        @pytest.fixture(autouse=True)
        def keeper_folder(self):
            """Each test runs in a temporary folder of its own holding a link to each top-level entry of the copy:
            what it reads where it stands is the codebase's, and a new file it writes there (notes.json: small
            models' tests do) is its own, not refused by the read-only copy. The links go with the test (and the
            gate takes away those of a test whose process ended first: unlink_folders)."""
            folder = tempfile.mkdtemp(prefix=HERE)  # in the run's temporary folder (TMPDIR)
            links = [os.path.join(folder, name) for name in os.listdir(root)]
            for link in links:
                os.symlink(os.path.join(root, os.path.basename(link)), link)
            os.chdir(folder)
            yield
            os.chdir(root)
            unlink_folder(folder, links)

        @pytest.hookimpl(trylast=True)
        def pytest_collection_finish(self, session):
            audit.everything(session.config.pluginmanager)
            tell(collected=[item.nodeid for item in session.items])

        @pytest.hookimpl(hookwrapper=True, tryfirst=True)
        def pytest_runtest_makereport(self, item, call):
            report = (yield).get_result()
            if call.when == "call":  # a plugin is judged as it registers; this finds one that did not register
                audit.hooks(item.config.pluginmanager)
            if call.when == "call" or report.outcome != "passed":  # a test marked to fail never counts as passing
                raised = call.excinfo is not None and not call.excinfo.errisinstance(pytest.skip.Exception)
                outcome = "xfailed" if hasattr(report, "wasxfail") else "failed" if raised else report.outcome
                tell(test=item.nodeid, when=call.when, outcome=outcome)

        def pytest_plugin_registered(self, plugin, manager):
            audit.plugin(plugin, manager)

        def pytest_sessionfinish(self, session, exitstatus):
            audit.everything(session.config.pluginmanager)
            tell(finished=int(exitstatus))

    audit.keeper = Keeper()
    return audit.keeper


class Audit:
    """Where the code the tests run reached into pytest: every hook implementation is pytest's own, the keeper's,
    or one of CONFTEST_HOOKS in a conftest.py of the judged copy; pytest's own code is as it was installed."""

    def __init__(self, root, tell, pristine):
        self.root, self.tell, self.pristine, self.keeper = os.path.realpath(root), tell, pristine, None
        self.judged, self.told = set(), set()  # the implementations judged, the findings told

    def everything(self, manager):
        self.hooks(manager)
        for where in self.pristine.changed():
            self.once(f"pytest's own code was changed while the tests ran: {where}")

    def hooks(self, manager):
        """Every implementation of every hook, judged once."""
        for name, caller in list(vars(manager.hook).items()):
            for impl in caller.get_hookimpls():
                if impl not in self.judged:
                    self.judge(name, impl)

    def plugin(self, plugin, manager):
        """A plugin as it is registered (before it is ever called)."""
        for caller in manager.get_hookcallers(plugin) or ():
            for impl in caller.get_hookimpls():
                if impl.plugin is plugin and impl not in self.judged:
                    self.judge(caller.name, impl)

    def judge(self, hook, impl):
        self.judged.add(impl)
        where = source_of(impl.function)
        if impl.plugin is self.keeper or where.startswith(self.pristine.own) or self.conftests(hook, impl, where):
            return
        self.once(f"{hook} is implemented by {shown(where, self.root)} ({impl.plugin_name}), where a model's code may "
                  f"implement only {', '.join(sorted(CONFTEST_HOOKS))}, in a conftest.py")

    def conftests(self, hook, impl, where):
        """Whether an implementation is one a conftest.py of the judged copy may have: a plain function of its own."""
        return hook in CONFTEST_HOOKS and os.path.basename(where) == "conftest.py" and \
            where.startswith(self.root + os.sep) and os.path.realpath(getattr(impl.plugin, "__file__", "")) == where \
            and not impl.hookwrapper and not getattr(impl, "wrapper", False)

    def once(self, finding):
        if finding not in self.told:
            self.told.add(finding)
            self.tell(tampered=finding)


def unlink_folders(temp):
    """Take away the links in every test's folder in the temporary folder `temp` (the gate does, when its checks
    have ended: a test whose process ended early left its own), never following one (the tests wrote there)."""
    try:
        top = os.open(temp, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        for name in [entry.name for entry in os.scandir(top) if entry.name.startswith(HERE)]:
            try:
                fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=top)
            except OSError:
                continue
            try:
                for entry in os.scandir(fd):
                    if entry.is_symlink():
                        os.unlink(entry.name, dir_fd=fd)
            finally:
                os.close(fd)
    finally:
        os.close(top)


def unlink_folder(folder, links):
    for link in links:
        if os.path.islink(link):
            os.unlink(link)


def source_of(function):
    """The real path of the file a function's code says it came from ('' for code that has none)."""
    code = getattr(getattr(function, "__func__", function), "__code__", None)
    return os.path.realpath(code.co_filename) if code is not None else ""


def shown(path, root):
    return os.path.relpath(path, root) if path.startswith(root + os.sep) else path or "code with no file"


class Pristine:
    """pytest's own functions, classes and methods, and the code of each function, as imported: changed() names those
    the code run since has replaced with code that is not pytest's (pytest's plugins patch some of pytest's own)."""

    def __init__(self):
        import _pytest
        import pluggy
        import pytest
        self.own = tuple(os.path.dirname(os.path.realpath(m.__file__)) + os.sep for m in (_pytest, pytest, pluggy))
        self.functions, self.others = [], []
        for name, module in list(sys.modules.items()):
            if name.partition(".")[0] in PYTEST_OWN and module is not None:
                self.remember(name, vars(module))
                for kind in list(vars(module).values()):
                    if isinstance(kind, type) and kind.__module__ == name:
                        self.remember(f"{name}.{kind.__name__}", vars(kind))

    def remember(self, module, space):
        for name, value in list(space.items()):
            if type(value) is types.FunctionType:
                self.functions.append((space, f"{module}.{name}", name, value, value.__code__))
            elif isinstance(value, (type, classmethod, staticmethod, property)):
                self.others.append((space, f"{module}.{name}", name, value))

    def changed(self):
        changed = [(where, space.get(name)) for space, where, name, value, code in self.functions
                   if space.get(name) is not value or value.__code__ is not code]
        changed += [(where, space.get(name)) for space, where, name, value in self.others
                    if space.get(name) is not value]
        return [where for where, now in changed if not self.is_own(now)]

    def is_own(self, value):
        """Whether a value is pytest's own code (a function of its files, a class of its modules)."""
        if isinstance(value, type):
            return value.__module__.partition(".")[0] in PYTEST_OWN
        function = getattr(value, "__func__", None) or getattr(value, "fget", None) or value
        return source_of(function).startswith(self.own)


# --- the tests in parts --------------------------------------------------------------------------
def in_parts(root, tests, parts, seconds, tell):
    """The tests dealt in turn into `parts` processes at once, for `seconds` at most. True when each ran to its end
    with no failure (their facts are then told as one run's), or one was tampered with (that is told); else False,
    and they all run again in this one process, whose verdict counts (a part may have failed only beside another)."""
    import subprocess
    import tempfile
    import threading
    import time
    runs, readers, heard = [], [], [{"facts": [], "foreign": 0} for _ in range(parts)]
    for n in range(parts):
        run, read_end, token = start_part(root, os.path.join(tempfile.gettempdir(), f"part{n}"), tests[n::parts])
        runs.append(run)
        readers.append(threading.Thread(target=drain, args=(read_end, token, heard[n], runs), daemon=True))
        readers[-1].start()
    deadline = time.monotonic() + seconds
    try:
        for run in runs:
            run.wait(max(0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        for run in runs:
            run.kill()
    codes = [run.wait() for run in runs]
    end_groups(runs)
    read_by = time.monotonic() + 2  # a process a part left may hold its pipe open: what the part wrote is read by then
    for reader in readers:
        reader.join(max(0, read_by - time.monotonic()))
    return told_as_one(codes, [list(part["facts"]) for part in heard], sum(part["foreign"] for part in heard), tell)


def start_part(root, basetemp, tests):
    """One part: its own process group, its own temp folder, its own pipe and token."""
    import subprocess
    token, token_end = token_pipe()
    read_end, write_end = os.pipe()
    run = subprocess.Popen([sys.executable, "-P", os.path.abspath(__file__), "--part", root, str(write_end),
                            str(token_end), basetemp, *tests], pass_fds=(write_end, token_end),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, process_group=0)
    os.close(write_end)
    os.close(token_end)
    return run, read_end, token


def drain(read_end, token, heard, runs):
    """Read a part's pipe into `heard` (its facts, and how many lines were not signed); at a failure, stop them all."""
    with os.fdopen(read_end, "rb") as pipe:
        for line in pipe:
            facts, foreign = signed([line], token)
            heard["foreign"] += foreign
            heard["facts"].extend(facts)
            if any(fact.get("outcome") == "failed" for fact in facts):
                for run in runs:  # fail fast: the other parts are stopped
                    run.kill()


def end_groups(runs):
    """What a part left (a server of a test killed before its teardown) is gone before one process runs."""
    import signal
    for run in runs:
        try:
            os.killpg(run.pid, signal.SIGKILL)
        except OSError:
            pass


def told_as_one(codes, heard, foreign, tell):
    """Tell the parts' facts as one run's, each part's first collection only, as one process's verdict takes it (a
    later one can only be a test's). True when that is the verdict: a clean pass, or what was tampered with."""
    tampered = [fact["tampered"] for part in heard for fact in part if "tampered" in fact]
    tampered += [f"{foreign} line(s) on a part's pipe that the keeper's plugin did not write"] if foreign else []
    for finding in tampered:
        tell(tampered=finding)
    whole = all(code in (0, 5) and any("collected" in f for f in part) and any("finished" in f for f in part)
                and not any(f.get("outcome") == "failed" for f in part) for code, part in zip(codes, heard))
    if tampered or not whole:
        return bool(tampered)
    tell(collected=[test for part in heard for test in next(f["collected"] for f in part if "collected" in f)])
    for fact in (f for part in heard for f in part if "test" in f):
        tell(**fact)
    tell(finished=min(codes))
    return True


def end(code):
    """End once the verdict is told, without the interpreter's shutdown (tens of ms; the model's atexit hooks would
    run in it, after the verdict): what was printed is flushed first."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    os._exit(code & 255 if isinstance(code, int) else 1)


if __name__ == "__main__":
    end(main(sys.argv[1:]))
