"""preloaded: the zygote, a process that has imported the gate's check program, the standard modules the seed imports
and (at the first check) pytest once, and forks one child per run (a candidate's checks, or the seed's run), which
confines itself as a launch does and only then reads the model's code (zygote.py starts it and talks to it).

    python -P preloaded.py CONTROL       # CONTROL: its end of a SOCK_SEQPACKET pair with the keeper

It is started by exec, in START ("/"), with a run's environment without a run's settings (terrarium.clean_env():
never the keeper's, no key and no run's token is in its memory) and -P: nothing of the model's is on its path or
read while it starts. It loads sandbox.py and check.py by their paths beside it, imports SEEDS_IMPORTS, freezes what
it holds out of the garbage collector's reach (gc.freeze: no child copies it by collecting), tells the keeper the
files whose change must restart it, and waits. The first request for a check (its first byte says which kind it is)
has it import pytest and every plugin pytest loads by default, frozen too, before it forks: a keeper whose runs all
end before the gate never imports them. For each request (what to run: check.py's arguments, or a script as
terrarium.python starts it; the policy, the folder, the run's environment, and the descriptors: the output's write
end, then those the run is given, at the numbers the keeper had them) it forks a child that:
- makes a session of its own (the keeper ends its group as it ends a launch's), puts the output on 1 and 2 and
  /dev/null on 0, moves the given descriptors to their numbers, and closes every other (the control socket too);
- takes the run's environment as its own (and with PYTHONUNBUFFERED, unbuffered output, as -u gives);
- runs sandbox.prepare: the rlimits, a new user, PID, mount, network, IPC, UTS and cgroup namespace of its own (the
  run is PID 2 under an init of its own, in a /proc of its own; a relay outside to the gateway when the policy
  names one), no_new_privs, Landlock, the working folder, and the seccomp filter last; the same code, in the same
  order, as a launch before its exec;
- then, confined, runs check.main, or the script as __main__ with the folder last on the module path, and ends
  with os._exit: the check once the verdict is told (its atexit hooks do not run); the script as the interpreter
  ends one (its threads waited for, its atexit hooks run, its output flushed) but for the modules' teardown.
The zygote tells the keeper the child's PID, then its wait status, leaving it a zombie until the next request (so
its PID and group cannot be reused while the keeper still may kill them); it never reads what the child wrote. It is
the subreaper of what a child leaves outside its namespaces (its relay, its init once it is killed: SIGKILLed as the
child ends), and reaps them at the next request and before it ends, so the keeper, which does not look for them
after a zygote's run, is left no zombie. A run's SystemExit ends it with the code the interpreter gives (exit_code).
What a child can reach of the zygote: no descriptor (closed), no PID (another PID namespace), no ptrace (seccomp),
no signal (Landlock's scope, and the PID namespace). What the runs of one zygote share: the zygote's memory as it
was after start-up (the standard library, check.py and, once a check was asked for, pytest, imported), so the hash
seed (str and bytes hashes, set iteration order) is one per zygote, not one per run; nothing a run changes (modules,
files it writes, processes) reaches the next, which is forked from the zygote again. A request (the seed's carries
its run's token) is read into a buffer the zygote clears once the child has it, and only the child parses it: no
later run finds an earlier run's token in the memory it is forked with. When the keeper goes, its end of the socket
closes: the zygote kills the running child's group and ends.
"""
import array
import atexit
import contextlib
import fcntl
import gc
import importlib
import importlib.util
import io
import json
import os
import runpy
import select
import signal
import socket
import sys
import tempfile
import threading
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REQUEST_BYTES = 1 << 20  # the largest request read (a policy and check.py's arguments)
MOST_FDS = 8            # descriptors a request may carry
PYTEST_PACKAGES = ("pytest", "_pytest", "pluggy")  # whose installed files changing must restart the zygote
CHECKS = b"C"  # a request's first byte for the gate's check program, which needs pytest (a script's is b"S")
SEEDS_IMPORTS = ["json", "re", "pathlib", "urllib.request"]  # the standard modules the genesis seed imports (a
# third of its launch was importing them); a script imports anything else itself


def load(name):
    """A module of the keeper's beside this file, by its path (the keeper's package is never on the path)."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(control):
    """Start up once, then serve candidates until the keeper closes its end."""
    channel = socket.socket(fileno=control)
    sandbox, check = load("sandbox"), load("check")
    for name in SEEDS_IMPORTS:
        importlib.import_module(name)
    watched = [os.path.join(HERE, f"{name}.py") for name in ("sandbox", "check", "preloaded")]
    watched += [os.path.dirname(importlib.util.find_spec(name).origin) for name in PYTEST_PACKAGES]  # not imported
    channel.send(json.dumps({"watch": watched}).encode())
    sandbox.become_subreaper()  # what a child leaves outside its namespaces (its relay; its init, once it is killed)
    settle()                    # is the zygote's to reap, never the keeper's, which no longer looks for it
    last, request = None, bytearray(REQUEST_BYTES)  # read into, and cleared once the child has it: the zygote parses
    while True:                                       # no request, and keeps no run's token for a later run to find
        size, fds = receive(channel, request)
        if size and request[:1] == CHECKS and "pytest" not in sys.modules:
            preload_pytest()
        if last:
            os.waitpid(last, 0)  # the previous candidate's zombie, kept until now
            last = None
        sandbox.reap()  # and what it left that has ended since (no candidate runs now)
        if not size:  # the keeper is done: what the last run left (killed as it ended) is reaped before the zygote ends
            with contextlib.suppress(ChildProcessError):
                while True:
                    os.wait()
            return
        pid = os.fork()
        if pid == 0:
            candidate(channel, fds, request[1:size], sandbox, check)
        request[:size] = bytes(size)
        for fd in fds:
            os.close(fd)
        channel.send(f"started {pid}".encode())
        channel.send(f"ended {pid} {wait(pid, channel)}".encode())
        last = pid


def preload_pytest():
    """pytest and every plugin pytest.main would import for each candidate, imported once, at the first check: a
    keeper whose runs end before the gate (a crash, a hang, a refused answer) never pays for them."""
    importlib.import_module("pytest")
    for name in importlib.import_module("_pytest.config").default_plugins:
        importlib.import_module(f"_pytest.{name}")
    settle()


def settle():
    """What the zygote holds now, frozen out of the garbage collector's reach: no child copies it by collecting."""
    gc.collect()
    gc.freeze()


def receive(channel, buffer):
    """Read the next request into `buffer` (as socket.recv_fds, but into memory the zygote clears): its size, and the
    descriptors it carries."""
    fds = array.array("i")
    size, ancillary, _, _ = channel.recvmsg_into([buffer], socket.CMSG_LEN(MOST_FDS * fds.itemsize))
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
    return size, list(fds)


def wait(pid, channel):
    """The candidate's wait status once it ends, leaving it a zombie; if the keeper goes meanwhile, its group is
    killed and the zygote ends."""
    ended = os.pidfd_open(pid)
    try:
        while True:
            ready = select.select([ended, channel], [], [])[0]
            if ended in ready:
                return status_of(pid)
            if not channel.recv(1, socket.MSG_PEEK):  # the keeper is gone
                os.killpg(pid, signal.SIGKILL)
                os._exit(0)
    finally:
        os.close(ended)


def status_of(pid):
    """The wait status of an ended child, as waitpid gives it, without reaping it (waitid with WNOWAIT)."""
    info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    if info.si_code == os.CLD_EXITED:
        return (info.si_status & 0xFF) << 8
    return info.si_status & 0x7F  # killed or dumped: the signal's number


def candidate(channel, fds, data, sandbox, check):
    """The forked child: descriptors and environment set, confined as a launch is, then the check program or the
    script; never returns."""
    code, request = 1, {}
    try:
        request = json.loads(data)
        os.setsid()
        channel.detach()
        keep = descriptors(fds, request["fds"])
        closing = sorted({int(name) for name in os.listdir("/proc/self/fd")} - keep)
        for fd in closing:  # the control socket and anything else the zygote held; the listing's own is gone already
            try:
                os.close(fd)
            except OSError:
                pass
        os.environ.clear()  # the run's own, as a launch is given it (the zygote's holds no token of any run)
        os.environ.update(request["env"])
        if os.environ.get("PYTHONUNBUFFERED"):  # as -u makes them: every write reaches the keeper at once
            sys.stdout, sys.stderr = (io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), encoding=stream.encoding,
                                                       errors=stream.errors, write_through=True)
                                      for fd, stream in ((1, sys.stdout), (2, sys.stderr)))
        sandbox.prepare(request["policy"], request["folder"], [sys.executable])
        tempfile.tempdir = None  # TMPDIR is the run's now: found again
        if "script" in request:
            code = script(*request["script"])
        else:
            sys.argv = [os.path.join(HERE, "check.py"), *request["check"]]
            check.__spec__ = None  # the main module, as `python check.py` has it: multiprocessing's spawn and
            sys.modules["__main__"] = check  # forkserver start their children from its path
            code = check.main(request["check"])
    except SystemExit as exited:
        code = exit_code(exited.code)
    except BaseException:  # what the program itself does not catch, as an uncaught error is told
        traceback.print_exc()
    finally:
        try:
            if "script" in request:  # what the interpreter's end does for a script but the modules' teardown
                threading._shutdown()  # waits for its threads that are not daemons
                atexit._run_exitfuncs()
        finally:  # whatever the script made of those: the child never returns into the zygote's loop
            check.end(code)


def exit_code(value):
    """The code the interpreter ends with on SystemExit(value): None is 0; a number is its own, as a C long has it
    (-1 beyond one), never what a subclass of int makes of it; anything else is printed, and 1."""
    if value is None:
        return 0
    if isinstance(value, int):
        number = int.__index__(value)
        return number if -(1 << 63) <= number < 1 << 63 else -1
    print(value, file=sys.stderr)
    return 1


def script(folder, path, *args):
    """Run the script at `path` as `python -P -c CODEBASE_LAST folder path args` does (terrarium.python): `folder`
    last on the module path, the script as __main__; its exit code."""
    sys.path.append(folder)
    sys.argv = [path, *args]
    runpy.run_path(path, run_name="__main__")
    return 0


def descriptors(fds, numbers):
    """Put the output (fds[0]) on 1 and 2, /dev/null on 0, and each other of fds at its number in `numbers` (as the
    keeper had it); the set of descriptors kept."""
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, max([2, *numbers]) + 1) for fd in fds]  # above them: none overwritten
    for fd in fds:
        os.close(fd)
    quiet = os.open(os.devnull, os.O_RDONLY)
    os.dup2(quiet, 0)
    os.dup2(high[0], 1)
    os.dup2(high[0], 2)
    for fd, number in zip(high[1:], numbers):
        os.dup2(fd, number)
    return {0, 1, 2, *numbers}


if __name__ == "__main__":
    main(int(sys.argv[1]))
