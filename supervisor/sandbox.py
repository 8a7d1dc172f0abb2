"""sandbox: confine a child process (the model's code) with the most this machine offers.

    policy = policy_for(workdir, temp, gateway_port, LIMITS)      # what the child may reach
    subprocess.Popen(command([sys.executable, "seed.py"], policy), cwd=workdir, ...)
    say(f"confinement: {probe().text}")    # e.g. "Landlock ABI 7: files, truncation, TCP, signals"

`command` puts a launcher in front of the command: `python -I -S -c LAUNCH '<policy json>' <command...>`.
The launcher sets the rlimits and TMPDIR, sets no_new_privs (and, run as root, keeps exec from granting
capabilities), confines itself, then execs the command; everything the command starts inherits all of
it. Linux: Landlock, through its three system calls with ctypes (no dependency: the PyPI bindings,
landlock 1.0.0.dev5 or py-landlock 0.1, are pre-releases that add little), handling every right the
kernel's ABI knows. macOS: sandbox-exec with a Seatbelt profile made from the same policy (generated
and tested as text, never run here). Elsewhere, or on a kernel without Landlock, the child runs with
the limits only and probe() says so; with `require` in the policy (SEED_SANDBOX=require) the launcher
refuses instead: one line, exit 78.

The threat is careless code from a model, not a determined attacker. Under Landlock ABI 7 the child
and everything it starts can:
- write only beneath `write`: its working copy, its private temp folder, /dev/null and its kin, and
  /dev/shm (multiprocessing's semaphores); and make no device nodes there;
- read and execute only beneath `read` and `write`: the system folders, Python and its packages. Not
  the user's folder (.env, backups/), not the rest of the home, not the disks in /dev, not another
  process's environment or memory (/proc/PID/environ);
- connect over TCP (ABI 4+) only to `connect`, the gateway, and with `own_servers` to the kernel's
  ephemeral ports, where its own servers land (they bind port 0; binding a chosen port is refused);
- signal, or reach the abstract UNIX sockets of, only processes of its own sandbox (ABI 6+).
Not confined: UDP and other non-TCP sockets; pathname UNIX sockets such as /var/run/docker.sock
(Landlock ABI 9 refuses them; not used yet, untested); with own_servers, TCP to any host's ephemeral
ports, another program's loopback server among them (careless code cannot know such a port); learning
that a path exists, its size and times (stat is not checked); reading world-readable files in /etc,
/proc and /sys; CPU, memory and disk beyond the rlimits. Older ABIs: below 3, truncate(2) is open;
below 4, TCP; below 6, signals; ABI 1 refuses moving a file to another folder. Refusals are not sent to
the audit log (ABI 7 could): a model that keeps trying would flood it.

Own servers: Landlock has no port ranges or addresses, so allowing the ephemeral range takes one rule
per port (28,232 by default): 30 to 55 ms to add and about 8 ms to enforce per launch on this machine
(2 shared cores); what the launched command starts inherits them for free, and the seed needs none.
A private network namespace would confine loopback exactly, but needs unprivileged user namespaces
(often disabled: Ubuntu 24.04, many containers) and a relay to the gateway outside it.
"""
import ctypes
import errno
import json
import os
import resource
import site
import stat
import sys
from collections import namedtuple

# --- settings ---------------------------------------------------------------------------------
SYSTEM_LINUX = ["/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/etc", "/opt", "/proc", "/sys",
                "/dev/random", "/dev/urandom"]  # read and execute; not all of /dev: raw disks, as root
SYSTEM_MACOS = ["/usr", "/bin", "/sbin", "/System", "/Library", "/opt", "/private/etc", "/private/var/db",
                "/dev/random", "/dev/urandom"]
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


# --- the policy -------------------------------------------------------------------------------
def policy_for(workdir, temp, gateway_port, limits, own_servers=False, require=False):
    """The policy for a child working in `workdir`, as JSON-ready data (the launcher reads it back).

    write: folders (or files) it may change; read: folders it may read and execute; connect: TCP
    ports it may reach; own_servers: whether it may run loopback servers of its own (the gate's
    tests may; the seed needs none); temp: its TMPDIR; limits: rlimits, as fallback.py's LIMITS;
    require: refuse to run it unconfined."""
    system = SYSTEM_MACOS if sys.platform == "darwin" else SYSTEM_LINUX
    return {"write": [str(workdir), str(temp), *DEVICES], "read": [*system, *python_folders()],
            "connect": [gateway_port] if gateway_port else [], "own_servers": own_servers, "scope_signals": True,
            "temp": str(temp), "limits": limits, "require": require}


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
        argv = confine(policy, argv, support)
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


def confine(policy, argv, support):
    """Confine this process (Linux) or wrap argv in sandbox-exec (macOS): the argv to exec."""
    if sys.platform == "darwin":
        return [SANDBOX_EXEC, "-p", profile(policy), *argv] if support.confined else argv
    if LIBC.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0):  # no setuid gains; lets Landlock apply without root
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if os.geteuid() == 0:  # root's capabilities would bypass Landlock's /proc checks (CAP_PERFMON)
        LIBC.prctl(PR_SET_SECUREBITS, SECBIT_NOROOT, 0, 0, 0)  # where allowed (CAP_SETPCAP)
    if support.confined:
        restrict_self(policy, min(support.abi, KNOWN_ABI))
    return argv


# --- Landlock ---------------------------------------------------------------------------------
def landlock(number, *args):
    """One Landlock system call: its result, or an OSError."""
    result = LIBC.syscall(number, *args)
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result


def restrict_self(policy, abi):
    """Handle every right this ABI knows, allow the policy's, and enforce them on this process."""
    handled_fs = (1 << FS_RIGHTS[abi]) - 1
    handled_net = BIND_TCP | CONNECT_TCP if abi >= 4 else 0
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
