"""zygote: the gate's check program and the seed's run started from a preloaded process (preloaded.py) instead of
a fresh interpreter.

    child = start(command, rules, cwd, env, pass_fds)   # as terrarium.launched: a Popen, or a Candidate like one
    terrarium.run_bounded(command, env, timeout, rules, cwd=..., pass_fds=..., start=start)   # gate, iteration

Every candidate's checks used to start two interpreters (the launcher, then `python -P check.py`) and import pytest
again: about 400 ms of CPU of an iteration's 600; the seed's run two more, a third of them importing urllib's ssl.
The zygote is an interpreter started by exec (never forked from the keeper, which has threads and the key in
memory), in START, with a run's environment without a run's settings, that has imported check.py and the seed's
standard modules once (and pytest at the first check); it forks one child per run, which closes every descriptor but
its own, takes the run's environment, confines itself with sandbox.prepare (the same namespaces, relay, Landlock
rules and seccomp filter as a launch, in the same order) and only then reads the model's code (see preloaded.py for
what the runs of one zygote share).

It is used where a launch would make namespaces of its own (rules["isolate"]: Linux with user namespaces) and the
command is check.py's or a script's as terrarium.python starts it (what_runs); everywhere else (macOS, where
sandbox-exec needs an exec; a kernel without user namespaces; SEED_ZYGOTE=0) the launch by exec is used,
unchanged. It is started on first use and started again when it died, when the base environment is not its own,
when sandbox.py, check.py, preloaded.py or pytest's installed files changed on disk (their times, sizes and inodes,
looked at before each run), and after SEED_ZYGOTE runs. A zygote that does not start or answer is told on stderr
once, and the launch is used. The keeper ends it as its run ends (so the CPU time of its runs is counted in the
keeper's children's), and sandbox.end_descendants leaves it (sandbox.KEPT): each run ends with its own PID
namespace.
"""
import json
import os
import select
import signal
import socket
import subprocess
import sys
from pathlib import Path

from . import sandbox
from ..settings import ZYGOTE
from .terrarium import CODEBASE_LAST, clean_env, launched

PRELOADED = Path(__file__).with_name("preloaded.py")
CHECK = Path(__file__).with_name("check.py")
STARTUP_SECONDS = 60    # the longest the zygote may take to start, or to import pytest (on a loaded machine)
ANSWER_SECONDS = 10     # the longest it may take to fork a candidate
REQUEST_BYTES = 1 << 20  # as preloaded.py reads at most
CHECKS, SCRIPT = b"C", b"S"  # a request's first byte, as preloaded.py reads it
current = None          # the running Zygote, or None
refused = []            # why the zygote could not be used, once told


class Zygote:
    """One preloaded process: started by exec, talked to over a SOCK_SEQPACKET socket pair."""

    def __init__(self, env):
        self.env, self.served, self.checked = dict(env), 0, False
        self.channel, far = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.channel.set_inheritable(False)
        self.process = subprocess.Popen([sys.executable, "-P", str(PRELOADED), str(far.fileno())], cwd=sandbox.START,
                                        env=self.env, pass_fds=(far.fileno(),), stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        far.close()
        sandbox.KEPT.add(self.process.pid)
        hello = self.answer(STARTUP_SECONDS)
        self.watched = json.loads(hello)["watch"] + [str(CHECK), str(PRELOADED), sandbox.__file__]
        self.stamps = stamps(self.watched)

    def answer(self, seconds):
        """The zygote's next message; OSError when it sends none in time or is gone."""
        if not select.select([self.channel], [], [], seconds)[0]:
            raise OSError("the zygote did not answer in time")
        data = self.channel.recv(REQUEST_BYTES)
        if not data:  # what it said last (an error's own line, after its traceback)
            said = self.process.stderr.read(REQUEST_BYTES).decode(errors="replace").strip().splitlines()
            raise OSError(f"the zygote ended: {said[-1].strip()[:300] if said else 'it said nothing'}")
        return data

    def fresh(self, env):
        """Whether it may serve the next candidate as it is."""
        return self.process.poll() is None and env == self.env and self.served < ZYGOTE and \
            stamps(self.watched) == self.stamps

    def fork(self, run, rules, cwd, env, pass_fds):
        """A Candidate: `run` (what_runs of its command), confined by `rules`, in `cwd`, with the environment `env`,
        given pass_fds at their numbers."""
        out, write_end = os.pipe()
        request = json.dumps({**run, "policy": rules, "folder": os.fspath(cwd), "env": env, "fds": list(pass_fds)})
        kind, first = (CHECKS, not self.checked) if "check" in run else (SCRIPT, False)  # the first check: pytest
        try:                                                                              # is imported before it
            socket.send_fds(self.channel, [kind + request.encode()], [write_end, *pass_fds])
        finally:
            os.close(write_end)
        self.served, self.checked = self.served + 1, self.checked or first
        word, pid = self.answer(STARTUP_SECONDS if first else ANSWER_SECONDS).split()
        return Candidate(self, int(pid), os.fdopen(out, "rb"))

    def close(self):
        """End it: its socket closed, it ends (and kills a candidate still running); wait for it."""
        sandbox.KEPT.discard(self.process.pid)
        self.channel.close()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process.stderr.close()


class Candidate:
    """A candidate's child, as run_bounded uses a Popen: pid (its group's too), stdout, poll(), wait(), kill()."""

    def __init__(self, zygote, pid, stdout):
        self.zygote, self.pid, self.stdout, self.returncode = zygote, pid, stdout, None

    def poll(self):
        if self.returncode is None and select.select([self.zygote.channel], [], [], 0)[0]:
            self.told()
        return self.returncode

    def wait(self, timeout=None):
        if self.returncode is None:
            if not select.select([self.zygote.channel], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired("candidate", timeout)
            self.told()
        return self.returncode

    def told(self):
        """Read the zygote's word of the candidate's end; a zygote gone counts as the candidate killed."""
        try:
            word, pid, status = self.zygote.answer(0).split()
            self.returncode = os.waitstatus_to_exitcode(int(status))
        except (OSError, ValueError):
            self.returncode = -signal.SIGKILL

    def contained(self):
        """Whether nothing it started can be left once it ended: all ran in its PID namespace, which ends with its
        init, or below the zygote (its relay and init, killed as it ends, are the zygote's to reap), as long as the
        zygote lives to hold them."""
        return self.zygote.process.poll() is None

    def kill(self):
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except OSError:
            pass


def stamps(paths):
    """(size, mtime, ctime, inode) of each path (a folder's change when a file in it is added or replaced)."""
    found = []
    for path in paths:
        try:
            info = os.stat(path)
            found.append((info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino))
        except OSError:
            found.append(None)
    return found


def start(command, rules, cwd, env, pass_fds=()):
    """The run of `command`: forked by the zygote when it is check.py's or a script's as terrarium.python starts it
    and the run would have namespaces of its own; else (or when the zygote fails) started by exec as ever
    (terrarium.launched)."""
    global current
    run = what_runs(command)
    if not usable(run, rules, env):
        return launched(command, rules, cwd, env, pass_fds)
    try:
        base = clean_env()  # the zygote's own: a run's environment without a run's settings
        if current is not None and not current.fresh(base):
            current.close()
            current = None
        if current is None:
            current = Zygote(base)
        return current.fork(run, rules, cwd, env, pass_fds)
    except (OSError, ValueError) as error:
        if current is not None:
            current.close()
            current = None
        if not refused:
            refused.append(str(error))
            print(f"the preloaded process cannot be used ({error}): each run starts its own interpreters",
                  file=sys.stderr)
        return launched(command, rules, cwd, env, pass_fds)


def what_runs(command):
    """What the zygote's child is to run for `command`: {"check": check.py's arguments}, {"script": [the folder put
    last on the module path, the script, its arguments]}, or None when the zygote does not run it."""
    if command[:3] == [sys.executable, "-P", str(CHECK)]:
        return {"check": command[3:]}
    if command[:4] == [sys.executable, "-P", "-c", CODEBASE_LAST] and len(command) >= 6:
        return {"script": command[4:]}
    return None


def usable(run, rules, env):
    """Whether a run may be forked by the zygote rather than launched."""
    return ZYGOTE > 0 and not refused and sys.platform.startswith("linux") and rules["isolate"] and run is not None \
        and len(json.dumps([run, rules, env])) < REQUEST_BYTES // 2


def stop():
    """End the zygote as the keeper ends (fallback.run; a process that ends otherwise closes its channel, and the
    zygote ends with it)."""
    global current
    if current is not None:
        current.close()
        current = None
