"""The gate's preloaded process (zygote.py, preloaded.py), through real processes: the gate's own run_checks in a
fresh workspace, driven candidate after candidate, each candidate's tests the attack and the check that it failed.
Each property beside its attack: a forked candidate is confined as a launched one; nothing of an earlier candidate
(a module, a file, a variable, a process) reaches the next; no descriptor of the zygote's, no signal or ptrace to it;
the zygote started anew after SEED_ZYGOTE candidates, when its files change, when it dies; a candidate that runs
out of time is ended with all it started; without namespaces, the launch by exec; pytest imported at the first
check only; a zygote that fails told in one line naming its error, and each check launched."""
import json
import os
import socket
import subprocess
import sys
import threading
import uuid

import pytest

from conftest import WITHOUT_NAMESPACES, load_keeper

sandbox = load_keeper("sandbox")
pytestmark = pytest.mark.skipif(not sandbox.isolation()[0], reason="the zygote needs namespaces of the run's own")

DRIVER = r'''import json, os, signal, sys, time
sys.path.insert(0, sys.argv[1])
from supervisor.confined import gate, zygote
from supervisor.store import snapshots


def command_of(pid):
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:  # it ended as /proc was read
        return b""


for step in json.load(open(sys.argv[2])):
    if step == "kill":
        os.kill(zygote.current.process.pid, signal.SIGKILL)
        zygote.current.process.wait()
        continue
    if step == "touch":
        os.utime(os.path.join(sys.argv[1], "supervisor", "confined", "check.py"), ns=(time.time_ns(), time.time_ns() + 10**9))
        continue
    pid = zygote.current.process.pid if zygote.current else 0
    files = {rel: snapshots.store_object(text.replace("ZYGOTE_PID", str(pid)).encode()) for rel, text in step.items()}
    verdict = gate.run_checks(files, False)
    left, gone_by = ["?"], time.monotonic() + 2  # a PID namespace's members end as its init does, a moment after
    while left and time.monotonic() < gone_by:
        left = [p for p in os.listdir("/proc") if p.isdigit() and os.environ["LEFT_MARK"].encode() in command_of(p)]
        time.sleep(0.05 if left else 0)
    pid = zygote.current and zygote.current.process.pid
    spaces = {name: os.readlink(f"/proc/{pid}/ns/{name}") for name in ("user", "pid", "net", "mnt", "ipc")} if pid else {}
    print(json.dumps({"failure": verdict.failure and verdict.failure.value, "output": verdict.output, "zygote": pid,
                      "left": left, "namespaces": spaces}), flush=True)
'''
CALC = {"calc.py": "def add(a, b):\n    return a + b\n",
        "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"}
ATTEMPT = r'''
def attempt(action):
    try:
        action()
        return "allowed"
    except OSError as error:
        return errno.errorcode[error.errno]
'''
PROBE = r'''import errno, json, os, socket, sys

''' + ATTEMPT + r'''


def links():
    found = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            found[fd] = os.readlink(f"/proc/self/fd/{fd}")
        except FileNotFoundError:
            pass  # the listing's own
    return found


def test_probe():
    root = "ROOT"
    seen = {
        "env": attempt(lambda: open(os.path.join(root, ".env")).read()),
        "shadow": attempt(lambda: open("/etc/shadow").read()),
        "write outside": attempt(lambda: open(os.path.join(root, "outside.txt"), "w").close()),
        "host loopback": attempt(lambda: socket.create_connection(("127.0.0.1", PORT), timeout=2).close()),
        "pid": os.getpid(),
        "processes": len([p for p in os.listdir("/proc") if p.isdigit()]),
        "descriptors": sorted(os.listdir("/proc/self/fd")),
        "sockets": [fd for fd, link in links().items() if link.startswith("socket")],
        "status": [line.split()[1] for line in open("/proc/self/status") if line.startswith(("Seccomp:", "NoNewPrivs:"))],
        "namespaces": {name: os.readlink(f"/proc/self/ns/{name}") for name in ("user", "pid", "net", "mnt", "ipc")},
    }
    print("PROBE" + json.dumps(seen))
    assert False
'''


def drive(workspace, steps, tmp_path, **settings):
    """Run the gate's checks over each step (a candidate's files, or "kill" the zygote, or "touch" check.py): a list
    of {"failure", "output", "zygote": its PID or None, "left": host processes a candidate left, "namespaces": the
    zygote's}."""
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "driver.py").write_text(DRIVER)
    (tmp_path / "steps.json").write_text(json.dumps(steps))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEED_")}
    done = subprocess.run([sys.executable, str(tmp_path / "driver.py"), str(workspace), str(tmp_path / "steps.json")],
                          cwd=workspace, env={"LEFT_MARK": f"left-by-a-candidate-{uuid.uuid4().hex}", **env,
                                              "SEED_ZYGOTE": "5", **settings}, capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def probed(result):
    return json.loads(next(line for line in result["output"].splitlines() if line.startswith("PROBE"))[5:])


@pytest.fixture
def host_server():
    """A loopback server of the person's: its port."""
    server = socket.create_server(("127.0.0.1", 0))
    threading.Thread(target=lambda: [server.accept()[0].close() for _ in iter(int, 1)], daemon=True).start()
    yield server.getsockname()[1]
    server.close()


def test_a_forked_candidate_is_confined_as_a_launched_one_in_namespaces_of_its_own(workspace, tmp_path, host_server):
    (workspace / ".env").write_text("GEMINI_API_KEY=secret\n")
    probe = {"tests/test_probe.py": PROBE.replace("ROOT", str(workspace)).replace("PORT", str(host_server))}
    forked = drive(workspace, [probe, probe], tmp_path / "forked")
    launched = drive(workspace, [probe], tmp_path / "launched", SEED_ZYGOTE="0")
    assert forked[0]["zygote"] and forked[0]["zygote"] == forked[1]["zygote"] and launched[0]["zygote"] is None
    first, second, alone = probed(forked[0]), probed(forked[1]), probed(launched[0])
    assert first["env"] == first["shadow"] == "EACCES" and first["write outside"] in ("EACCES", "EROFS")
    assert first["host loopback"] == "ECONNREFUSED" and first["pid"] == 2 and first["processes"] <= 3
    assert first["status"] == ["1", "2"]  # no_new_privs, and a seccomp filter
    assert first["sockets"] == []  # not the zygote's control socket
    assert {k: v for k, v in first.items() if k != "namespaces"} == {k: v for k, v in alone.items() if k != "namespaces"}
    zygote = forked[0]["namespaces"]
    for name in first["namespaces"]:  # each candidate's own, not the zygote's (alive through both). That the second
        # is not the first's is proven by state in the next test: the kernel reuses a namespace's number once it ends
        assert first["namespaces"][name] != zygote[name] and second["namespaces"][name] != zygote[name], name


PLANT = r'''import builtins, ctypes, os, subprocess, sys, tempfile
import planted_module


def test_plant():
    sys.modules["planted"] = planted_module
    builtins.planted = True
    os.environ["PLANTED"] = "1"
    open(os.path.join(tempfile.gettempdir(), "planted"), "w").close()
    open("/dev/shm/planted", "w").close()
    assert ctypes.CDLL(None).shmget(0x5EED, 4096, 0o1600) >= 0  # IPC_CREAT: System V memory of the IPC namespace
    subprocess.Popen([sys.executable, "-c", "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(300)",
                      "planted-by-a-candidate"], start_new_session=True)
'''
FIND = r'''import builtins, ctypes, errno, importlib, os, sys, tempfile
import pytest


def test_nothing_of_the_candidate_before():
    assert "planted" not in sys.modules and "planted_module" not in sys.modules
    assert not hasattr(builtins, "planted") and "PLANTED" not in os.environ
    assert not os.path.exists(os.path.join(tempfile.gettempdir(), "planted"))
    assert not os.path.exists("/dev/shm/planted")
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.shmget(0x5EED, 0, 0) == -1 and ctypes.get_errno() == errno.ENOENT
    with pytest.raises(ImportError):
        importlib.import_module("planted_module")
    assert not [p for p in os.listdir("/proc") if p.isdigit() and
                b"planted-by-a-candidate" in open(f"/proc/{p}/cmdline", "rb").read()]
'''


def test_nothing_an_earlier_candidate_leaves_reaches_the_next(workspace, tmp_path):
    mark = f"planted-by-a-candidate-{uuid.uuid4().hex}"  # this test's own: another worker's are not its
    plant = {"planted_module.py": "VALUE = 1\n", "tests/test_plant.py": PLANT.replace("planted-by-a-candidate", mark)}
    find = {"tests/test_find.py": FIND.replace("planted-by-a-candidate", mark)}
    results = drive(workspace, [plant, find], tmp_path, LEFT_MARK=mark)
    assert results[0]["failure"] is None, results[0]["output"]
    assert results[0]["left"] == []  # the daemon it started ended with its PID namespace
    assert results[1]["failure"] is None, results[1]["output"]
    assert results[0]["zygote"] == results[1]["zygote"]


REACH = r'''import ctypes, errno, os, signal


def test_reach_the_zygote():
    zygote = ZYGOTE_PID
    try:
        os.kill(zygote, signal.SIGKILL)
        killed = "sent"
    except OSError as error:
        killed = type(error).__name__
    libc = ctypes.CDLL(None, use_errno=True)
    traced = libc.ptrace(16, zygote, 0, 0)  # PTRACE_ATTACH
    assert (killed, traced, ctypes.get_errno()) == ("ProcessLookupError", -1, errno.EPERM)
    sockets = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            sockets += [fd] if os.readlink(f"/proc/self/fd/{fd}").startswith("socket") else []
        except FileNotFoundError:
            pass  # the listing's own
    assert sockets == []
'''


def test_a_candidate_can_neither_signal_nor_trace_the_zygote_nor_hold_its_socket(workspace, tmp_path):
    results = drive(workspace, [CALC, {"tests/test_reach.py": REACH}, CALC], tmp_path)
    assert results[1]["failure"] is None, results[1]["output"]
    assert results[0]["zygote"] == results[1]["zygote"] == results[2]["zygote"]  # it lived on, and served the next
    assert results[2]["failure"] is None


def test_the_zygote_is_started_anew_after_its_candidates_when_its_files_change_and_when_it_died(workspace, tmp_path):
    results = drive(workspace, [CALC, CALC, CALC, "touch", CALC, "kill", CALC], tmp_path, SEED_ZYGOTE="2")
    pids = [result["zygote"] for result in results]
    assert all(result["failure"] is None for result in results), results
    assert pids[0] == pids[1] != pids[2] != pids[3] != pids[4] and None not in pids


def test_a_candidate_out_of_time_is_ended_with_what_it_started_and_the_next_is_judged(workspace, tmp_path):
    mark = f"left-by-a-candidate-{uuid.uuid4().hex}"  # this test's own: another worker's are not its
    slow = {"tests/test_slow.py": "import subprocess, sys, time\n\n\ndef test_slow():\n    subprocess.Popen([sys.executable, "
            f"'-c', 'import time; time.sleep(300)', '{mark}'])\n    time.sleep(300)\n"}
    results = drive(workspace, [slow, CALC], tmp_path, SEED_GATE_SECONDS="3", LEFT_MARK=mark)
    assert results[0]["failure"] == "tests timed out" and results[0]["left"] == []
    assert results[1]["failure"] is None and results[1]["zygote"] == results[0]["zygote"]


@WITHOUT_NAMESPACES
def test_without_namespaces_each_check_is_launched_by_exec(workspace, tmp_path):
    results = drive(workspace, [CALC, dict(CALC, **{"calc.py": "def add(a, b):\n    return a - b\n"})], tmp_path,
                    SEED_NAMESPACES="0")
    assert [result["zygote"] for result in results] == [None, None]
    assert results[0]["failure"] is None and results[1]["failure"] == "tests failed"


SCRIPT_DRIVER = r'''import json, os, sys
sys.path.insert(0, sys.argv[1])
from supervisor.confined import terrarium, zygote

for name, text in json.load(open(sys.argv[2])).items():
    terrarium.WORK.mkdir(parents=True, exist_ok=True)
    terrarium.SCRATCH.mkdir(parents=True, exist_ok=True)
    (terrarium.WORK / name).write_text(text)
    env = terrarium.clean_env(GEMINI_API_KEY="the-run-token", PYTHONUNBUFFERED="1")
    code, output = terrarium.run_bounded(terrarium.python(name, "an argument"), env, 60,
                                         terrarium.policy(gateway_port=int(sys.argv[3])), start=zygote.start)
    print(json.dumps({"code": code, "output": output, "zygote": zygote.current and zygote.current.process.pid}))
'''
SCRIPT_PROBE = r'''import atexit, errno, json, os, socket, sys, threading, time

''' + ATTEMPT + r'''


seen = {
    "env": attempt(lambda: open(os.path.join("ROOT", ".env")).read()),
    "gateway": attempt(lambda: socket.create_connection(("127.0.0.1", GATEWAY), timeout=5).close()),
    "other loopback": attempt(lambda: socket.create_connection(("127.0.0.1", OTHER), timeout=2).close()),
    "token": os.environ.get("GEMINI_API_KEY"), "keys": sorted(os.environ), "pid": os.getpid(),
    "status": [line.split()[1] for line in open("/proc/self/status") if line.startswith(("Seccomp:", "NoNewPrivs:"))],
    "main": __name__, "argv": sys.argv, "last on the path": sys.path[-1], "cwd": os.getcwd(),
}
print("PROBE" + json.dumps(seen))
atexit.register(lambda: print("AT EXIT"))
threading.Thread(target=lambda: (time.sleep(0.3), print("THREAD"))).start()
sys.exit("told on stderr")
'''
UNFLUSHED = "print('EARLY')\nimport os\nos._exit(3)\n"


def test_a_script_forked_by_the_zygote_runs_as_a_launched_one_confined_with_its_own_environment(workspace, tmp_path,
                                                                                               host_server):
    """The seed's launch: a script as terrarium.python starts it, with the gateway to reach through the relay."""
    (workspace / ".env").write_text("GEMINI_API_KEY=secret\n")
    other = socket.create_server(("127.0.0.1", 0))
    probe = SCRIPT_PROBE.replace("ROOT", str(workspace)).replace("GATEWAY", str(host_server))
    probe = probe.replace("OTHER", str(other.getsockname()[1]))
    (tmp_path / "driver.py").write_text(SCRIPT_DRIVER)
    (tmp_path / "scripts.json").write_text(json.dumps({"probe.py": probe, "unflushed.py": UNFLUSHED}))
    results = {}
    for zygote in ("5", "0"):
        env = {k: v for k, v in os.environ.items() if not k.startswith("SEED_")}
        done = subprocess.run([sys.executable, str(tmp_path / "driver.py"), str(workspace), str(tmp_path / "scripts.json"),
                               str(host_server)], cwd=workspace, env={**env, "SEED_ZYGOTE": zygote},
                              capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, done.stderr
        results[zygote] = [json.loads(line) for line in done.stdout.splitlines()]
    other.close()
    (forked, forked_unflushed), (launched, launched_unflushed) = results["5"], results["0"]
    assert forked["zygote"] and forked["zygote"] == forked_unflushed["zygote"] and launched["zygote"] is None
    seen = probed(forked)
    assert seen == probed(launched)
    assert seen["env"] == "EACCES" and seen["gateway"] == "allowed" and seen["other loopback"] == "EACCES"
    assert seen["token"] == "the-run-token" and seen["pid"] == 2 and seen["status"] == ["1", "2"]
    assert seen["main"] == "__main__" and seen["argv"] == ["probe.py", "an argument"]
    assert seen["last on the path"] == seen["cwd"] == str(workspace / ".seed" / "work")
    for result in (forked, launched):  # its threads waited for, then its exit hooks; the text it exited with
        assert result["code"] == 1 and result["output"].index("THREAD") < result["output"].index("AT EXIT")
        assert "told on stderr" in result["output"]
    for result in (forked_unflushed, launched_unflushed):  # PYTHONUNBUFFERED: each line is the keeper's at once
        assert result["code"] == 3 and result["output"] == "EARLY\n"


PRELOADS = r'''import json, os, sys
sys.path.insert(0, sys.argv[1])
from supervisor.confined import gate, terrarium, zygote
from supervisor.store import snapshots

HELD = "import sys\nprint(sorted({'pytest', '_pytest.python', 'urllib.request'} & set(sys.modules)))\n"


def held():
    """What the zygote had imported when it forked a script: the script's sys.modules before it imports anything."""
    terrarium.WORK.mkdir(parents=True, exist_ok=True)
    terrarium.SCRATCH.mkdir(parents=True, exist_ok=True)
    (terrarium.WORK / "held.py").write_text(HELD)
    code, output = terrarium.run_bounded(terrarium.python("held.py"), terrarium.clean_env(), 60, terrarium.policy(),
                                         start=zygote.start)
    return output.strip(), zygote.current and zygote.current.process.pid


before = held()
verdict = gate.run_checks({rel: snapshots.store_object(text.encode()) for rel, text in json.loads(sys.argv[2]).items()},
                          False)
print(json.dumps({"before": before, "failure": verdict.failure and verdict.failure.value, "after": held()}))
'''


def test_the_zygote_imports_pytest_at_its_first_check_never_for_runs_that_need_none(workspace, tmp_path):
    """A keeper whose seed crashes, hangs or is refused never reaches the gate: its zygote must not pay pytest's
    imports (about 150 ms of CPU for each keeper start). The first check has them imported, and every run forked
    after it finds them there; the one zygote serves both."""
    (tmp_path / "driver.py").write_text(PRELOADS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEED_")}
    done = subprocess.run([sys.executable, str(tmp_path / "driver.py"), str(workspace), json.dumps(CALC)],
                          cwd=workspace, env={**env, "SEED_ZYGOTE": "5"}, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["failure"] is None
    assert seen["before"][0] == "['urllib.request']"
    assert seen["after"][0] == "['_pytest.python', 'pytest', 'urllib.request']"
    assert seen["before"][1] and seen["before"][1] == seen["after"][1]


def test_a_zygote_that_fails_is_told_in_one_line_naming_its_error_and_each_check_is_launched(workspace, tmp_path):
    """Its error is the last line of a long traceback (a broken pytest plugin gives twenty lines): the one line told
    names the error itself, never a traceback cut at some length, and the checks are judged all the same."""
    preloaded = workspace / "supervisor" / "confined" / "preloaded.py"
    preloaded.write_text("def deep(n):\n    return deep(n - 1) if n else 1 / 0\n\n\ndeep(40)\n" + preloaded.read_text())
    (tmp_path / "driver.py").write_text(DRIVER)
    (tmp_path / "steps.json").write_text(json.dumps([CALC, CALC]))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEED_")}
    done = subprocess.run([sys.executable, str(tmp_path / "driver.py"), str(workspace), str(tmp_path / "steps.json")],
                          cwd=workspace, env={"LEFT_MARK": uuid.uuid4().hex, **env, "SEED_ZYGOTE": "5"},
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["failure"] for line in done.stdout.splitlines()] == [None, None]
    assert done.stderr == "the preloaded process cannot be used (the zygote ended: ZeroDivisionError: division by " \
                          "zero): each run starts its own interpreters\n"
