"""The sandbox through real processes: a confined child tries what careless code might, and what the gate's tests need.

Each attempt runs in a fresh `python -c` child started as the keeper starts one, through sandbox.command().
"""
import errno
import json
import os
import re
import socket
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

from conftest import REPO, load_keeper

SANDBOX = REPO / "supervisor" / "confined" / "sandbox.py"
sandbox = load_keeper("sandbox")

SUPPORT = sandbox.probe()
LIMITS = {"RLIMIT_AS": 1 << 30, "RLIMIT_CPU": 60, "RLIMIT_FSIZE": 16 << 20, "RLIMIT_NOFILE": 256}
ATTEMPTS = """import errno, json, os, re, signal, socket, subprocess, sys, tempfile
outcomes = {}
for name, action in json.loads(sys.argv[1]).items():
    try:
        exec(action)
        outcomes[name] = "done"
    except OSError as error:
        outcomes[name] = errno.errorcode[error.errno]
    except Exception as error:
        outcomes[name] = type(error).__name__
print(json.dumps(outcomes))
"""  # each attempt's outcome: "done", or the errno name (or exception) that stopped it
AS_IF = """import importlib.util, sys
spec = importlib.util.spec_from_file_location("sandbox", sys.argv[1])
sandbox = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sandbox)
sandbox.landlock_abi = lambda: (int(sys.argv[2]), sys.argv[3])
sandbox.launch(sys.argv[4], sys.argv[5], sys.argv[6:])
"""  # the launcher on a kernel that answers the ABI probe with argv[2] (0: no Landlock, argv[3] says why)

landlock = pytest.mark.skipif(not SUPPORT.abi, reason=f"this kernel has no Landlock: {SUPPORT.text}")


def needs_abi(abi, what):
    return pytest.mark.skipif(SUPPORT.abi < abi, reason=f"{what} needs Landlock ABI {abi}; here: {SUPPORT.text}")


@pytest.fixture
def place(tmp_path):
    """A user's folder with its .env, a home with a secret, a gateway, and a child's working copy and temp."""
    for folder in ["user/backups", "home", "work", "temp"]:
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "user" / ".env").write_text("GEMINI_API_KEY=AIza-not-for-the-model\n")
    (tmp_path / "home" / ".secret").write_text("not for the model\n")
    gateway = socket.create_server(("127.0.0.1", 0))
    yield tmp_path, gateway.getsockname()[1]
    gateway.close()


def policy_in(place, **choices):
    root, gateway_port = place
    return sandbox.policy_for(root / "work", root / "temp", gateway_port, LIMITS, **choices)


def run(place, command, cwd=None):
    """A command run in the working copy (or `cwd`), with the fake home as HOME."""
    root, _ = place
    env = {**os.environ, "HOME": str(root / "home")}
    return subprocess.run(command, cwd=cwd or root / "work", env=env, capture_output=True, text=True, timeout=60)


def confined(place, argv, policy=None):
    """argv, launched as the keeper launches the model's code: from START, into the working copy."""
    root, _ = place
    return run(place, sandbox.command(argv, policy or policy_in(place), root / "work"), sandbox.START)


def attempt(place, action, policy=None):
    """Python statements run in a confined child: "done", or the errno name (or exception) that stopped them."""
    result = confined(place, [sys.executable, "-c", ATTEMPTS, json.dumps({"it": action})], policy)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["it"]


def server_on_a_chosen_port():
    """A loopback server on a port chosen as most servers' are (8000, 5432, ...): below the ephemeral range."""
    for port in range(min(sandbox.ephemeral_ports()) - 1, 1024, -1):
        try:
            return socket.create_server(("127.0.0.1", port))
        except OSError:
            continue  # in use


def run_as_if(place, abi, why, policy, argv):
    """argv, launched on a kernel that pretends to offer Landlock ABI `abi` (0: none)."""
    root, _ = place
    return run(place, [sys.executable, "-I", "-S", "-c", AS_IF, str(SANDBOX), str(abi), why, json.dumps(policy),
                       str(root / "work"), *argv], sandbox.START)


# --- files ------------------------------------------------------------------------------------
@landlock
@pytest.mark.parametrize("where", ["user folder", "home", "/tmp"])
def test_writing_outside_the_working_copy_is_refused(place, where):
    root, _ = place
    target = {"user folder": root / "user" / "notes.md", "home": root / "home" / ".bashrc",
              "/tmp": Path("/tmp") / f"seed-sandbox-{uuid.uuid4().hex}"}[where]
    outcome = attempt(place, f"open({str(target)!r}, 'w').write('x')")
    created = target.exists()
    target.unlink(missing_ok=True)  # only there if the sandbox failed: leave /tmp clean all the same
    assert (outcome, created) == ("EACCES", False)


@landlock
@pytest.mark.parametrize("action", ["open(USER + '/.env').read()", "open(HOME + '/.secret').read()",
                                    "os.listdir(HOME)", "os.listdir(USER + '/backups')"])
def test_the_user_folder_and_the_home_are_unreadable(place, action):
    root, _ = place
    action = action.replace("USER", repr(str(root / "user"))).replace("HOME", repr(str(root / "home")))
    assert attempt(place, action) == "EACCES"


@landlock
def test_the_keepers_environment_is_unreadable(place):
    assert attempt(place, "open(f'/proc/{os.getppid()}/environ', 'rb').read()") == "EACCES"


@landlock
def test_the_working_copy_the_private_temp_folder_and_dev_null_are_writable(place):
    root, _ = place
    made = ("open('made.txt', 'w').write('x')\nopen(os.devnull, 'w').write('x')\n"
            "assert tempfile.mkstemp()[1].startswith(os.environ['TMPDIR'])")
    assert attempt(place, made) == "done"
    assert (root / "work" / "made.txt").read_text() == "x"
    assert len(list((root / "temp").iterdir())) == 1


@landlock
def test_the_standard_library_requests_and_pytest_run_in_the_working_copy(place):
    root, _ = place
    (root / "work" / "tests").mkdir()
    (root / "work" / "tests" / "test_tiny.py").write_text(
        "import json, sqlite3, requests\n\n\ndef test_tiny(tmp_path):\n"
        "    (tmp_path / 'note.json').write_text(json.dumps({'ok': requests.__name__}))\n")
    result = confined(place, [sys.executable, "-m", "pytest", "-q", "tests"], policy_in(place, own_servers=True))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout


# --- network ----------------------------------------------------------------------------------
@needs_abi(4, "refusing TCP")
def test_the_gateway_port_can_be_reached(place):
    _, gateway_port = place
    assert attempt(place, f"socket.create_connection(('127.0.0.1', {gateway_port}), timeout=5)") == "done"


@needs_abi(4, "refusing TCP")
def test_a_server_on_a_chosen_loopback_port_is_refused(place):
    with server_on_a_chosen_port() as server:
        connect = f"socket.create_connection(('127.0.0.1', {server.getsockname()[1]}), timeout=5)"
        assert attempt(place, connect, policy_in(place, own_servers=True)) == "EACCES"


@needs_abi(4, "refusing TCP")
def test_without_own_servers_no_port_but_the_gateway_can_be_reached(place):
    with socket.create_server(("127.0.0.1", 0)) as server:  # an ephemeral port, as its own servers get
        connect = f"socket.create_connection(('127.0.0.1', {server.getsockname()[1]}), timeout=5)"
        assert attempt(place, connect) == "EACCES"


@needs_abi(4, "refusing TCP")
def test_a_loopback_server_of_its_own_works(place):
    own = ("server = socket.create_server(('127.0.0.1', 0))\n"
           "client = socket.create_connection(server.getsockname(), timeout=5)\n"
           "server.accept()[0].sendall(b'pong')\n"
           "assert client.recv(4) == b'pong'")
    assert attempt(place, own, policy_in(place, own_servers=True)) == "done"


@needs_abi(4, "refusing TCP")
def test_without_own_servers_it_cannot_listen(place):
    assert attempt(place, "socket.create_server(('127.0.0.1', 0))") == "EACCES"


# --- signals and sockets of other processes ---------------------------------------------------
@needs_abi(6, "scoping signals")
def test_it_cannot_signal_the_keeper(place):
    assert attempt(place, "os.kill(os.getppid(), signal.SIGWINCH)") == "EPERM"


@landlock
def test_it_can_end_a_process_of_its_own(place):
    own = "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\nchild.kill()\nchild.wait()"
    assert attempt(place, own) == "done"


@needs_abi(6, "scoping abstract UNIX sockets")
def test_an_abstract_unix_socket_outside_is_refused(place):
    name = f"\0seed-sandbox-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(name)
        listener.listen()
        assert attempt(place, f"socket.socket(socket.AF_UNIX).connect({name!r})") == "EPERM"


# --- the launcher -----------------------------------------------------------------------------
@landlock
@pytest.mark.parametrize("own_servers", [False, True], ids=["the seed", "the gate"])
def test_of_etc_it_reads_only_what_python_tls_and_name_lookup_need(place, own_servers):
    needs = ("import grp, mimetypes, pwd, ssl, time\nssl.create_default_context().load_default_certs()\n"
             "socket.getaddrinfo('localhost', 80)\npwd.getpwuid(os.getuid()); grp.getgrgid(os.getgid())\n"
             "mimetypes.init(); time.localtime(); socket.getservbyname('http')")
    policy = policy_in(place, own_servers=own_servers)
    assert attempt(place, needs, policy) == "done"
    unneeded = [path for path in ("/etc/shadow", "/etc/gshadow", "/etc/machine-id", "/etc/fstab") if
                os.path.isfile(path)]
    assert unneeded, "none of the files this test tries is on this machine"
    for path in unneeded:  # as root, /etc/shadow too: Landlock holds whatever the file's mode
        assert attempt(place, f"open({path!r}).read()", policy) == "EACCES", path
    shadow = "/proc/self/root/etc/shadow"  # another way to the same file...
    assert attempt(place, f"open({shadow!r}).read()", policy) in ("EACCES", "ENOENT")
    link = "os.link('/etc/shadow', 'shadow'); open('shadow').read()"  # ...and a hard link into the working copy
    assert attempt(place, link, policy) in ("EACCES", "EXDEV", "EPERM", "ENOENT")


@landlock
def test_the_seed_makes_no_unix_socket_so_reaches_no_pathname_one_the_gate_does(place, tmp_path):
    path = tmp_path / "agent.sock"  # a socket of the person's, where no hidden folder covers it
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(path))
        listener.listen()
        connect = f"socket.socket(socket.AF_UNIX).connect({str(path)!r})"
        assert attempt(place, connect) == "EPERM"  # the seed's policy
        assert attempt(place, connect, policy_in(place, own_servers=True)) == "done"  # the gate's: see the docs
    assert attempt(place, "a, b = socket.socketpair(); a.sendall(b'x'); assert b.recv(1) == b'x'") == "done"


@pytest.mark.skipif(os.uname().machine not in sandbox.SECCOMP_MACHINES, reason="no seccomp numbers for this machine")
def test_the_seeds_filter_refuses_io_uring_and_the_other_abis_that_could_make_a_socket(place):
    number = sandbox.SYSCALLS["socket"][list(sandbox.SECCOMP_MACHINES).index(os.uname().machine)]
    calls = {"io_uring": "libc.syscall(425, 1, None)", "x32 socket": f"libc.syscall({number} | 0x40000000, 1, 1, 0)",
             "socket": f"libc.syscall({number}, 1, 1, 0)"}
    for what, call in calls.items():
        action = f"import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nif {call} < 0:\n" \
                 "    raise OSError(ctypes.get_errno(), 'refused')"
        assert attempt(place, action) == "EPERM", what


def test_the_rlimits_still_apply(place):
    assert attempt(place, "bytearray(2 << 30)") == "MemoryError"


@landlock
def test_no_new_privileges_and_no_capabilities(place):
    status = "status = open('/proc/self/status').read()\nassert re.search(r'NoNewPrivs:\\s+1', status)\n"
    if os.geteuid() == 0:
        status += "assert re.search(r'CapEff:\\s+0+\\n', status), status"
    assert attempt(place, status) == "done"


@landlock
def test_a_policy_the_kernel_refuses_stops_the_child_with_require(place):
    policy = {**policy_in(place, require=True), "connect": [70000]}  # no such TCP port: Landlock says EINVAL
    result = confined(place, [sys.executable, "-c", "print('ran')"], policy)
    assert (result.returncode, result.stdout) == (78, "")
    assert re.fullmatch(r"sandbox: confining failed: .*; SEED_SANDBOX=require refuses .*\n", result.stderr)


@landlock
def test_without_require_a_failure_to_confine_is_reported_and_the_child_runs(place):
    policy = {**policy_in(place), "connect": [70000]}
    result = confined(place, [sys.executable, "-c", "print('ran')"], policy)
    assert (result.returncode, result.stdout) == (0, "ran\n")
    assert "the model's code is NOT confined" in result.stderr


def test_without_landlock_the_child_runs_with_its_limits_only(place):
    root, _ = place
    code = "import resource; open('../user/notes.md', 'w'); print(resource.getrlimit(resource.RLIMIT_AS)[0])"
    result = run_as_if(place, 0, "kernel without Landlock", policy_in(place), [sys.executable, "-c", code])
    assert (result.returncode, result.stdout, result.stderr) == (0, f"{1 << 30}\n", "")
    assert (root / "user" / "notes.md").exists()


def test_without_landlock_require_refuses_to_start_the_child(place):
    policy = policy_in(place, require=True)
    result = run_as_if(place, 0, "kernel without Landlock", policy, [sys.executable, "-c", "print('ran')"])
    assert (result.returncode, result.stdout) == (78, "")
    assert result.stderr == ("sandbox: none (kernel without Landlock): the model's code is NOT confined; "
                             "SEED_SANDBOX=require refuses to run the model's code unconfined\n")


@landlock
@pytest.mark.parametrize("abi", range(1, sandbox.KNOWN_ABI + 1))
def test_each_abi_confines_what_it_knows(place, abi):
    """The rules built for an older kernel, enforced on this one: files always; TCP from 4; signals from 6."""
    root, _ = place
    with server_on_a_chosen_port() as other:
        tries = {"write": f"open({str(root / 'user' / 'x')!r}, 'w')",
                 "tcp": f"socket.create_connection(('127.0.0.1', {other.getsockname()[1]}), timeout=5)",
                 "signal": "os.kill(os.getppid(), 0)"}
        policy = policy_in(place, own_servers=True)
        result = run_as_if(place, abi, "", policy, [sys.executable, "-c", ATTEMPTS, json.dumps(tries)])
    expected = {"write": "EACCES", "tcp": "EACCES" if abi >= 4 else "done", "signal": "EPERM" if abi >= 6 else "done"}
    assert json.loads(result.stdout) == expected


# --- namespaces of its own -------------------------------------------------------------------
ISOLATED, HOW = sandbox.isolation()
namespaces = pytest.mark.skipif(not ISOLATED, reason=f"this machine gives a run no namespaces: {HOW}")
SUBREAPER = """import importlib.util, os, subprocess, sys, time
spec = importlib.util.spec_from_file_location("sandbox", sys.argv[1])
sandbox = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sandbox)
sandbox.become_subreaper()
daemon = ("import os, sys, time\\nif os.fork() == 0:\\n    os.setsid()\\n    if os.fork() == 0:\\n"
          "        time.sleep(60)\\n    os._exit(0)")
subprocess.run([sys.executable, "-c", daemon, sys.argv[2]])
time.sleep(0.2)
daemons = [pid for pid in sandbox.descendants(os.getpid())
           if sys.argv[2].encode() in open(f"/proc/{pid}/cmdline", "rb").read()]
sandbox.end_descendants()
print(len(daemons), len(sandbox.descendants(os.getpid())))
"""  # a keeper that made itself subreaper, whose run left a double-forked daemon: found, then ended


def isolated_in(place, **choices):
    return {**policy_in(place, **choices), "isolate": True}


@namespaces
def test_in_namespaces_it_sees_only_its_own_processes(place):
    listed = "assert sorted(p for p in os.listdir('/proc') if p.isdigit()) == ['1', '2'], os.listdir('/proc')"
    assert attempt(place, listed, isolated_in(place)) == "done"


@namespaces
def test_in_namespaces_the_gateway_is_reached_through_the_relay(place):
    root, _ = place
    with socket.create_server(("127.0.0.1", 0)) as gateway:
        def answer():
            with gateway.accept()[0] as client:
                client.sendall(b"gateway:" + client.recv(10))
        threading.Thread(target=answer, daemon=True).start()
        talk = (f"client = socket.create_connection(('127.0.0.1', {gateway.getsockname()[1]}), timeout=5)\n"
                "client.sendall(b'hello')\nassert client.recv(100) == b'gateway:hello'")
        policy = sandbox.policy_for(root / "work", root / "temp", gateway.getsockname()[1], LIMITS, isolate=True)
        assert attempt(place, talk, policy) == "done"


@namespaces
def test_in_namespaces_its_tests_have_loopback_but_no_server_of_the_users(place):
    own = ("server = socket.create_server(('127.0.0.1', 8000))\n"
           "socket.create_connection(('127.0.0.1', 8000), timeout=5).sendall(b'x')\nassert server.accept()[0].recv(1)")
    with socket.create_server(("127.0.0.1", 0)) as users:
        reach = f"socket.create_connection(('127.0.0.1', {users.getsockname()[1]}), timeout=5)"
        assert attempt(place, reach, isolated_in(place, own_servers=True)) == "ECONNREFUSED"
    assert attempt(place, own, isolated_in(place, own_servers=True)) == "done"


@namespaces
def test_in_namespaces_dev_shm_and_the_processes_are_bounded(place):
    policy = {**isolated_in(place), "shm": 1 << 20, "processes": 20}  # root: at most 300 (Linux 6.14+)
    assert attempt(place, "open('/dev/shm/fill', 'wb').write(bytes(2 << 20))", policy) == "ENOSPC"
    forks = "for _ in range(320):\n    if os.fork() == 0:\n        time.sleep(5)\n        os._exit(0)"
    assert attempt(place, "import time\n" + forks, policy) == "EAGAIN"


@namespaces
def test_in_namespaces_well_known_unix_sockets_are_hidden(place):
    folder = Path("/run")
    if not os.access(folder, os.W_OK):
        pytest.skip("/run is not writable here")
    path = folder / f"seed-sandbox-{uuid.uuid4().hex}.sock"
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(path))
        listener.listen()
        try:
            connect = f"socket.socket(socket.AF_UNIX).connect({str(path)!r})"  # by the gate, which may make them
            assert (attempt(place, connect, policy_in(place, own_servers=True)),
                    attempt(place, connect, isolated_in(place, own_servers=True))) == ("done", "ENOENT")
        finally:
            path.unlink()


@namespaces
@pytest.mark.parametrize("ending, code", [("sys.exit(7)", 7), ("os.kill(os.getpid(), 15)", -15)])
def test_in_namespaces_the_keeper_sees_the_run_end_as_it_did(place, ending, code):
    result = confined(place, [sys.executable, "-c", f"import os, sys\n{ending}"], isolated_in(place))
    assert (result.returncode, result.stderr) == (code, "")


def test_a_subreaper_finds_and_ends_a_double_forked_daemon(place):
    marker = f"seed-daemon-{uuid.uuid4().hex}"
    result = run(place, [sys.executable, "-c", SUBREAPER, str(SANDBOX), marker])
    assert result.stdout == "1 0\n", result.stderr  # the daemon found (now its child), nothing left
    assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and marker in command_line(p)]


def command_line(process):
    try:
        return (process / "cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def test_where_the_kernel_refuses_namespaces_isolation_says_which_step_and_what_stays_open(monkeypatch):
    def refused():
        raise OSError(errno.EPERM, "unshare: Operation not permitted")

    monkeypatch.setattr(sandbox, "unshare", refused)
    assert sandbox.isolation.__wrapped__() == (False, "no namespaces (unshare: Operation not permitted): "
                                               "the keeper ends what a run leaves; UDP, loopback servers on "
                                               "ephemeral ports and /proc stay open")


def test_isolation_says_what_it_gives_or_what_stays_open():
    if ISOLATED:
        assert HOW.startswith("namespaces: its own processes, /proc, network")
    else:
        assert HOW.startswith("no namespaces (") and "UDP" in HOW


# --- what probe() says ------------------------------------------------------------------------
@landlock
def test_probe_names_the_abi_found_by_the_system_call():
    assert SUPPORT.confined and SUPPORT.text.startswith(f"Landlock ABI {SUPPORT.abi}: files")


def test_probe_says_what_an_older_kernel_cannot_confine():
    assert sandbox.describe(7) == "Landlock ABI 7: files, truncation, TCP, signals"
    assert sandbox.describe(3) == "Landlock ABI 3: files, truncation (not TCP, signals: the kernel is too old)"


def test_probe_without_landlock_says_the_code_is_not_confined(monkeypatch):
    monkeypatch.setattr(sandbox, "landlock_abi", lambda: (0, "kernel without Landlock"))
    assert sandbox.probe() == (False, 0, "none (kernel without Landlock): the model's code is NOT confined")


# --- macOS: the profile as text (sandbox-exec was not run) ------------------------------------
def test_the_macos_profile_is_made_from_the_policy(tmp_path):
    odd = tmp_path / 'a "quoted" back\\slash'
    policy = sandbox.policy_for(odd, tmp_path / "temp", 8765, LIMITS)
    profile = sandbox.profile(policy)
    lines = profile.splitlines()
    assert lines[:2] == ["(version 1)", "(deny default)"]
    assert "(allow signal (target same-sandbox))" in lines
    assert '(allow network-outbound (remote ip "localhost:8765"))' in lines
    assert "localhost:*" not in profile
    write = next(line for line in lines if line.startswith("(allow file-write*"))
    literals = [re.sub(r'\\(.)', r'\1', text) for text in re.findall(r'"((?:[^"\\]|\\.)*)"', write)]
    assert literals == [str(odd), str(tmp_path / "temp"), *map(os.path.realpath, sandbox.DEVICES)]
    for line in lines:  # every rule closes what it opens, once strings are taken out
        bare = re.sub(r'"(?:[^"\\]|\\.)*"', "", line)
        assert bare.count("(") == bare.count(")") and bare.startswith("(") and bare.endswith(")")


def test_the_macos_profile_lets_its_own_servers_use_loopback(tmp_path):
    profile = sandbox.profile(sandbox.policy_for(tmp_path, tmp_path / "temp", 8765, LIMITS, own_servers=True))
    assert '(allow network-bind network-inbound (local ip "localhost:*"))' in profile
    assert '(allow network-outbound (remote ip "localhost:*"))' in profile


PESTERED = """
import importlib, importlib.util, logging, os, signal, subprocess, sys, time
spec = importlib.util.spec_from_file_location("supervisor", sys.argv[1] + "/supervisor/__init__.py",
                                              submodule_search_locations=[sys.argv[1] + "/supervisor"])
sys.modules["supervisor"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sys.modules["supervisor"])
sandbox = importlib.import_module("supervisor.confined.sandbox")
ballast = bytearray(200 << 20)  # the size of a keeper with its caches: a fork takes long enough to be hit
armed = False


def interrupt(*_):  # Ctrl+C as the keeper takes it, while a trial is under way; not in this program's own steps
    if armed:
        raise KeyboardInterrupt


signal.signal(signal.SIGINT, interrupt)
works = sandbox.isolation.__wrapped__()[0]  # left alone, the trial runs to its end
pester = subprocess.Popen([sys.executable, "-c", "import os, signal, sys, time\\nwhile True:\\n"
                           "    os.kill(int(sys.argv[1]), signal.SIGINT)\\n    time.sleep(0.0002)", str(os.getpid())],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
interrupted, deadline = 0, time.monotonic() + 20  # (a machine under load gets through fewer trials a second)
while interrupted < int(sys.argv[2]) and time.monotonic() < deadline:
    try:
        try:
            armed = True
            sandbox.isolation.__wrapped__()
        finally:
            armed = False
    except KeyboardInterrupt:
        interrupted += 1
pester.kill()
pester.wait()
print(works, interrupted, logging._lock.acquire(timeout=2))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the trial of namespaces runs on Linux")
def test_ctrl_c_during_the_trial_of_namespaces_waits_for_it_and_leaves_no_lock_held(tmp_path):
    """The demo's keeper hung after Ctrl+C: the interrupt landed in the keeper's one fork (the trial of namespaces,
    since it moved from import into the loop's start), inside the hook with which logging releases its lock after a
    fork; Python printed it as ignored, the lock stayed held, and the gateway's next request waited on it forever.
    Pestered with Ctrl+C, the trial now keeps it until it is over: no hook is interrupted, no lock is left."""
    done = subprocess.run([sys.executable, "-P", "-c", PESTERED, str(REPO), "60"], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120)  # pestered until 60 trials were interrupted
    assert "in: <function _releaseLock" not in done.stderr, done.stderr[-2000:]
    works, interrupted, free = done.stdout.split()
    assert free == "True" and int(interrupted) > 10  # 60 in about a second and a half on an idle machine (without
    # the hold, some 50 in 90 broke logging's hook); 7 in two seconds beside a loaded suite
    assert works == str(load_keeper("sandbox").isolation()[0])  # left alone, the trial says what this machine has
