"""sandbox: confine a child process (the model's code) with the most this machine offers.

    policy = policy_for(workdir, temp, gateway_port, LIMITS, isolate=isolation()[0])  # what the child may reach
    subprocess.Popen(command([sys.executable, "seed.py"], policy), cwd=workdir, ...)
    end_descendants()                      # after it: whatever it left running (the keeper is their subreaper)
    say(f"confinement: {probe().text}")    # e.g. "Landlock ABI 7: files, truncation, TCP, signals"

`command` puts a launcher in front of the command: `python -I -S -c LAUNCH '<policy json>' <command...>`.
The launcher sets the rlimits and TMPDIR; where the kernel allows (isolation() tried it once), it puts the run
in user, PID, mount and network namespaces of its own, with a relay to the gateway outside them; it sets
no_new_privs (run as root, keeps exec from granting capabilities), confines itself with Landlock, then execs
the command; everything the command starts inherits all of it. Linux: Landlock and namespaces through their
system calls with ctypes (no dependency: the PyPI bindings, landlock 1.0.0.dev5 or py-landlock 0.1, are
pre-releases that add little). macOS: sandbox-exec with a Seatbelt profile made from the same policy
(generated and tested as text, never run here). With `require` (SEED_SANDBOX=require) a machine without
Landlock or sandbox-exec refuses to run the code: one line, exit 78.

The threat is code from a model that optimises for its tests passing: careless, sometimes odd, not a
determined attacker with kernel exploits. What confines it, and what each part needs of the kernel:
- Files (Landlock, Linux 5.13+): it writes only its working copy, its private temp folder, /dev/null and
  its kin and /dev/shm, and makes no device nodes; it reads and executes only the system folders, Python and
  its packages, and of /etc what Python, TLS and name lookup read (ETC_LINUX; not /etc/shadow, even as root):
  not the user's folder (.env, backups/), the home, the disks in /dev, nor another process's environment or
  memory. truncate(2) needs ABI 3 (6.2), TCP rules ABI 4 (6.7), signal and abstract UNIX
  socket scoping ABI 6 (6.12); ABI 1 refuses moving a file to another folder.
- Processes (a user namespace, then a PID namespace, Linux 3.8+, where unprivileged user namespaces are
  allowed: not on Ubuntu 24.04's default AppArmor, nor in most containers): the run's first process is PID 2
  under an init of its own (the launcher's child, which reaps orphans); when the run ends, its init ends and
  the kernel kills everything left in the namespace, a double-forked setsid daemon included. Its /proc is a
  fresh one: it sees only its own processes, never another program's command line. The number of its
  processes (SEED_PROCESSES): RLIMIT_NPROC, which counts per user namespace since Linux 5.14, so in the run's
  own it counts only the run's, never root's; for root, the PID namespace's own pid_max (Linux 6.14+) bounds
  them, at 300 at the least (root on an older kernel: unbounded).
- Network (a network namespace): only a loopback of its own. The gate's tests bind and reach their own
  servers there on any port; the user's loopback servers, TCP or UDP, and every other host are out of reach,
  and abstract UNIX sockets are the namespace's own. The seed reaches the gateway at the same address,
  127.0.0.1:PORT: the launcher makes a listening socket there inside and hands it (SCM_RIGHTS) to a relay it
  forked before entering the namespaces, which carries each connection to the gateway outside. The relay is
  out of the run's reach: not in its PID namespace (no PID to name), in the parent user namespace (no
  ptrace), outside its Landlock domain (no signal); it ends with the launcher.
- Modes, times, owners and extended attributes (the mount namespace), which Landlock does not check: every mount
  read-only but the folders the run writes and /dev/shm (read_only_but).
- /dev/shm (the mount namespace): a private tmpfs of SEED_SHM_MB; gone when the run ends. /run, /var/run and
  /tmp/.X11-unix are covered by empty read-only tmpfs, hiding the UNIX sockets of D-Bus, systemd, docker
  and X11. Landlock keeps applying inside, nested after the namespaces are set up.
- UNIX sockets (seccomp, x86_64 and aarch64): the seed makes none (socket(AF_UNIX) refused; socketpair works),
  so it reaches no pathname socket of the user's anywhere; see refuse_unix_sockets. The gate's tests keep them:
  multiprocessing's managers and forkserver (3.14's default start method) make them.
- The environment (terrarium.clean_env): an allow-list, never the user's shell variables.
Still open with all of the above: for the gate, pathname UNIX sockets at a path the code can guess outside
/run (say ~/.docker/run/docker.sock): seccomp cannot see the path connect() is given, and Landlock ABI 9's
RESOLVE_UNIX, which would refuse them, is not used: no kernel here offers it to test it. Learning that a path
exists, its size and times (stat is not checked); reading the world-readable files of /sys; CPU, memory and
disk beyond the rlimits; the kernel's own bugs. Refusals are not sent to the audit log (ABI 7 could): a model that keeps trying would flood it.

Without namespaces (refused by the kernel, or SEED_NAMESPACES=0; macOS): the keeper is the child subreaper
of its runs (Linux 3.4+), so every orphan a run leaves becomes its child, and after each run it stops, then
kills, every process below it until none is left; a keeper killed with kill -9 ends only the process group
of the run it left at its next start (a daemon that left that group lives on). macOS has no subreaper:
there a daemon outlives its run. Processes: RLIMIT_NPROC at the user's count at launch plus
SEED_PROCESSES (root unbounded). /dev/shm is the machine's: what this user made there during the run is
taken away after it and counted (over SEED_SHM_MB, the run fails; a file another program of the same
user made there meanwhile goes too). Network: Landlock's TCP rules (ABI 4+): the seed reaches only the gateway's
port; the gate's tests, the kernel's ephemeral ports, where their port-0 servers land: 28,232 rules, 30 to
55 ms per launch here, and any server of the user's on such a port is reachable too (one found through
/proc/net/tcp is). UDP, and pathname UNIX sockets anywhere, are open; /proc shows every process's command
line (not its environment). A kernel with neither Landlock nor namespaces confines only by the rlimits,
the environment and the keeper's clean-up: the code can read and write whatever the user can.
"""
import contextlib
import ctypes
import errno
import fcntl
import functools
import glob
import json
import os
import re
import resource
import select
import signal
import site
import socket
import stat
import struct
import sys
import threading
import time
from collections import namedtuple

# --- settings ---------------------------------------------------------------------------------
SYSTEM_LINUX = ["/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/opt", "/proc", "/sys",
                "/dev/random", "/dev/urandom"]  # read and execute; not all of /dev: raw disks, as root
ETC_LINUX = ["/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/ld.so.preload",  # the dynamic linker
             "/etc/nsswitch.conf", "/etc/hosts", "/etc/host.conf", "/etc/resolv.conf", "/etc/gai.conf",  # name lookup
             "/etc/services", "/etc/protocols", "/etc/networks", "/etc/passwd", "/etc/group",
             "/etc/ssl", "/etc/pki", "/etc/ca-certificates", "/etc/crypto-policies", "/etc/gnutls",  # TLS
             "/etc/localtime", "/etc/timezone", "/etc/locale.alias", "/etc/mime.types", "/etc/os-release",  # Python
             "/etc/python3", "/etc/alternatives"]  # and /etc/python3.N: what a run reads of /etc; never all of it
# (/etc/shadow and /etc/gshadow to root, the machine's id, other programs' settings)
SYSTEM_MACOS = ["/usr", "/bin", "/sbin", "/System", "/Library", "/opt", "/private/var/db", "/dev/random",
                "/dev/urandom"]
ETC_MACOS = ["/private/etc/ssl", "/private/etc/hosts", "/private/etc/resolv.conf", "/private/etc/services",
             "/private/etc/protocols", "/private/etc/passwd", "/private/etc/group", "/private/etc/localtime"]
DEVICES = ["/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/shm"]  # written like files
SANDBOX_EXEC = "/usr/bin/sandbox-exec"
EX_CONFIG = 78          # as fallback.py's exit code for a setup the user must fix
EPHEMERAL = "/proc/sys/net/ipv4/ip_local_port_range"  # the ports bind(port 0) picks from (IPv6 too)

# Landlock, from linux/landlock.h. The system call numbers are the same on these machines.
MACHINES = {"x86_64", "aarch64", "riscv64", "armv7l", "i686", "ppc64le", "s390x", "loongarch64"}
CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446
KNOWN_ABI = 7           # the newest ABI written for here; a newer kernel is used as this one
FS_RIGHTS = {1: 13, 2: 14, 3: 15, 4: 15, 5: 16, 6: 16, 7: 16}  # how many LANDLOCK_ACCESS_FS_* bits each ABI has
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
MAKE_CHAR, MAKE_BLOCK, TRUNCATE, IOCTL_DEV = 1 << 6, 1 << 11, 1 << 14, 1 << 15
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # the rights a rule on a file may hold
READ_RIGHTS = EXECUTE | READ_FILE | READ_DIR
WRITE_RIGHTS = (IOCTL_DEV << 1) - 1 & ~(MAKE_CHAR | MAKE_BLOCK)  # all of ABI 7's but making device nodes
BIND_TCP, CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX, SCOPE_SIGNAL = 1 << 0, 1 << 1
RULE_PATH_BENEATH, RULE_NET_PORT = 1, 2
VERSION = 1 << 0        # landlock_create_ruleset's flag: return the ABI version
PR_SET_NO_NEW_PRIVS, PR_SET_SECUREBITS = 38, 28
SECBIT_NOROOT = 1 << 0 | 1 << 1  # and locked: uid 0 gains no capabilities at exec
FEATURES = [(1, "files"), (3, "truncation"), (4, "TCP"), (6, "signals")]  # what each ABI adds, for probe()

# Namespaces, from linux/sched.h, mount.h, prctl.h and sockios.h (the same numbers on every Linux machine).
NEW_MOUNTS, NEW_USER, NEW_PIDS, NEW_NET = 0x00020000, 0x10000000, 0x20000000, 0x40000000
READ_ONLY, NO_SUID, NO_DEV, NO_EXEC, RECURSIVE, PRIVATE = 1, 2, 4, 8, 0x4000, 1 << 18
REMOUNT, BIND = 32, 4096
KEPT_FLAGS = {"nosuid": NO_SUID, "nodev": NO_DEV, "noexec": NO_EXEC, "nosymfollow": 256, "noatime": 1024,
              "nodiratime": 2048, "relatime": 1 << 21}  # a mount's own options, kept on a remount (the kernel
# locks them in a user namespace: a remount without them is refused)
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
GET_FLAGS, SET_FLAGS, UP = 0x8913, 0x8914, 1  # SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP
PID_MAX = "/proc/sys/kernel/pid_max"  # a PID namespace's own since Linux 6.14; the kernel's least is 301
SHM = "/dev/shm"
HIDDEN = ["/run", "/var/run", "/tmp/.X11-unix", "/tmp/.ICE-unix", "/tmp/tmux-*", "/tmp/ssh-*", "/tmp/emacs*",
          "/tmp/screens"]  # where well-known UNIX sockets live: D-Bus, docker, X11, systemd, tmux, ssh-agent, emacs

# seccomp, from linux/seccomp.h, filter.h and audit.h: a filter refusing the seed UNIX sockets of its own.
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
SECCOMP_ALLOW, SECCOMP_ERRNO = 0x7FFF0000, 0x00050000
LOAD_WORD, JUMP_EQUAL, JUMP_GREATER, JUMP_AT_LEAST, RETURN = 0x20, 0x15, 0x25, 0x35, 0x06  # BPF_LD|W|ABS,
# BPF_JMP|JEQ|K, JGT|K, JGE|K, BPF_RET|K
X32_BIT = 0x40000000    # x32's system calls, on x86_64
IO_URING = (425, 426, 427)  # io_uring_setup, _enter, _register: the same numbers on both machines below
SECCOMP_MACHINES = {"x86_64": (0xC000003E, 41), "aarch64": (0xC00000B7, 198)}  # AUDIT_ARCH_*, socket(2)'s number

Support = namedtuple("Support", "confined abi text")  # probe()'s answer; abi is 0 without Landlock
LIBC = ctypes.CDLL(None, use_errno=True)


class RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class NetPortAttr(ctypes.Structure):
    _fields_ = [("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64)]


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


# --- the policy -------------------------------------------------------------------------------
def policy_for(workdir, temp, gateway_port, limits, own_servers=False, require=False, isolate=False,
               processes=300, shm=64 << 20):
    """The policy for a child working in `workdir`, as JSON-ready data (the launcher reads it back).

    write: folders (or files) it may change; read: folders it may read and execute; connect: TCP
    ports it may reach; own_servers: whether it may run loopback servers of its own (the gate's
    tests may; the seed needs none), and make UNIX sockets (multiprocessing's managers and forkserver do;
    the seed, refused them, cannot reach the person's pathname sockets); temp: its TMPDIR; limits: rlimits,
    as fallback.py's LIMITS; require: refuse to run it unconfined; isolate: give it namespaces of its own (see
    isolation()); processes: how many it may run at once; shm: the bytes it may keep in /dev/shm."""
    system = SYSTEM_MACOS + ETC_MACOS if sys.platform == "darwin" else \
        SYSTEM_LINUX + ETC_LINUX + glob.glob("/etc/python3.*")
    return {"write": [str(workdir), str(temp), *DEVICES], "read": [*system, *python_folders()],
            "connect": [gateway_port] if gateway_port else [], "own_servers": own_servers, "scope_signals": True,
            "unix_sockets": own_servers, "temp": str(temp), "limits": limits, "require": require, "isolate": isolate,
            "processes": processes, "shm": shm}


def python_folders():
    """Where this Python and its packages live (a venv, pyenv or the user site may be in the home)."""
    folders = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *site.getsitepackages()}
    if site.ENABLE_USER_SITE:
        folders.add(site.getusersitepackages())
    return sorted(folders)


def command(argv, policy):
    """argv, run through the launcher: limits, no_new_privs and confinement, then argv itself."""
    return [sys.executable, "-I", "-S", "-B", "-c", LAUNCH, json.dumps(policy), *argv]


# -I: the launcher imports nothing from the child's folder (a model's json.py) nor the user site; -S: nor
# site-packages' .pth hooks (they cost ~20 ms here); -B: it writes no bytecode beside sandbox.py (-I ignores
# PYTHONDONTWRITEBYTECODE). The command it execs starts as usual.
LAUNCH = f"""import importlib.util, sys
spec = importlib.util.spec_from_file_location("sandbox", {os.path.abspath(__file__)!r})
sandbox = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sandbox)
sandbox.launch(sys.argv[1], sys.argv[2:])
"""


# --- what this machine offers -----------------------------------------------------------------
def probe():
    """What this machine can confine, asked of the kernel itself: Support(confined, abi, text)."""
    if sys.platform == "darwin":
        if os.access(SANDBOX_EXEC, os.X_OK):
            return Support(True, 0, "sandbox-exec: files, TCP, signals")
        return Support(False, 0, f"none (no {SANDBOX_EXEC}): the model's code is NOT confined")
    abi, why_not = landlock_abi()
    if not abi:
        return Support(False, 0, f"none ({why_not}): the model's code is NOT confined")
    return Support(True, abi, describe(abi))


def landlock_abi():
    """The kernel's Landlock ABI version and "", or 0 and why there is none."""
    if not sys.platform.startswith("linux"):
        return 0, f"{sys.platform} has no Landlock"
    machine = os.uname().machine
    if machine not in MACHINES:
        return 0, f"Landlock's system call numbers are not known here for {machine}"
    try:
        return landlock(CREATE_RULESET, None, 0, VERSION), ""
    except OSError as error:
        reasons = {errno.ENOSYS: "kernel without Landlock", errno.EOPNOTSUPP: "Landlock disabled at boot"}
        return 0, reasons.get(error.errno, f"Landlock unavailable: {error.strerror}")


@functools.cache
def isolation():
    """Whether this kernel gives a run namespaces of its own, tried once for real: (works, text for the log)."""
    if not sys.platform.startswith("linux"):
        return False, f"no namespaces on {sys.platform}"
    said, tell = os.pipe()
    trial = os.fork()
    if trial == 0:  # the whole setup, in a child that ends at once; what the kernel refused, it writes down
        os.close(said)
        try:
            unshare()
            set_up_namespaces({"shm": 1 << 20, "read": [], "write": []})
            init = os.fork()
            if init == 0:
                mount_proc()
                os._exit(0)
            os._exit(os.waitstatus_to_exitcode(os.waitpid(init, 0)[1]) & 255)
        except OSError as error:
            os.write(tell, (f"{error.strerror}: {error.filename}" if error.filename else error.strerror).encode())
        finally:
            os._exit(1)
    os.close(tell)
    _, status = os.waitpid(trial, 0)
    with open(said, "rb") as refused:
        why = refused.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) == 0:
        return True, "namespaces: its own processes, /proc, network (the gateway through a relay) and /dev/shm"
    return False, f"no namespaces ({why or 'their trial failed'}): " + UNISOLATED


UNISOLATED = "the keeper ends what a run leaves; UDP, loopback servers on ephemeral ports and /proc stay open"


def describe(abi):
    """One line for the log: what Landlock at this ABI confines, and what it cannot."""
    have = [name for since, name in FEATURES if abi >= since]
    lack = [name for since, name in FEATURES if abi < since]
    text = f"Landlock ABI {abi}: {', '.join(have)}"
    return text + (f" (not {', '.join(lack)}: the kernel is too old)" if lack else "")


# --- the launcher: runs in the child, before its code -----------------------------------------
def launch(policy_json, argv):
    """Set the limits, confine this process as far as the machine allows, then become argv."""
    policy = json.loads(policy_json)
    apply_limits(policy["limits"])
    os.environ.update(TMPDIR=policy["temp"], TMP=policy["temp"], TEMP=policy["temp"])
    support = probe()
    if not support.confined and policy["require"]:
        refuse(support.text)
    try:
        isolated = policy["isolate"] and isolate(policy)
    except OSError as error:  # refused half way, on a kernel that allowed it at the keeper's start
        print(f"sandbox: setting up the run's namespaces failed ({error})", file=sys.stderr)
        sys.exit(EX_CONFIG)
    if not isolated:
        share_processes(policy["processes"])
    try:
        argv = confine(policy, argv, support, isolated)
    except OSError as error:
        if policy["require"]:
            refuse(f"confining failed: {error}")
        print(f"sandbox: confining failed ({error}): the model's code is NOT confined", file=sys.stderr)
    os.execvp(argv[0], argv)


def apply_limits(limits):
    """The rlimits, as the keeper has always set them; a limit this system lacks is skipped."""
    for name, value in limits.items():
        kind = getattr(resource, name, None)
        hard = resource.getrlimit(kind)[1] if kind is not None else 0
        ceiling = value + 5 if name == "RLIMIT_CPU" else value  # SIGXCPU says why; SIGKILL follows 5 s later
        if hard != resource.RLIM_INFINITY:
            value, ceiling = min(value, hard), min(ceiling, hard)
        try:
            resource.setrlimit(kind, (value, ceiling))
        except (TypeError, ValueError, OSError):
            pass  # a limit this system does not support


def refuse(why):
    """SEED_SANDBOX=require, and the child cannot be confined: one line, exit 78."""
    print(f"sandbox: {why}; SEED_SANDBOX=require refuses to run the model's code unconfined", file=sys.stderr)
    sys.exit(EX_CONFIG)


def confine(policy, argv, support, isolated=False):
    """Confine this process (Linux) or wrap argv in sandbox-exec (macOS): the argv to exec."""
    if sys.platform == "darwin":
        return [SANDBOX_EXEC, "-p", profile(policy), *argv] if support.confined else argv
    if LIBC.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0):  # no setuid gains; lets Landlock apply without root
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if os.geteuid() == 0:  # root's capabilities would bypass Landlock's /proc checks (CAP_PERFMON)
        LIBC.prctl(PR_SET_SECUREBITS, SECBIT_NOROOT, 0, 0, 0)  # where allowed (CAP_SETPCAP)
    if support.confined:
        restrict_self(policy, min(support.abi, KNOWN_ABI), isolated)
    if not policy["unix_sockets"]:
        refuse_unix_sockets()
    return argv


# --- namespaces: the run's own processes, /proc, network and /dev/shm ---------------------------
def isolate(policy):
    """Put the run in namespaces of its own; returns True in its first process (PID 2 there), or False where
    the kernel refuses. This launcher waits and ends as the run does; the namespace's init (PID 1) reaps
    orphans; a relay outside, started first, carries the run's TCP to the gateway."""
    channel, far = socket.socketpair() if policy["connect"] else (None, None)
    relay = os.fork() if channel else None
    if relay == 0:
        channel.close()
        serve_relay(far, policy["connect"][0])
    if far:
        far.close()
    try:
        unshare()
    except OSError:  # refused now, though the keeper's trial worked: the keeper's fallback still applies
        if relay:
            os.kill(relay, signal.SIGKILL)
            os.waitpid(relay, 0)
        return False
    set_up_namespaces(policy)
    if channel:  # the gateway's address, inside: a listening socket the relay accepts on
        with socket.create_server(("127.0.0.1", policy["connect"][0])) as inside, channel:
            socket.send_fds(channel, [b"."], [inside.fileno()])
    report, told = os.pipe()
    init = os.fork()
    if init:
        os.close(told)
        end_as(os.waitpid(init, 0)[1], os.read(report, 32))
    os.close(report)
    LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # the launcher killed (a timeout): all of it ends
    mount_proc()
    with contextlib.suppress(OSError), open(PID_MAX, "w") as file:  # Linux 6.14+: bounds root's processes too
        file.write(str(max(301, policy["processes"] + 1)))
    limit_processes(policy["processes"])
    run = os.fork()
    if run:
        reap_until(run, told)
    os.close(told)
    return True


def unshare():
    """New user, mount, PID and network namespaces for this process (its next child is their PID 1), the same
    user and group ids inside."""
    uid, gid = os.geteuid(), os.getegid()
    if LIBC.unshare(NEW_USER | NEW_MOUNTS | NEW_PIDS | NEW_NET):
        raise OSError(ctypes.get_errno(), f"unshare: {os.strerror(ctypes.get_errno())}")
    for name, text in [("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")]:
        with open(f"/proc/self/{name}", "w") as file:
            file.write(text)


def set_up_namespaces(policy):
    """A private /dev/shm of the policy's size, well-known UNIX sockets hidden, loopback up."""
    mount(None, "/", None, RECURSIVE | PRIVATE)  # nothing mounted here reaches the machine's mounts
    if os.path.isdir(SHM):
        mount("tmpfs", SHM, "tmpfs", NO_SUID | NO_DEV, f"size={policy['shm']},nr_inodes=16k,mode=1777")
    kept = [os.path.realpath(path) for path in policy["read"] + policy["write"]]
    for folder in sorted({os.path.realpath(path) for pattern in HIDDEN for path in glob.glob(pattern)
                          if os.path.isdir(path)}):
        if not any(path == folder or path.startswith(folder + "/") for path in kept):
            mount("tmpfs", folder, "tmpfs", READ_ONLY | NO_SUID | NO_DEV | NO_EXEC, "size=4k")
    read_only_but(policy["write"])
    with socket.socket() as any_socket:
        flags = struct.unpack("16sH14x", fcntl.ioctl(any_socket, GET_FLAGS, struct.pack("16sH14x", b"lo", 0)))[1]
        fcntl.ioctl(any_socket, SET_FLAGS, struct.pack("16sH14x", b"lo", flags | UP))


def read_only_but(writable):
    """Every mount read-only but the folders the run writes (each bound on itself first) and /dev/shm: Landlock
    does not check chmod, chown, utime or extended attributes, so without this the run could change them on any
    file of the user's it can name (its home, the folder's goal.md); on a read-only mount they fail (EROFS)."""
    folders = sorted({os.path.realpath(path) for path in writable if os.path.isdir(path)} - {SHM})
    for folder in folders:
        mount(folder, folder, None, BIND)
    with open("/proc/self/mountinfo", "rb") as table:
        mounts = [line.split()[4:6] for line in table]
    for point, options in mounts:
        point = os.fsdecode(re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m[1], 8)]), point))  # \040: a space
        if point in folders or point == SHM:
            continue
        try:
            mount(None, point, None, REMOUNT | BIND | READ_ONLY | sum(KEPT_FLAGS.get(option, 0) for option in
                                                                      options.decode().split(",")))
        except OSError as error:
            if error.errno not in (errno.EACCES, errno.ENOENT, errno.ENOTDIR):  # unreachable: to the run as well
                raise
    os.chdir(os.getcwd())  # the working folder entered again: before, it was the one beneath its own binding


def mount(source, target, kind, flags, options=None):
    """mount(2), or an OSError naming the target."""
    encode = lambda text: os.fsencode(text) if text is not None else None
    if LIBC.mount(encode(source), encode(target), encode(kind), flags, encode(options)):
        raise OSError(ctypes.get_errno(), f"mount {target}: {os.strerror(ctypes.get_errno())}")


def mount_proc():
    """A /proc of the new PID namespace (run in its PID 1): the machine's other processes are not in it."""
    mount("proc", "/proc", "proc", NO_SUID | NO_DEV | NO_EXEC)


def limit_processes(most):
    """At most `most` processes of this user: RLIMIT_NPROC counts per user namespace (Linux 5.14+), so in a
    run's own it counts only the run's; root's are never counted (a PID namespace's pid_max bounds those)."""
    hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    most = most if hard == resource.RLIM_INFINITY else min(most, hard)
    resource.setrlimit(resource.RLIMIT_NPROC, (most, most))  # a lower hard limit too: the code cannot raise it


def share_processes(most):
    """Without a user namespace of its own, RLIMIT_NPROC counts every process of the user: allow the run `most`
    beyond those running now (root is never counted)."""
    if sys.platform.startswith("linux") and os.getuid() != 0:
        mine = sum(1 for entry in os.scandir("/proc") if entry.name.isdigit() and owned(entry))
        limit_processes(mine + most)


def owned(entry):
    """Whether a /proc entry is a process of this user (one that has just ended is not)."""
    try:
        return entry.stat().st_uid == os.getuid()
    except OSError:
        return False


def reap_until(run, told):
    """PID 1 of the run: reap every process that ends until `run` does, tell the launcher how, and end, which
    ends everything left in the namespace."""
    while True:
        pid, status = os.wait()
        if pid == run:
            os.write(told, str(status).encode())
            os._exit(0)


def end_as(status, reported):
    """The launcher: end as the run ended (the same exit code, or the same signal), so the keeper sees it."""
    status = int(reported) if reported else status
    if os.WIFSIGNALED(status):
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if os.WTERMSIG(status) != signal.SIGKILL:
            signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    os._exit(os.waitstatus_to_exitcode(status) & 255 if os.WIFEXITED(status) else EX_CONFIG)


def serve_relay(channel, port):
    """The relay, outside the run's namespaces and Landlock domain: it accepts on the listening socket made
    inside and carries each connection to the gateway on this machine's loopback. Ends with the launcher."""
    try:
        LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        quiet = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(quiet, fd)  # the keeper reads the run's output to its end: the relay holds none of it
        os.closerange(3, channel.fileno())  # nor any other file the run was given
        os.closerange(channel.fileno() + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        _, fds, _, _ = socket.recv_fds(channel, 1, 1)
        if fds:
            with socket.socket(fileno=fds[0]) as inside:
                while True:
                    client, _ = inside.accept()
                    threading.Thread(target=carry, args=(client, port), daemon=True).start()
    finally:
        os._exit(0)


def carry(client, port):
    """Copy bytes both ways between a client inside and the gateway, until both sides are done."""
    try:
        with client, socket.create_connection(("127.0.0.1", port)) as gateway:
            other = {client: gateway, gateway: client}
            reading = [client, gateway]
            while reading:
                for side in select.select(reading, [], [])[0]:
                    data = side.recv(65536)
                    if data:
                        other[side].sendall(data)
                    else:
                        reading.remove(side)
                        other[side].shutdown(socket.SHUT_WR)
    except OSError:
        pass  # either side gone: the connection ends


# --- the keeper's side: what a run leaves behind ------------------------------------------------
def become_subreaper():
    """Make this process (the keeper) the parent of every orphan its runs leave, so end_descendants finds them."""
    if sys.platform.startswith("linux"):
        LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def end_descendants():
    """Stop, then kill, every process this one started, directly or not, until none is left (a daemon that
    forks as it is found is stopped first); reap them."""
    for _ in range(200):
        found = descendants(os.getpid())
        if not found:
            return
        for how in (signal.SIGSTOP, signal.SIGKILL):
            for pid in found:
                try:
                    os.kill(pid, how)
                except ProcessLookupError:
                    pass
        reap()
        time.sleep(0.005)


def descendants(ancestor):
    """The process ids below `ancestor` in the process tree (Linux's /proc; elsewhere, none are found)."""
    children = {}
    for entry in os.scandir("/proc") if os.path.isdir("/proc/self") else []:
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as file:
                parent = int(file.read().rsplit(b")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue  # not a process, or one that has just ended
    found, queue = [], [ancestor]
    while queue:
        for child in children.get(queue.pop(), []):
            found.append(child)
            queue.append(child)
    return found


def reap():
    """Collect the exit status of every child of this process that has ended."""
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                return
        except ChildProcessError:
            return


def shm_entries():
    """The names in /dev/shm now (without a namespace of its own, a run shares the machine's)."""
    try:
        return set(os.listdir(SHM))
    except OSError:
        return set()


def clear_shm(before):
    """Take away what this user made in /dev/shm since `before` was listed: the bytes it held."""
    held = 0
    for name in shm_entries() - before:
        path = os.path.join(SHM, name)
        try:
            info = os.lstat(path)
            if info.st_uid == os.getuid() and not stat.S_ISDIR(info.st_mode):
                held += info.st_blocks * 512
                os.unlink(path)
        except OSError:
            pass  # gone already
    return held


# --- Landlock ---------------------------------------------------------------------------------
def landlock(number, *args):
    """One Landlock system call: its result, or an OSError."""
    result = LIBC.syscall(number, *args)
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result


def restrict_self(policy, abi, isolated=False):
    """Handle every right this ABI knows, allow the policy's, and enforce them on this process. In a network
    namespace of its own, the gate's tests may bind and reach any port: there is nothing else there."""
    handled_fs = (1 << FS_RIGHTS[abi]) - 1
    handled_net = BIND_TCP | CONNECT_TCP if abi >= 4 and not (isolated and policy["own_servers"]) else 0
    scoped = (SCOPE_ABSTRACT_UNIX | (SCOPE_SIGNAL if policy["scope_signals"] else 0)) if abi >= 6 else 0
    attr = RulesetAttr(handled_fs, handled_net, scoped)
    ruleset = landlock(CREATE_RULESET, ctypes.byref(attr), ctypes.sizeof(attr), 0)
    try:
        for path in policy["read"]:
            allow_path(ruleset, path, READ_RIGHTS & handled_fs)
        for path in policy["write"]:
            allow_path(ruleset, path, WRITE_RIGHTS & handled_fs)
        if handled_net:
            allow_ports(ruleset, policy)
        landlock(RESTRICT_SELF, ruleset, 0)  # ABI 7's audit logging stays off after the exec: no log flood
    finally:
        os.close(ruleset)


def allow_path(ruleset, path, rights):
    """Allow `rights` beneath path (only the file rights, when it is a file); a missing path is skipped."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return  # a folder this system does not have (/lib32, /opt)
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= FILE_RIGHTS
        landlock(ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(PathBeneathAttr(rights, fd)), 0)
    finally:
        os.close(fd)


def allow_ports(ruleset, policy):
    """Allow TCP to the policy's ports, and with own_servers, binding port 0 and reaching those servers."""
    ports = list(policy["connect"])
    if policy["own_servers"]:
        landlock(ADD_RULE, ruleset, RULE_NET_PORT, ctypes.byref(NetPortAttr(BIND_TCP, 0)), 0)
        ports += ephemeral_ports()
    rule = NetPortAttr(CONNECT_TCP, 0)
    pointer = ctypes.byref(rule)
    for port in ports:  # one system call each: the default range's 28,232 take 30 to 55 ms here
        rule.port = port
        landlock(ADD_RULE, ruleset, RULE_NET_PORT, pointer, 0)


def ephemeral_ports():
    """The ports the kernel picks from when a program binds port 0."""
    try:
        with open(EPHEMERAL) as ports:
            low, high = map(int, ports.read().split())
    except (OSError, ValueError):
        low, high = 32768, 60999  # Linux's default
    return range(low, high + 1)


# --- seccomp: no UNIX socket of its own for the seed --------------------------------------------
def refuse_unix_sockets():
    """Install a seccomp filter on this process and all it starts: socket(AF_UNIX, ...) fails with EPERM, so no
    pathname UNIX socket of the person's (an agent's, docker's, a database's) can be connected to, wherever it
    is; socketpair() still works (it names no path). Refused too: the system calls of any other ABI than this
    machine's own (i386's socketcall on x86_64, x32), and io_uring, which makes sockets without socket(2). A
    machine whose numbers are not known here gets no filter (a line on stderr says so)."""
    numbers = SECCOMP_MACHINES.get(os.uname().machine)
    if numbers is None:
        print(f"sandbox: no seccomp filter on {os.uname().machine}: UNIX sockets stay open", file=sys.stderr)
        return
    program = unix_socket_filter(*numbers)
    code = (ctypes.c_ubyte * len(program)).from_buffer_copy(program)
    fprog = SockFprog(len(program) // 8, ctypes.cast(code, ctypes.c_void_p))
    if LIBC.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0):
        raise OSError(ctypes.get_errno(), f"prctl(PR_SET_SECCOMP): {os.strerror(ctypes.get_errno())}")


def unix_socket_filter(arch, socket_number):
    """The classic BPF program of refuse_unix_sockets, as bytes (a struct sock_filter each step)."""
    domain, allow, refuse = 7, 9, 10  # where the steps below jump to (a jump counts from the step after it)
    steps = [(LOAD_WORD, 0, 0, 4),                                  # 0: the system call's ABI
             (JUMP_EQUAL, 0, refuse - 2, arch),                     # 1: another ABI: refused
             (LOAD_WORD, 0, 0, 0),                                  # 2: the system call's number
             (JUMP_AT_LEAST, refuse - 4, 0, X32_BIT),               # 3: x32's numbers: refused
             (JUMP_EQUAL, domain - 5, 0, socket_number),            # 4: socket(2): look at its domain
             (JUMP_AT_LEAST, 0, allow - 6, IO_URING[0]),            # 5: below io_uring's calls: allowed
             (JUMP_GREATER, allow - 7, refuse - 7, IO_URING[-1]),   # 6: io_uring's calls: refused
             (LOAD_WORD, 0, 0, 16),                                 # 7: socket's first argument (its low half)
             (JUMP_EQUAL, refuse - 9, allow - 9, socket.AF_UNIX),   # 8: AF_UNIX: refused
             (RETURN, 0, 0, SECCOMP_ALLOW),                         # 9
             (RETURN, 0, 0, SECCOMP_ERRNO | errno.EPERM)]           # 10
    return b"".join(struct.pack("<HBBI", *step) for step in steps)


# --- macOS ------------------------------------------------------------------------------------
def profile(policy):
    """The policy as a Seatbelt profile for `sandbox-exec -p` (deny by default)."""
    signals = "(allow signal (target same-sandbox))" if policy["scope_signals"] else "(allow signal)"
    rules = ["(version 1)", "(deny default)", "(allow process-exec process-fork)", signals,
             "(allow process-info* (target same-sandbox))", "(allow sysctl-read)", "(allow file-read-metadata)",
             "(allow ipc-posix-sem ipc-posix-shm)",  # multiprocessing
             '(allow mach-lookup (global-name "com.apple.system.opendirectoryd.libinfo"))',  # getpwuid
             f"(allow file-read* {subpaths(policy['read'] + policy['write'])})",
             f"(allow file-write* {subpaths(policy['write'])})"]
    rules += [f'(allow network-outbound (remote ip "localhost:{port}"))' for port in policy["connect"]]
    if policy["own_servers"]:  # Seatbelt cannot tell its own servers from others: all of loopback
        rules += ['(allow network-bind network-inbound (local ip "localhost:*"))',
                  '(allow network-outbound (remote ip "localhost:*"))']
    return "\n".join(rules) + "\n"


def subpaths(paths):
    """SBPL filters for paths, resolved (Seatbelt sees /private/tmp, not /tmp) and quoted."""
    quoted = (os.path.realpath(path).replace("\\", "\\\\").replace('"', '\\"') for path in paths)
    return " ".join(f'(subpath "{path}")' for path in quoted)
