"""The run's reach, end to end through `python fallback.py`: what the model's code can take with it, leave behind
or find on this machine.

A seed, or a module the gate imports, tries what code that optimises for "tests pass" might: read the user's
shell variables, leave a daemon running, flood the machine with processes or /dev/shm, find a server of the
user's through /proc/net/tcp, send UDP on loopback, read another program's command line. Each attempt comes to
nothing and the loop goes on. Where the kernel refuses namespaces (forced here with SEED_NAMESPACES=0), the
keeper still ends every process a run leaves and takes away what it left in /dev/shm.
"""
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

import fake_gemini as api
from conftest import BYTECODE, PRODUCT_FILES, REPO, WITHOUT_NAMESPACES, load_keeper, run_seed
from test_fallback import evolved_seed, fallback_process, outcomes, run_fallback, wait_for

sandbox = load_keeper("sandbox")
ISOLATED, HOW = sandbox.isolation()
needs_namespaces = pytest.mark.skipif(not ISOLATED, reason=f"this machine gives a run no namespaces: {HOW}")
both_ways = pytest.mark.parametrize("namespaces", [pytest.param("1", marks=needs_namespaces),
                                                   pytest.param("0", marks=WITHOUT_NAMESPACES)])
DAEMON = """import os, sys


def start(marker):
    \"\"\"A double-forked setsid daemon, as a model's code might leave one: it outlives its parents.\"\"\"
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(120)", marker])
        os._exit(0)
    os.wait()
"""


def with_marker(marker):
    """Process ids, anywhere on this machine, whose command line holds `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def files_holding(root, *secrets):
    """The files under root that hold any of the secrets."""
    return [p for p in root.rglob("*") if p.is_file() and any(s.encode() in p.read_bytes() for s in secrets)]


@pytest.mark.skipif(not sandbox.probe().confined, reason="this machine cannot confine a process (no Landlock)")
def test_the_keepers_own_tests_run_the_current_seed_confined(workspace, env, gemini, tmp_path):
    """The model rewrites seed.py: the keeper's tests (the seed's contract) run it as the keeper does, never as the
    person: the .env beside the folder stays unread, nothing outside it is written."""
    secret = tmp_path / ".env"
    secret.write_text(f"GEMINI_API_KEY={'AIzaSy' + uuid.uuid4().hex}\n")
    spy = (f"import pathlib\ntry:\n    print('read:', pathlib.Path({str(secret)!r}).read_text())\nexcept OSError as e:\n"
           f"    print('refused:', e)\ntry:\n    pathlib.Path({str(tmp_path / 'written')!r}).write_text('x')\n"
           "except OSError as e:\n    print('refused:', e)\n")
    (workspace / "seed.py").write_text(spy)
    done = run_seed(workspace, env)
    assert done.stdout.count("refused:") == 2 and "GEMINI_API_KEY" not in done.stdout, done.stdout + done.stderr
    assert not (tmp_path / "written").exists()


def test_what_the_current_seed_writes_in_its_workspace_never_reaches_the_projects_own_files(workspace, env, gemini):
    """The seed may write its whole workspace, the keeper's copy in it too: those must be copies. The attack, which
    got through when the workspaces linked the keeper's bytecode to the project's (same inode: a write in place,
    header kept, is bytecode the next test's keeper runs as the person): every keeper file, rewritten in place."""
    ours = {path: path.read_bytes() for _, path in BYTECODE} | {REPO / rel: (REPO / rel).read_bytes()
                                                                 for rel in PRODUCT_FILES if (REPO / rel).is_file()}
    (workspace / "seed.py").write_text(
        "import pathlib\nrewritten = 0\nfor path in pathlib.Path('.').rglob('*'):\n"
        "    if path.is_file() and path.parts[0] != '.seed':\n        with open(path, 'r+b') as file:\n"
        "            file.seek(0, 2)\n            file.write(b'# the seed was here')\n        rewritten += 1\n"
        "print('rewritten', rewritten)\n")
    done = run_seed(workspace, env)
    assert int(done.stdout.split()[-1]) >= len(ours), done.stdout + done.stderr
    assert [str(path) for path, data in ours.items() if path.read_bytes() != data] == []


def test_no_variable_of_the_users_shell_reaches_the_seed_or_the_gate(workspace, env, gemini):
    secrets = {name: f"{name.lower()}-{uuid.uuid4().hex}" for name in
               ("GOOGLE_API_KEY", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "ANTHROPIC_API_KEY")}
    env.update(secrets)
    spy = "import os, pathlib\n(pathlib.Path(os.environ['TMPDIR']) / 'seen_by_the_gate.txt').write_text(str(os.environ))\n"
    gemini.reply(api.answer([("spy.py", spy), ("tests/test_spy.py", "import spy\n\n\ndef test_spy():\n    pass\n")]))
    seed = (workspace / "seed.py").read_text()
    (workspace / "seed.py").write_text(seed.replace(
        "def main():\n", "def main():\n    Path('seen_by_the_seed.txt').write_text(repr(dict(os.environ)))\n", 1))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert outcomes(workspace) == ["landed: 3 file(s) changed"]
    by_seed = (workspace / "seen_by_the_seed.txt").read_text()
    assert "'PATH': " in by_seed and "'GEMINI_API_BASE': 'http://127.0.0.1:" in by_seed  # what it needs, it has
    assert (workspace / ".seed" / "tmp" / "seen_by_the_gate.txt").exists()
    values = list(secrets.values())
    assert not files_holding(workspace, *values)
    assert not any(v in done.stdout + done.stderr + "".join(map(str, gemini.prompts())) for v in values)


@both_ways
def test_a_daemon_the_seed_or_the_gate_leaves_is_gone_with_its_run(workspace, env, gemini, tmp_path, namespaces):
    env["SEED_NAMESPACES"] = namespaces
    seed_marker, gate_marker = f"seed-daemon-{uuid.uuid4().hex}", f"gate-daemon-{uuid.uuid4().hex}"
    release = tmp_path / "release"
    held = ("import os, pathlib, time\n\n\ndef test_held():\n"
            "    (pathlib.Path(os.environ['TMPDIR']) / 'gate_started').write_text('x')\n"
            "    deadline = time.time() + 30\n"
            f"    while not os.path.exists({str(release)!r}) and time.time() < deadline:\n        time.sleep(0.05)\n")
    files = {"daemon.py": DAEMON, "spawner.py": f"import daemon\n\ndaemon.start({gate_marker!r})\n",
             "tests/test_held.py": held}
    (workspace / "daemon.py").write_text(DAEMON)
    (workspace / "seed.py").write_text(evolved_seed(
        f"    import daemon\n    daemon.start({seed_marker!r})\n    pathlib.Path('tests').mkdir(exist_ok=True)\n"
        f"    for rel, text in {files!r}.items():\n        pathlib.Path(rel).write_text(text)"))
    keeper = subprocess.Popen([sys.executable, "fallback.py", "--delay", "0", "--iterations", "1"], cwd=workspace,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: (workspace / ".seed" / "tmp" / "gate_started").exists() or keeper.poll() is not None, 60)
        during_the_gate = with_marker(seed_marker)
    finally:
        release.write_text("go")
        output = keeper.communicate(timeout=90)[0]
    assert keeper.returncode == 0, output
    assert (workspace / ".seed" / "tmp" / "gate_started").exists(), output  # the gate ran, the test saw it
    assert during_the_gate == []  # the seed's run was over: its daemon was gone before the gate started
    assert with_marker(seed_marker) == [] and with_marker(gate_marker) == []


@pytest.fixture
def flood_answer():
    flood = ("import os, time\n\nCHILDREN = []\nfor _ in range(400):\n    pid = os.fork()\n    if pid == 0:\n"
             "        time.sleep(30)\n        os._exit(0)\n    CHILDREN.append(pid)\n")
    return api.answer([("flood.py", flood), ("tests/test_flood.py", "import flood\n\n\ndef test_flood():\n"
                                                                     "    assert len(flood.CHILDREN) == 400\n")])


@needs_namespaces
def test_a_fork_flood_is_bounded_and_fails_as_the_codes_fault(workspace, env, gemini, flood_answer):
    env["SEED_PROCESSES"] = "100"
    gemini.reply(flood_answer)
    gemini.reply(api.answer([("calm.py", "CALM = True\n")]))
    done = run_fallback(workspace, env, "--iterations", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert outcomes(workspace) == ["rolled back: import check failed", "landed: 1 file(s) changed"]
    assert "BlockingIOError" in (workspace / "iteration_log.md").read_text()  # fork(): Resource temporarily unavailable
    assert not (workspace / "flood.py").exists()


@both_ways
def test_what_a_run_puts_in_dev_shm_is_bounded_and_never_left_there(workspace, env, gemini, namespaces):
    env.update(SEED_NAMESPACES=namespaces, SEED_SHM_MB="8")
    name = f"seed-fill-{uuid.uuid4().hex}"
    (workspace / "seed.py").write_text(evolved_seed(
        f"    with open('/dev/shm/{name}', 'wb') as shm:\n        for _ in range(32):\n"
        "            shm.write(bytes(1 << 20))\n            shm.flush()"))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert not Path("/dev/shm", name).exists()
    assert outcomes(workspace)[0].startswith("rolled back: seed.py crashed")
    log = (workspace / "iteration_log.md").read_text()
    assert ("No space left on device" if namespaces == "1" else "over its limit of 8 MB (SEED_SHM_MB)") in log


@pytest.fixture
def users_servers():
    """A TCP server on an ephemeral loopback port and a UDP one, as the user's programs have: what reaches them."""
    tcp, udp = socket.create_server(("127.0.0.1", 0)), socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.settimeout(0.1)
    reached = []

    def accept():
        while True:
            try:
                reached.append(("tcp", tcp.accept()[0].recv(100)))
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield tcp.getsockname()[1], udp, reached
    tcp.close()
    try:
        reached.append(("udp", udp.recv(100)))
    except OSError:
        pass
    udp.close()


@needs_namespaces
def test_a_gate_test_finds_no_server_of_the_users_and_its_udp_arrives_nowhere(workspace, env, gemini, users_servers):
    tcp_port, udp, reached = users_servers
    reach = ("import socket\n\n\ndef test_reach():\n    ports = {%d}\n"
             "    for line in open('/proc/net/tcp').readlines()[1:]:\n"
             "        local, state = line.split()[1], line.split()[3]\n        if state == '0A':\n"
             "            ports.add(int(local.split(':')[1], 16))\n    for port in ports:\n        try:\n"
             "            socket.create_connection(('127.0.0.1', port), timeout=2).sendall(b'from the gate')\n"
             "        except OSError:\n            pass\n"
             "    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'from the gate', ('127.0.0.1', %d))\n"
             ) % (tcp_port, udp.getsockname()[1])
    gemini.reply(api.answer([("reach.py", "REACH = True\n"), ("tests/test_reach.py", reach)]))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert outcomes(workspace) == ["landed: 2 file(s) changed"]  # the answer came through the relay, the gate ran
    time.sleep(0.2)
    try:
        reached.append(("udp", udp.recv(100)))
    except OSError:
        pass
    assert reached == []


@needs_namespaces
def test_a_secret_on_another_programs_command_line_is_not_readable(workspace, env, gemini):
    secret = f"SECRETVALUE-{uuid.uuid4().hex}"
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", secret])  # as `sleep 60 SECRET`
    try:
        (workspace / "seed.py").write_text(evolved_seed(
            "    import os\n    seen = []\n    for pid in os.listdir('/proc'):\n        try:\n"
            "            seen.append(open(f'/proc/{pid}/cmdline', 'rb').read().decode(errors='replace'))\n"
            "        except OSError:\n            pass\n    print(seen)\n"
            "    pathlib.Path('seen.txt').write_text(repr(seen))"))
        done = fallback_process(workspace, env, "--iterations", "1")  # beside another program: a process of its own
    finally:
        other.kill()
        other.wait()
    assert done.returncode == 0, done.stdout + done.stderr
    assert outcomes(workspace) == ["landed: 1 file(s) changed"]
    assert sys.executable in (workspace / "seen.txt").read_text()  # it read its own processes' command lines
    assert not files_holding(workspace, secret) and secret not in done.stdout
