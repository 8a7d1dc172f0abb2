"""Isolation by construction: every namespace a user may make, a default-deny list of system calls, a launcher
that starts where the model writes nothing and reads what the interpreter says, never the environment.

Each check is beside the attack it stops, through real processes: the person's System V shared memory and
session keyring, another process's memory, a changed personality, a system call no list names, a library or a
module planted in the working copy for the launcher to load, a folder above the workspace named in PYTHONPATH, a
virtual environment made in the person's folder. The filter itself is also checked as the BPF program it is, for
both machines it is written for, by the small interpreter below.
"""
import ctypes
import errno
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import fake_gemini as api
from conftest import load_keeper
from test_confinement import both_ways, files_holding
from test_fallback import evolved_seed, outcomes, run_fallback
from test_sandbox import ATTEMPTS, SANDBOX, attempt, place, policy_in  # noqa: F401 (place: a fixture)

sandbox = load_keeper("sandbox")
MACHINE = os.uname().machine
filtered = pytest.mark.skipif(MACHINE not in sandbox.SECCOMP_MACHINES or not sys.platform.startswith("linux"),
                              reason=f"no seccomp filter is written for {MACHINE}")
landlock = pytest.mark.skipif(not sandbox.probe().abi, reason="this kernel has no Landlock")
HEADERS = {"x86_64": Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
           "aarch64": Path("/usr/include/asm-generic/unistd.h")}


def number(name, machine=MACHINE):
    return sandbox.SYSCALLS[name][list(sandbox.SECCOMP_MACHINES).index(machine)]


# --- the filter as a program, on each machine -------------------------------------------------
def run_filter(program, machine, call, args=(), arch=None):
    """What the kernel would do with `program` for a system call: a tiny classic-BPF interpreter over
    struct seccomp_data (nr, arch, instruction pointer, six arguments), the four kinds of step the filter uses."""
    data = struct.pack("<iIQ6Q", call, arch or sandbox.SECCOMP_MACHINES[machine], 0,
                       *[value & (1 << 64) - 1 for value in args], *[0] * (6 - len(args)))
    steps = [struct.unpack("<HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]
    accumulator, pc = 0, 0
    while True:
        code, jump_true, jump_false, k = steps[pc]
        pc += 1
        if code == sandbox.LOAD_WORD:
            accumulator = struct.unpack_from("<I", data, k)[0]
        elif code == sandbox.RETURN:
            return "allow" if k == sandbox.ALLOW else os.strerror(k & 0xFFFF)
        else:
            taken = {sandbox.JUMP_EQUAL: accumulator == k, sandbox.JUMP_AT_LEAST: accumulator >= k,
                     sandbox.JUMP_SET: bool(accumulator & k)}[code]
            pc += jump_true if taken else jump_false


@pytest.mark.parametrize("machine", list(sandbox.SECCOMP_MACHINES))
def test_the_table_of_system_call_numbers_is_the_kernels_own(machine):
    header = HEADERS[machine]
    if not header.is_file():
        pytest.skip(f"{header} is not installed here")
    text = header.read_text()
    defined = {m[1]: int(m[2]) for m in re.finditer(r"#define __NR_(\w+)\s+(\d+)\b", text)}
    if machine == "aarch64":  # a 64-bit machine's names for asm-generic's __NR3264_* numbers
        both = {m[1]: int(m[2]) for m in re.finditer(r"#define __NR3264_(\w+)\s+(\d+)\b", text)}
        defined.update({name: both[name] for name in ("fcntl", "statfs", "fstatfs", "truncate", "ftruncate", "lseek",
                                                      "sendfile", "fstat", "mmap", "fadvise64")},
                       newfstatat=both["fstatat"])
    assert {name: number(name, machine) for name in sandbox.SYSCALLS} == \
        {name: defined.get(name) for name in sandbox.SYSCALLS}
    listed = sandbox.ALLOWED + sandbox.SYSTEM_V + sandbox.REFUSED
    assert len(set(listed)) == len(listed) and set(listed) < set(sandbox.SYSCALLS)


@pytest.mark.parametrize("machine", list(sandbox.SECCOMP_MACHINES))
def test_the_filter_allows_its_list_and_nothing_else_on_each_machine(machine):
    seed, gate = (sandbox.syscall_filter(machine, unix_sockets, own_ipc=True) for unix_sockets in (False, True))
    alone = sandbox.syscall_filter(machine, True, own_ipc=False)  # no IPC namespace of its own
    assert len(seed) // 8 <= 4096  # BPF_MAXINSNS
    call = lambda program, name, *args, **how: run_filter(program, machine, number(name, machine), args, **how)
    for name in sandbox.ALLOWED:
        if number(name, machine) is not None:
            assert call(seed, name) == "allow", name
    for name in sandbox.REFUSED + ["clone3"] + sandbox.SYSTEM_V:
        if number(name, machine) is not None:
            expected = "Function not implemented" if name == "clone3" else "Operation not permitted"
            assert call(seed if name not in sandbox.SYSTEM_V else alone, name) == expected, name
    for name in sandbox.SYSTEM_V:
        assert call(seed, name) == "allow", name  # in an IPC namespace of its own
    unknown = max(n for pair in sandbox.SYSCALLS.values() for n in pair if n is not None) + 1
    assert run_filter(seed, machine, unknown) == run_filter(seed, machine, 999) == "Function not implemented"
    assert call(seed, "socket", 1) == "Operation not permitted" and call(gate, "socket", 1) == "allow"  # AF_UNIX
    for family in (2, 10, 16):  # AF_INET, AF_INET6, AF_NETLINK
        assert call(seed, "socket", family) == "allow"
    for family in (17, 38, 40):  # AF_PACKET, AF_ALG, AF_VSOCK
        assert call(gate, "socket", family) == "Address family not supported by protocol"
    assert call(seed, "socket", 2 | 1 << 32) == "allow"  # the kernel reads an int: the high half is not a way round
    assert call(seed, "clone", 0x01200011) == "allow"  # fork()'s flags: CLONE_CHILD_SETTID|CLEARTID|SIGCHLD
    for flag in (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000):
        assert call(seed, "clone", 0x01200011 | flag) == "Operation not permitted", hex(flag)
    assert call(seed, "ioctl", 0, 0x5401) == "allow"  # TCGETS
    assert call(seed, "ioctl", 0, 0x5412) == call(seed, "ioctl", 0, 0x541C) == "Operation not permitted"
    assert call(seed, "personality", 0xFFFFFFFF) == call(seed, "personality", 0) == "allow"
    assert call(seed, "personality", 0x0400000) == "Operation not permitted"  # READ_IMPLIES_EXEC
    read = number("read", machine)
    assert run_filter(seed, machine, read, arch=0x40000003) == "Operation not permitted"  # i386's ABI
    if machine == "x86_64":
        assert run_filter(seed, machine, read | sandbox.X32_BIT) == "Operation not permitted"  # x32's


# --- the filter on this machine, in a confined child ------------------------------------------
SIBLING = """import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
secret = ctypes.create_string_buffer(b'the-siblings-secret')
pid = os.fork()
if pid == 0:
    time.sleep(30)
    os._exit(0)
try:
    {}
finally:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
"""  # another process of the run, holding a secret in its memory; {}: what is tried on it
READ_MEMORY = """class Iovec(ctypes.Structure):
        _fields_ = [('base', ctypes.c_void_p), ('length', ctypes.c_size_t)]
    into = ctypes.create_string_buffer(32)
    local, remote = Iovec(ctypes.addressof(into), 19), Iovec(ctypes.addressof(secret), 19)
    if libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) != 19:
        raise OSError(ctypes.get_errno(), 'process_vm_readv')
    assert into.value == b'the-siblings-secret'"""
ATTACH = """if libc.ptrace(16, pid, None, None) < 0:  # PTRACE_ATTACH
        raise OSError(ctypes.get_errno(), 'ptrace')"""


def raw(name, *args):
    """A statement making system call `name` by its number; an OSError when it fails."""
    return (f"import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            f"if libc.syscall({', '.join(map(str, [number(name), *args]))}) < 0:\n"
            "    raise OSError(ctypes.get_errno(), 'refused')")


def plain(place, action):
    """The same attempt, not confined: the control that shows the attack works where nothing stops it."""
    root, _ = place
    done = subprocess.run([sys.executable, "-c", ATTEMPTS, json.dumps({"it": action})], cwd=root / "work",
                          capture_output=True, text=True, timeout=60)
    return json.loads(done.stdout)["it"]


@filtered
@pytest.mark.parametrize("what, action, unconfined", [
    ("process_vm_readv of a sibling", SIBLING.format(READ_MEMORY), "done"),
    ("ptrace of a sibling", SIBLING.format(ATTACH), "done"),
    ("personality(READ_IMPLIES_EXEC)", "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                                       "if libc.personality(0x0400000) < 0:\n    raise OSError(ctypes.get_errno(), '')",
     "done"),
    ("unshare a new user namespace", raw("unshare", 0x10000000), None),
    ("clone into a new user namespace", raw("clone", 0x10000000 | 17, 0, 0, 0, 0), None),
    ("mount a tmpfs", raw("mount", "b'none'", "b'/proc/no-such-folder'", "b'tmpfs'", 0, 0), None),  # else ENOENT
    ("io_uring_setup", raw("io_uring_setup", 1, 0), None),
    ("bpf", raw("bpf", 0, 0, 0), None),
    ("userfaultfd", raw("userfaultfd", 0), None),
    ("keyctl on the session keyring", raw("keyctl", 0, -3, 0), None),  # KEYCTL_GET_KEYRING_ID
])
def test_what_the_filter_refuses(place, what, action, unconfined):
    if unconfined:
        assert plain(place, action) == unconfined, what  # the attack, where nothing stops it
    assert attempt(place, action) == "EPERM", what
    assert attempt(place, action, policy_in(place, own_servers=True)) == "EPERM", what  # the gate's tests too


@filtered
def test_the_persons_folder_can_be_neither_watched_nor_its_files_attributes_read(place):
    """The red team's: Landlock checks neither, so a seed watched the person's folder with inotify and landed the
    names of the files the person saved meanwhile, and listed the attributes of .env. Copies still work."""
    root, _ = place
    env = root / "user" / ".env"
    os.setxattr(env, "user.mark", b"the person's")
    watch = ("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nfd = libc.inotify_init1(0)\n"
             f"if fd < 0 or libc.inotify_add_watch(fd, {str(root / 'user').encode()!r}, 0x100) < 0:\n"
             "    raise OSError(ctypes.get_errno(), 'inotify')")
    attributes = f"os.listxattr({str(env)!r})"
    assert plain(place, watch) == "done" and plain(place, attributes) == "done"  # where nothing stops them
    for policy in (None, policy_in(place, own_servers=True)):  # the seed's, the gate's
        assert attempt(place, watch, policy) == "ENOSYS"
        assert attempt(place, attributes, policy) == errno.errorcode[errno.EOPNOTSUPP]  # ENOTSUP, its other name
        assert attempt(place, "open('a', 'w').write('x'); import shutil; shutil.copy2('a', 'b'); "
                              "shutil.copytree('.', '../temp/tree', dirs_exist_ok=True)",
                       policy) == "done"


@filtered
def test_a_system_call_no_list_names_is_missing_and_the_query_forms_work(place):
    assert attempt(place, raw("clone3", 0, 0)) == "ENOSYS"  # glibc falls back to clone
    assert attempt(place, "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                          "if libc.syscall(999) < 0:\n    raise OSError(ctypes.get_errno(), '')") == "ENOSYS"
    assert attempt(place, "import ctypes\nassert ctypes.CDLL(None).personality(0xFFFFFFFF) >= 0") == "done"
    assert attempt(place, "socket.socket(socket.AF_PACKET, socket.SOCK_RAW)") == "EAFNOSUPPORT"


@filtered
def test_the_persons_session_keyring_is_out_of_reach(place, tmp_path):
    secret = f"keyring-secret-{uuid.uuid4().hex}"
    search = ("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
              f"key = libc.syscall({number('keyctl')}, 10, -3, b'user', b'seed-test', 0)  # KEYCTL_SEARCH\n"
              "buffer = ctypes.create_string_buffer(200)\n"
              f"if key < 0 or libc.syscall({number('keyctl')}, 11, key, buffer, 200) < 0:  # KEYCTL_READ\n"
              "    raise OSError(ctypes.get_errno(), 'keyctl')\nprint(buffer.value.decode(), file=sys.stderr)")
    person = ("import ctypes, subprocess, sys\nlibc = ctypes.CDLL(None, use_errno=True)\n"
              f"if libc.syscall({number('keyctl')}, 1, b'seed-test-session') < 0:  # KEYCTL_JOIN_SESSION_KEYRING\n"
              "    sys.exit(77)\n"
              f"if libc.syscall({number('add_key')}, b'user', b'seed-test', {secret.encode()!r}, {len(secret)},"
              " -3) < 0:\n"
              "    sys.exit(77)\n"
              "for argv, cwd in json.loads(sys.argv[1]):\n"
              "    print(subprocess.run(argv, cwd=cwd, capture_output=True, text=True).stdout, end='')\n")
    root, _ = place
    argv = [sys.executable, "-c", ATTEMPTS, json.dumps({"it": search})]
    runs = [(argv, str(root / "work")), (sandbox.command(argv, policy_in(place), root / "work"), sandbox.START)]
    done = subprocess.run([sys.executable, "-c", "import json\n" + person, json.dumps(runs)], capture_output=True,
                          text=True, timeout=60)
    if done.returncode == 77:
        pytest.skip("this kernel gives no session keyring to join")
    unconfined, confined_run = map(json.loads, done.stdout.splitlines())
    assert (unconfined["it"], confined_run["it"]) == ("done", "EPERM"), done.stderr  # found where nothing stops it
    assert secret not in done.stdout


# --- ordinary work, under the filter, through the keeper --------------------------------------
ORDINARY = """import asyncio, mmap, multiprocessing, os, signal, socket, sqlite3, subprocess, sys, tempfile, threading


def double(x):
    return 2 * x


async def echo():
    server = await asyncio.start_server(lambda r, w: (w.write(b'echo'), w.close()), '127.0.0.1', 0)
    reader, writer = await asyncio.open_connection(*server.sockets[0].getsockname()[:2])
    said = await reader.read(4)
    writer.close()
    server.close()
    return said.decode()


def everything(servers):
    tempfile.tempdir = '/dev/shm'  # forkserver's socket is made there: a UNIX socket's path holds 107 bytes at most
    done = []
    thread = threading.Thread(target=done.append, args=('thread',))
    thread.start()
    thread.join()
    done.append(subprocess.run([sys.executable, '-c', 'print("subprocess")'], capture_output=True,
                               text=True).stdout.strip())
    for method in ['fork', 'spawn'] + (['forkserver'] if servers else []):
        with multiprocessing.get_context(method).Pool(2) as pool:
            done.append(f'{method} {pool.map(double, [1, 2])}')
    if servers:
        with multiprocessing.Manager() as manager:
            done.append(f'manager {manager.list([3])[0]}')
        done.append(asyncio.run(echo()))
    database = sqlite3.connect(os.path.join(tempfile.mkdtemp(), 'notes.db'))
    database.execute('create table notes(text)')
    database.execute("insert into notes values ('sqlite')")
    done.append(database.execute('select text from notes').fetchone()[0])
    with mmap.mmap(-1, 4096) as memory:
        memory[:4] = b'mmap'
        done.append(memory[:4].decode())
    signal.signal(signal.SIGUSR1, lambda *_: done.append('signal'))
    os.kill(os.getpid(), signal.SIGUSR1)
    done.append(str(len(os.urandom(8))))
    return done
"""
EXPECTED = ["thread", "subprocess", "fork [2, 4]", "spawn [2, 4]", "sqlite", "mmap", "signal", "8"]


def test_ordinary_work_runs_under_the_filter_in_the_seed_and_the_gate(workspace, env, gemini):
    gate = EXPECTED[:4] + ["forkserver [2, 4]", "manager 3", "echo"] + EXPECTED[4:]
    test = f"import ordinary\n\n\ndef test_everything():\n    assert ordinary.everything(True) == {gate!r}\n"
    (workspace / "ordinary.py").write_text(ORDINARY)
    (workspace / "seed.py").write_text(evolved_seed(
        "    import ordinary\n    pathlib.Path('seen_by_the_seed.txt').write_text(repr(ordinary.everything(False)))\n"
        "    pathlib.Path('tests').mkdir(exist_ok=True)\n"
        f"    pathlib.Path('tests/test_ordinary.py').write_text({test!r})"))
    done = run_fallback(workspace, env, "--iterations", "1", timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert outcomes(workspace) == ["landed: 2 file(s) changed"], (workspace / "iteration_log.md").read_text()
    assert (workspace / "seen_by_the_seed.txt").read_text() == repr(EXPECTED)


# --- System V IPC: the person's out of reach, the run's own gone with it ----------------------
PEEK = """import ctypes, errno, json, os, pathlib


def peek(shmid, key, where):
    \"\"\"Read every System V segment this process can name (the person's id, and those /proc lists), then leave
    one of its own under `key`: what happened, written to `where`.\"\"\"
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    ids, seen = {shmid}, []
    try:
        ids |= {int(line.split()[1]) for line in open('/proc/sysvipc/shm').readlines()[1:]}
    except OSError:
        pass
    for number in sorted(ids):
        address = libc.shmat(number, None, 0o10000)  # SHM_RDONLY
        if address in (None, ctypes.c_void_p(-1).value):
            seen.append(errno.errorcode[ctypes.get_errno()])
        else:
            seen.append(ctypes.string_at(address, 64).split(b'\\0')[0].decode(errors='replace'))
    made = libc.shmget(key, 4096, 0o1000 | 0o600)  # IPC_CREAT
    seen.append('made' if made >= 0 else errno.errorcode[ctypes.get_errno()])
    pathlib.Path(where).write_text(json.dumps(seen))
"""


@pytest.fixture
def persons_segment():
    """A System V shared memory segment of the person's (mode 600), holding a secret: (its id, the secret)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    secret = f"shm-secret-{uuid.uuid4().hex}"
    shmid = libc.shmget(0, 4096, 0o1000 | 0o600)  # IPC_PRIVATE
    if shmid < 0:
        pytest.skip(f"this kernel gives no System V shared memory ({os.strerror(ctypes.get_errno())})")
    address = libc.shmat(shmid, None, 0)
    ctypes.memmove(address, secret.encode(), len(secret))
    libc.shmdt(ctypes.c_void_p(address))
    yield shmid, secret
    libc.shmctl(shmid, 0, None)  # IPC_RMID


@both_ways
def test_the_persons_system_v_memory_is_out_of_reach_and_the_runs_own_is_gone_with_it(workspace, env, gemini,
                                                                                      persons_segment, namespaces):
    env["SEED_NAMESPACES"] = namespaces
    shmid, secret = persons_segment
    seed_key, gate_key = (int.from_bytes(os.urandom(3), "big") + 1 for _ in range(2))
    test = (f"import os, peek\n\n\ndef test_peek():\n    peek.peek({shmid}, {gate_key}, "
            "os.path.join(os.environ['TMPDIR'], 'seen_by_the_gate.json'))\n")
    gemini.reply(api.answer([("tests/test_peek.py", test)]))
    (workspace / "peek.py").write_text(PEEK)
    seed = (workspace / "seed.py").read_text()
    (workspace / "seed.py").write_text(seed.replace(
        "def main():\n", f"def main():\n    import peek\n    peek.peek({shmid}, {seed_key}, 'seen_by_the_seed.json')\n",
        1))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    by_seed = json.loads((workspace / "seen_by_the_seed.json").read_text())
    by_gate = json.loads((workspace / ".seed" / "tmp" / "seen_by_the_gate.json").read_text())
    assert outcomes(workspace)[0].startswith("landed"), outcomes(workspace)  # the gate's test ran and passed
    refused = "EINVAL" if namespaces == "1" else "EPERM"  # not in its namespace; refused by the filter
    for seen in (by_seed, by_gate):  # without namespaces, /proc lists the machine's segments: each refused
        assert (set(seen[:-1]), seen[-1]) == ({refused}, "made" if namespaces == "1" else "EPERM"), seen
    assert not files_holding(workspace, secret) and secret not in done.stdout + done.stderr
    libc = ctypes.CDLL(None, use_errno=True)
    assert [libc.shmget(key, 0, 0) for key in (seed_key, gate_key)] == [-1, -1]  # none outlived its run


# --- the launcher: where it starts, what it reads ---------------------------------------------
SHIM = """#include <fcntl.h>
#include <string.h>
#include <unistd.h>
__attribute__((constructor)) static void loaded(void) {
    int fd = open(MARKER, O_WRONLY | O_CREAT | O_APPEND, 0600);
    write(fd, NAME "\\n", strlen(NAME) + 1);
    close(fd);
}
"""  # a library that says it was loaded, planted under the name of one the launcher needs


def libraries_the_launcher_needs():
    """The names the dynamic linker looks for when the launcher starts and imports ctypes (but libc's own)."""
    names = set()
    for binary in [sys.executable, *Path(sys.base_exec_prefix).glob("lib/python3*/lib-dynload/_ctypes*.so")]:
        listed = subprocess.run(["ldd", str(binary)], capture_output=True, text=True).stdout
        names |= set(re.findall(r"^\s*(lib\S+\.so\S*) =>", listed, re.M))
    return sorted(names - {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0"})


@filtered
@pytest.mark.skipif(not (shutil.which("gcc") and shutil.which("ldd")), reason="needs gcc and ldd to plant libraries")
def test_the_launcher_loads_nothing_of_the_working_copy_whatever_the_environment_says(place, tmp_path):
    root, _ = place
    work, marker = root / "work", tmp_path / "loaded.txt"
    (tmp_path / "shim.c").write_text(SHIM)
    names = libraries_the_launcher_needs()
    assert names, "no library of the launcher's to plant"
    for name in names:
        subprocess.run(["gcc", "-shared", "-fPIC", f'-DMARKER="{marker}"', f'-DNAME="{name}"', "-o", work / name,
                        tmp_path / "shim.c"], check=True, timeout=60)
    (work / "json.py").write_text(f"open({str(marker)!r}, 'a').write('json.py\\n')\n")  # the launcher imports json
    env = {**os.environ, "PYTHONPATH": ":", "LD_LIBRARY_PATH": ":"}  # empty entries: the folder it starts in
    launcher = sandbox.command(["/bin/pwd"], policy_in(place), work)
    old_way = subprocess.run(launcher, cwd=work, env=env, capture_output=True, text=True, timeout=60)
    assert marker.is_file() or old_way.returncode != 0, old_way  # the attack: started in the working copy, the
    marker.unlink(missing_ok=True)  # launcher loads a planted library (its constructor ran, or the launcher died of it)
    done = subprocess.run(launcher, cwd=sandbox.START, env=env, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, marker.exists()) == (0, f"{work}\n", False), done.stderr


@landlock
def test_no_environment_variable_widens_what_a_run_reads(workspace, env, gemini, tmp_path):
    home_secret = tmp_path / "home" / ".secret"
    home_secret.parent.mkdir()
    home_secret.write_text("not for the model\n")
    env.update(PYTHONPATH=f"{tmp_path}:", PYTHONUSERBASE=str(tmp_path))  # a folder above the workspace
    (workspace / "seed.py").write_text(evolved_seed(
        f"    try:\n        seen = open({str(home_secret)!r}).read()\n    except OSError as error:\n"
        "        seen = type(error).__name__\n    pathlib.Path('seen.txt').write_text(seen)"))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (workspace / "seen.txt").read_text() == "PermissionError"


VENV_KEEPER = """import importlib.util, json, subprocess, sys
spec = importlib.util.spec_from_file_location("sandbox", sys.argv[1])
sandbox = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sandbox)
policy = sandbox.policy_for(sys.argv[2], sys.argv[3], None, {})
done = subprocess.run(sandbox.command([sys.executable, "-c", sys.argv[4], sys.argv[5]], policy, sys.argv[2]),
                      cwd=sandbox.START, capture_output=True, text=True)
print(done.stdout or done.stderr, end="")
"""  # a keeper whose interpreter is the person's virtual environment: it launches that interpreter, confined


@landlock
@pytest.mark.parametrize("venv", [".", ".venv"])
def test_a_virtual_environment_in_the_persons_folder_runs_and_the_folder_stays_unreadable(place, venv):
    root, _ = place
    person = root / "user"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", person / venv], check=True, timeout=120)
    python = person / venv / "bin" / "python"
    packages = subprocess.run([python, "-c", "import site; print(site.getsitepackages()[0])"], capture_output=True,
                              text=True, check=True).stdout.strip()
    Path(packages, "persons_package.py").write_text("INSTALLED = True\n")  # as pip install puts one there
    tries = {"python's own": "import json, sqlite3, ssl", "the venv's packages": "import persons_package",
             ".env": f"open({str(person / '.env')!r}).read()", "the folder": f"os.listdir({str(person)!r})"}
    done = subprocess.run([python, "-I", "-c", VENV_KEEPER, str(SANDBOX), str(root / "work"), str(root / "temp"),
                           ATTEMPTS, json.dumps(tries)], capture_output=True, text=True, timeout=60)
    assert json.loads(done.stdout) == {"python's own": "done", "the venv's packages": "done", ".env": "EACCES",
                                       "the folder": "EACCES"}, done.stdout + done.stderr


# --- where the machine allows less ------------------------------------------------------------
UNKNOWN_MACHINE = """import importlib.util, sys
spec = importlib.util.spec_from_file_location("sandbox", sys.argv[1])
sandbox = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sandbox)
sandbox.SECCOMP_MACHINES = {}
sandbox.launch(sys.argv[2], sys.argv[3], sys.argv[4:])
"""  # the launcher on a machine whose system call numbers are not written here


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="seccomp is Linux's")
def test_a_machine_without_a_filter_says_so_in_one_line_and_runs(place):
    root, _ = place
    done = subprocess.run([sys.executable, "-I", "-S", "-c", UNKNOWN_MACHINE, str(SANDBOX),
                           json.dumps(policy_in(place)), str(root / "work"), "/bin/pwd"], cwd=sandbox.START,
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, f"{root / 'work'}\n")
    assert re.fullmatch(r"sandbox: no seccomp filter on \S+: every system call is open \(UNIX sockets, System V "
                        r"IPC, the keyring, ptrace\)\n", done.stderr)


def test_a_working_folder_that_cannot_be_entered_stops_the_run_in_one_line(place):
    root, _ = place
    gone = root / "gone"
    done = subprocess.run(sandbox.command(["/bin/pwd"], policy_in(place), gone), cwd=sandbox.START,
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (78, "")
    assert done.stderr == f"sandbox: the working folder cannot be entered (No such file or directory: {gone})\n"


@landlock
def test_a_keeper_run_from_a_venv_made_in_the_folder_itself_lands_and_its_env_stays_unread(workspace, env, gemini):
    """`python -m venv .` in the person's folder: the keeper's Python is there, so is .env; each run starts."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", workspace], check=True, timeout=120)
    python = workspace / "bin" / "python"
    here, there = (subprocess.run([interpreter, "-c", "import site; print(site.getsitepackages()[0])"],
                                  capture_output=True, text=True, check=True).stdout.strip()
                   for interpreter in (sys.executable, python))
    shutil.copytree(here, there, copy_function=os.link, dirs_exist_ok=True)  # the keeper's packages, as pip puts them
    secret = f"token-{uuid.uuid4().hex}"
    (workspace / ".env").write_text(f"OTHER_TOKEN={secret}\n")
    (workspace / "seed.py").write_text(evolved_seed(  # requests and pytest are in the venv only
        "    import requests\n    try:\n        seen = open(sys.prefix + '/.env').read()\n"
        "    except OSError as error:\n        seen = type(error).__name__\n"
        "    pathlib.Path('seen.txt').write_text(seen)\n"
        "    pathlib.Path('tests').mkdir(exist_ok=True)\n"
        "    pathlib.Path('tests/test_venv.py').write_text('import sys\\n\\n\\ndef test_venv():\\n"
        "    assert sys.prefix != sys.base_prefix\\n')"))
    done = subprocess.run([python, "fallback.py", "--delay", "0", "--iterations", "1"], cwd=workspace, env=env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert outcomes(workspace) == ["landed: 2 file(s) changed"], (workspace / "iteration_log.md").read_text()
    assert (workspace / "seen.txt").read_text() == "PermissionError"
