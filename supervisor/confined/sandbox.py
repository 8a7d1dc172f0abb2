"""sandbox: confine a child process (the model's code) with the most this machine offers.

    policy = policy_for(workdir, temp, gateway_port, LIMITS, isolate=isolation()[0])  # what the child may reach
    subprocess.Popen(command([sys.executable, "seed.py"], policy, workdir), cwd=START, ...)
    end_descendants()                      # after it: whatever it left running (the keeper is their subreaper)
    say(f"confinement: {probe().text}")    # e.g. "Landlock ABI 7: files, truncation, TCP, signals"

`command` puts a launcher in front of the command: `python -I -S -B -c LAUNCH '<policy json>' <folder>
<command...>`, started in START ("/"), never in a folder the model writes: the dynamic linker reads an empty
LD_LIBRARY_PATH entry as the folder a process starts in, and -I keeps the working folder and PYTHONPATH off
the launcher's imports. The launcher sets the rlimits and TMPDIR; where the kernel allows (isolation() tried
it once), it puts the run in every namespace a user may make (user, PID, mount, network, IPC, UTS, cgroup),
with a relay to the gateway outside them; it sets no_new_privs (run as root, keeps exec from granting
capabilities), confines itself with Landlock, enters the working folder, installs the seccomp filter last,
then execs the command; everything the command starts inherits all of it. What it may read comes from this
interpreter (its prefixes, its site-packages; a virtual environment by its parts) and the keeper's own
paths, never from an environment variable. Linux: Landlock, namespaces and seccomp through their
system calls with ctypes, the system call numbers kept as data (SYSCALLS; no dependency: the PyPI bindings,
landlock 1.0.0.dev5 or py-landlock 0.1, are pre-releases that add little). macOS: sandbox-exec with a Seatbelt profile made from the same policy
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
- System V IPC and POSIX message queues (an IPC namespace): the run's own, out of reach of the person's, gone
  when the run ends. The hostname (UTS) and the cgroup tree are its own too.
- System calls (seccomp, Linux 3.5+, x86_64 and aarch64): a default-deny allow-list (syscall_filter): what
  Python, pytest and ordinary code use, and nothing else: not the keyring (keyctl), another process's memory
  (ptrace, process_vm_readv), mounts, namespaces (unshare, setns, clone's namespace flags), io_uring, bpf,
  modules, the clock, personality changes. A call the list names as refused fails with EPERM; any other with
  ENOSYS, as on a kernel without it, so libc and Python fall back (clone3 to clone). The seed makes no UNIX
  socket (socket(AF_UNIX) refused; socketpair works), so it reaches no pathname socket of the user's anywhere;
  the gate's tests keep them: multiprocessing's managers and forkserver (3.14's default start method) make
  them. Without an IPC namespace, System V IPC and message queues are refused.
- The environment (terrarium.clean_env): an allow-list, never the user's shell variables.
Still open with all of the above: for the gate, pathname UNIX sockets at a path the code can guess outside
/run (say ~/.docker/run/docker.sock): seccomp cannot see the path connect() is given, and Landlock ABI 9's
RESOLVE_UNIX, which would refuse them, is not used: no kernel here offers it to test it. Learning that a path
exists, its size and times (stat is not checked); reading the world-readable files of /sys; CPU, memory and
disk beyond the rlimits; ioctls but TIOCSTI and TIOCLINUX (a run has no terminal); the kernel's own bugs.
Refusals are not sent to the audit log (ABI 7 could): a model that keeps trying would flood it.

Without namespaces (refused by the kernel, or SEED_NAMESPACES=0; macOS): the seccomp filter holds (Linux) and
refuses System V IPC; the keeper is the child subreaper of its runs (Linux 3.4+), so every orphan a run leaves
becomes its child, and after each run it stops, then kills, every process below it until none is left; a
keeper killed with kill -9 ends only the process group
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
VENV_PARTS = ["pyvenv.cfg", "bin", "lib", "lib64", "include"]  # what Python reads of a virtual environment
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
NEW_MOUNTS, NEW_CGROUP, NEW_UTS, NEW_IPC = 0x00020000, 0x02000000, 0x04000000, 0x08000000
NEW_USER, NEW_PIDS, NEW_NET = 0x10000000, 0x20000000, 0x40000000
EVERY_NAMESPACE = NEW_USER | NEW_MOUNTS | NEW_PIDS | NEW_NET | NEW_IPC | NEW_UTS | NEW_CGROUP  # all a user may make
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

# seccomp, from linux/seccomp.h, filter.h and audit.h: an allow-list of system calls (syscall_filter).
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
ALLOW, REFUSE, MISSING = 0x7FFF0000, 0x00050000 | errno.EPERM, 0x00050000 | errno.ENOSYS  # SECCOMP_RET_*
NO_FAMILY = 0x00050000 | errno.EAFNOSUPPORT  # a socket family outside the list: as a kernel without it
UNSUPPORTED = 0x00050000 | errno.EOPNOTSUPP  # an extended attribute: as a file system without them
LOAD_WORD, JUMP_EQUAL, JUMP_AT_LEAST, JUMP_SET, RETURN = 0x20, 0x15, 0x35, 0x45, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K,
# JGE|K, JSET|K, BPF_RET|K
NUMBER, ARCH, ARGUMENTS = 0, 4, 16  # offsets in struct seccomp_data; each argument 8 bytes, its low half first
X32_BIT = 0x40000000    # x32's system calls, on x86_64
SECCOMP_MACHINES = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}  # AUDIT_ARCH_*, in SYSCALLS' column order
NAMESPACE_FLAGS = NEW_MOUNTS | NEW_CGROUP | NEW_UTS | NEW_IPC | NEW_USER | NEW_PIDS | NEW_NET  # clone(2) refused them
TIOCSTI, TIOCLINUX = 0x5412, 0x541C  # ioctls that type into a terminal, or read its screen
PERSONA_QUERY, PER_LINUX = 0xFFFFFFFF, 0  # personality(2)'s forms that change nothing
SOCKET_FAMILIES = [socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK]  # loopback, and what getifaddrs asks
ALLOWED = """read write readv writev pread64 pwrite64 preadv pwritev preadv2 pwritev2 open openat openat2 creat close
close_range lseek dup dup2 dup3 fcntl flock fsync fdatasync sync syncfs sync_file_range fallocate ftruncate truncate
fadvise64 readahead sendfile copy_file_range splice tee stat fstat lstat newfstatat statx statfs fstatfs access
faccessat faccessat2 readlink readlinkat getdents getdents64 getcwd chdir fchdir mkdir mkdirat rmdir unlink unlinkat
rename renameat renameat2 link linkat symlink symlinkat mknod mknodat chmod fchmod fchmodat chown fchown lchown
fchownat umask utime utimes utimensat futimesat brk mmap munmap mremap mprotect madvise msync mincore mlock
mlock2 munlock mlockall munlockall membarrier memfd_create fork vfork execve execveat exit exit_group wait4 waitid
kill tkill tgkill getpid getppid gettid getpgid setpgid getpgrp getsid setsid getuid geteuid getgid getegid getresuid
getresgid getgroups setuid setgid setreuid setregid setresuid setresgid setgroups setfsuid setfsgid capget capset
prctl arch_prctl set_tid_address set_robust_list get_robust_list rseq getrlimit setrlimit prlimit64 getrusage
getpriority setpriority sched_yield sched_getaffinity sched_setaffinity sched_getparam sched_setparam
sched_getscheduler sched_setscheduler sched_get_priority_max sched_get_priority_min sched_rr_get_interval
sched_getattr sched_setattr ioprio_get ioprio_set times sysinfo uname getcpu pidfd_open pidfd_send_signal
rt_sigaction rt_sigprocmask rt_sigreturn rt_sigpending rt_sigsuspend rt_sigtimedwait rt_sigqueueinfo
rt_tgsigqueueinfo sigaltstack pause alarm getitimer setitimer signalfd signalfd4 restart_syscall nanosleep
clock_nanosleep clock_gettime clock_getres gettimeofday time timer_create timer_settime timer_gettime
timer_getoverrun timer_delete timerfd_create timerfd_settime timerfd_gettime futex futex_waitv select pselect6 poll
ppoll epoll_create epoll_create1 epoll_ctl epoll_wait epoll_pwait epoll_pwait2 eventfd eventfd2 pipe pipe2 socketpair bind listen accept accept4 connect getsockname
getpeername sendto recvfrom sendmsg recvmsg sendmmsg recvmmsg shutdown setsockopt getsockopt getrandom""".split()
# what Python, pytest and ordinary code use; socket, ioctl, clone and personality are allowed by their arguments.
# Not inotify: Landlock checks no watch, so a run could learn the names of files the person makes in the folder
# (missing, as on a kernel without it: watchers poll instead)
NO_ATTRIBUTES = """getxattr lgetxattr fgetxattr listxattr llistxattr flistxattr setxattr lsetxattr fsetxattr removexattr
lremovexattr fremovexattr""".split()  # EOPNOTSUPP, as a file system without extended attributes: Landlock checks
# none (the attributes of the person's .env could be listed), and shutil's copies take it as such
SYSTEM_V = """shmget shmat shmdt shmctl semget semop semtimedop semctl msgget msgsnd msgrcv msgctl mq_open mq_unlink
mq_timedsend mq_timedreceive mq_notify mq_getsetattr""".split()  # allowed only in an IPC namespace of the run's own
REFUSED = """keyctl add_key request_key ptrace process_vm_readv process_vm_writev pidfd_getfd kcmp bpf userfaultfd
mount umount2 pivot_root move_mount fsopen fsmount fsconfig fspick open_tree mount_setattr setns unshare chroot
kexec_load kexec_file_load init_module finit_module delete_module perf_event_open io_uring_setup io_uring_enter
io_uring_register open_by_handle_at name_to_handle_at swapon swapoff reboot syslog acct quotactl quotactl_fd iopl
ioperm clock_settime settimeofday adjtimex clock_adjtime sethostname setdomainname lookup_dcookie fanotify_init
vhangup seccomp""".split()  # named to fail with EPERM (not ENOSYS): the keyring, other processes' memory, the kernel's
# mounts, modules and clock, io_uring (it makes sockets without socket(2))

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
    """Where this interpreter and its packages live, asked of the interpreter itself, never of an environment
    variable: its prefixes, its site-packages, and the user site it imports from (on its sys.path). A prefix
    that is a virtual environment is allowed by its parts (VENV_PARTS): `python -m venv .` makes the person's
    folder one, and its .env is not the model's to read."""
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    venvs = {prefix for prefix in prefixes if os.path.isfile(os.path.join(prefix, "pyvenv.cfg"))}
    folders = {*(prefixes - venvs), *site.getsitepackages()}
    folders |= {os.path.join(venv, part) for venv in venvs for part in VENV_PARTS
                if os.path.lexists(os.path.join(venv, part))}
    if site.ENABLE_USER_SITE and site.getusersitepackages() in sys.path:
        folders.add(site.getusersitepackages())
    return sorted(folders)


def command(argv, policy, folder):
    """argv, run through the launcher: limits, namespaces, no_new_privs and confinement, then argv itself in
    `folder`. Start it in START (Popen's cwd), never in a folder the model writes: the dynamic linker reads an
    empty entry of LD_LIBRARY_PATH as the folder a process starts in, and the launcher loads its libraries
    before it is confined."""
    return [sys.executable, "-I", "-S", "-B", "-c", LAUNCH, json.dumps(policy), os.fspath(folder), *argv]


START = "/"  # where every launcher starts (only root writes there; the run, confined, not even root)
# -I: the launcher imports nothing from the folder it starts in, PYTHONPATH or the user site; -S: nor
# site-packages' .pth hooks (they cost ~20 ms here); -B: it writes no bytecode beside sandbox.py (-I ignores
# PYTHONDONTWRITEBYTECODE). The command it execs starts as usual.
LAUNCH = f"""import importlib.util, sys
spec = importlib.util.spec_from_file_location("sandbox", {os.path.abspath(__file__)!r})
sandbox = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sandbox)
sandbox.launch(sys.argv[1], sys.argv[2], sys.argv[3:])
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
    # Ctrl+C and SIGTERM wait until the trial is over: one handled inside fork's own hooks in this process is lost
    # (printed as ignored), and leaves logging's lock held, so the next request of any thread hangs
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
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
    finally:  # (the trial ends in os._exit: only this process comes here)
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
    with open(said, "rb") as refused:
        why = refused.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) == 0:
        return True, "namespaces: its own processes, /proc, network (the gateway through a relay), /dev/shm, " \
                     "System V IPC, hostname and cgroups"
    return False, f"no namespaces ({why or 'their trial failed'}): " + UNISOLATED


UNISOLATED = "the keeper ends what a run leaves; UDP, loopback servers on ephemeral ports and /proc stay open"


def describe(abi):
    """One line for the log: what Landlock at this ABI confines, and what it cannot."""
    have = [name for since, name in FEATURES if abi >= since]
    lack = [name for since, name in FEATURES if abi < since]
    text = f"Landlock ABI {abi}: {', '.join(have)}"
    return text + (f" (not {', '.join(lack)}: the kernel is too old)" if lack else "")


# --- the launcher: runs in the child, before its code -----------------------------------------
def launch(policy_json, folder, argv):
    """Set the limits, confine this process as far as the machine allows, enter `folder`, filter its system
    calls, then become argv."""
    argv = prepare(json.loads(policy_json), folder, argv)
    os.execvp(argv[0], argv)


def prepare(policy, folder, argv):
    """All of launch but the exec: the argv to become (wrapped in sandbox-exec on macOS). With namespaces, only the
    run's first process returns (the launcher and the namespace's init end with it). The zygote's child calls it
    too, before it imports the candidate's code (preloaded.py)."""
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
        unconfined(policy, f"confining failed: {error}", "the model's code is NOT confined")
    enter(folder)
    try:
        filter_system_calls(policy, isolated)  # last: it would refuse the launcher's own setup (unshare, mount)
    except OSError as error:
        unconfined(policy, f"the system call filter failed: {error}", "its system calls are not filtered")
    return argv


def unconfined(policy, why, what):
    """A step of confining failed: with require, refuse to go on; else say what it leaves open and go on."""
    if policy["require"]:
        refuse(why)
    print(f"sandbox: {why}: {what}", file=sys.stderr)


def enter(folder):
    """Change to the run's working folder, only now that nothing more is loaded before the exec; one line and
    exit 78 where it cannot be entered."""
    try:
        os.chdir(folder)
    except OSError as error:
        print(f"sandbox: the working folder cannot be entered ({error.strerror}: {folder})", file=sys.stderr)
        sys.exit(EX_CONFIG)


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
    """Every namespace an unprivileged user may make, for this process (its next child is their PID 1): user,
    mount, PID, network, IPC (System V IPC and POSIX message queues of its own, gone with the run), UTS (the
    hostname) and cgroup; the same user and group ids inside."""
    uid, gid = os.geteuid(), os.getegid()
    if LIBC.unshare(EVERY_NAMESPACE):
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


KEPT = set()  # processes of the keeper's own that end_descendants leaves, with all below them: the zygote, whose
# candidates each end with their PID namespace (preloaded.py)


def end_descendants():
    """Stop, then kill, every process this one started, directly or not, until none is left (a daemon that
    forks as it is found is stopped first), but KEPT and what is below them; reap them."""
    for _ in range(200):
        found = descendants(os.getpid(), KEPT)
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


def descendants(ancestor, kept=()):
    """The process ids below `ancestor` in the process tree, but `kept` and those below them (Linux's /proc;
    elsewhere, none are found)."""
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
            if child in kept:
                continue
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


# --- seccomp: the system calls the run may make ------------------------------------------------
def filter_system_calls(policy, isolated):
    """Install the seccomp filter (syscall_filter) on this process and all it starts; it holds across exec. A
    machine whose numbers are not known here gets none, and a line on stderr says so."""
    machine = os.uname().machine
    if not sys.platform.startswith("linux"):
        return
    if machine not in SECCOMP_MACHINES:
        print(f"sandbox: no seccomp filter on {machine}: every system call is open (UNIX sockets, System V IPC, "
              "the keyring, ptrace)", file=sys.stderr)
        return
    program = syscall_filter(machine, policy["unix_sockets"], isolated)
    code = (ctypes.c_ubyte * len(program)).from_buffer_copy(program)
    fprog = SockFprog(len(program) // 8, ctypes.cast(code, ctypes.c_void_p))
    if LIBC.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0):
        raise OSError(ctypes.get_errno(), f"prctl(PR_SET_SECCOMP): {os.strerror(ctypes.get_errno())}")


def syscall_filter(machine, unix_sockets, own_ipc):
    """The seccomp filter for `machine` (x86_64 or aarch64), a classic BPF program as bytes (a struct sock_filter
    each step). Default deny: a system call is allowed only when ALLOWED names it, and then for any arguments
    but four, allowed by their arguments: socket(2) for IPv4, IPv6 and netlink (AF_UNIX only with
    `unix_sockets`, else EPERM: the seed reaches no pathname socket of the person's; any other family
    EAFNOSUPPORT), clone(2) without a namespace flag, ioctl(2) but TIOCSTI and TIOCLINUX, personality(2)'s query
    and PER_LINUX. System V IPC and POSIX message queues (SYSTEM_V) only with `own_ipc`, an IPC namespace of the
    run's own; else they, like REFUSED, fail with EPERM, and so do another ABI's calls (i386's, x32's). Extended
    attributes (NO_ATTRIBUTES) fail with EOPNOTSUPP, as on a file system without them.
    Everything else fails with ENOSYS, as on a kernel without the call, so that libc and Python take the way
    they take there: clone3 (glibc falls back to clone, whose flags can be read here, as Docker does), and a
    call newer than this table."""
    arch, column = SECCOMP_MACHINES[machine], list(SECCOMP_MACHINES).index(machine)
    steps = [(LOAD_WORD, 0, 0, ARCH), (JUMP_EQUAL, 1, 0, arch), (RETURN, 0, 0, REFUSE), (LOAD_WORD, 0, 0, NUMBER)]
    if machine == "x86_64":
        steps += [(JUMP_AT_LEAST, 0, 1, X32_BIT), (RETURN, 0, 0, REFUSE)]
    rules = [*((name, [(RETURN, 0, 0, ALLOW)]) for name in ALLOWED + (SYSTEM_V if own_ipc else [])),
             *((name, [(RETURN, 0, 0, REFUSE)]) for name in REFUSED + ([] if own_ipc else SYSTEM_V)),
             *((name, [(RETURN, 0, 0, UNSUPPORTED)]) for name in NO_ATTRIBUTES),
             ("socket", by_argument(0, {socket.AF_UNIX: ALLOW if unix_sockets else REFUSE,
                                        **dict.fromkeys(SOCKET_FAMILIES, ALLOW)}, NO_FAMILY)),
             ("clone", by_argument(0, {NAMESPACE_FLAGS: REFUSE}, ALLOW, test=JUMP_SET)),
             ("ioctl", by_argument(1, {TIOCSTI: REFUSE, TIOCLINUX: REFUSE}, ALLOW)),
             ("personality", by_argument(0, {PERSONA_QUERY: ALLOW, PER_LINUX: ALLOW}, REFUSE))]
    for name, then in rules:
        number = SYSCALLS[name][column]
        if number is not None:  # aarch64 has no open, fork, poll, ...
            steps += [(JUMP_EQUAL, 0, len(then), number), *then]
    steps.append((RETURN, 0, 0, MISSING))
    return b"".join(struct.pack("<HBBI", *step) for step in steps)


def by_argument(index, cases, otherwise, test=JUMP_EQUAL):
    """Steps that load the low half of argument `index` (every one looked at is an int, or a flag word whose
    high half the kernel drops) and return the action of the first case it matches (JUMP_SET: shares a bit
    with), else `otherwise`."""
    steps = [(LOAD_WORD, 0, 0, ARGUMENTS + 8 * index)]
    for value, action in cases.items():
        steps += [(test, 0, 1, value), (RETURN, 0, 0, action)]
    return [*steps, (RETURN, 0, 0, otherwise)]


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


# --- system call numbers ----------------------------------------------------------------------
# (x86_64, aarch64) for each name the filter uses; None where that machine has no such call. Made once from the
# kernel's headers (asm/unistd_64.h; asm-generic/unistd.h, which aarch64 uses) and kept here: the launcher reads
# no header, and test_isolation.py checks this table against them where they are installed.
SYSCALLS = {"accept": (43, 202), "accept4": (288, 242), "access": (21, None), "acct": (163, 89),
            "add_key": (248, 217), "adjtimex": (159, 171), "alarm": (37, None), "arch_prctl": (158, None),
            "bind": (49, 200), "bpf": (321, 280), "brk": (12, 214), "capget": (125, 90), "capset": (126, 91),
            "chdir": (80, 49), "chmod": (90, None), "chown": (92, None), "chroot": (161, 51),
            "clock_adjtime": (305, 266), "clock_getres": (229, 114), "clock_gettime": (228, 113),
            "clock_nanosleep": (230, 115), "clock_settime": (227, 112), "clone": (56, 220), "clone3": (435, 435),
            "close": (3, 57), "close_range": (436, 436), "connect": (42, 203), "copy_file_range": (326, 285),
            "creat": (85, None), "delete_module": (176, 106), "dup": (32, 23), "dup2": (33, None), "dup3": (292, 24),
            "epoll_create": (213, None), "epoll_create1": (291, 20), "epoll_ctl": (233, 21),
            "epoll_pwait": (281, 22), "epoll_pwait2": (441, 441), "epoll_wait": (232, None), "eventfd": (284, None),
            "eventfd2": (290, 19), "execve": (59, 221), "execveat": (322, 281), "exit": (60, 93),
            "exit_group": (231, 94), "faccessat": (269, 48), "faccessat2": (439, 439), "fadvise64": (221, 223),
            "fallocate": (285, 47), "fanotify_init": (300, 262), "fchdir": (81, 50), "fchmod": (91, 52),
            "fchmodat": (268, 53), "fchown": (93, 55), "fchownat": (260, 54), "fcntl": (72, 25),
            "fdatasync": (75, 83), "fgetxattr": (193, 10), "finit_module": (313, 273), "flistxattr": (196, 13),
            "flock": (73, 32), "fork": (57, None), "fremovexattr": (199, 16), "fsconfig": (431, 431),
            "fsetxattr": (190, 7), "fsmount": (432, 432), "fsopen": (430, 430), "fspick": (433, 433),
            "fstat": (5, 80), "fstatfs": (138, 44), "fsync": (74, 82), "ftruncate": (77, 46), "futex": (202, 98),
            "futex_waitv": (449, 449), "futimesat": (261, None), "get_robust_list": (274, 100), "getcpu": (309, 168),
            "getcwd": (79, 17), "getdents": (78, None), "getdents64": (217, 61), "getegid": (108, 177),
            "geteuid": (107, 175), "getgid": (104, 176), "getgroups": (115, 158), "getitimer": (36, 102),
            "getpeername": (52, 205), "getpgid": (121, 155), "getpgrp": (111, None), "getpid": (39, 172),
            "getppid": (110, 173), "getpriority": (140, 141), "getrandom": (318, 278), "getresgid": (120, 150),
            "getresuid": (118, 148), "getrlimit": (97, 163), "getrusage": (98, 165), "getsid": (124, 156),
            "getsockname": (51, 204), "getsockopt": (55, 209), "gettid": (186, 178), "gettimeofday": (96, 169),
            "getuid": (102, 174), "getxattr": (191, 8), "init_module": (175, 105), "inotify_add_watch": (254, 27),
            "inotify_init": (253, None), "inotify_init1": (294, 26), "inotify_rm_watch": (255, 28),
            "io_uring_enter": (426, 426), "io_uring_register": (427, 427), "io_uring_setup": (425, 425),
            "ioctl": (16, 29), "ioperm": (173, None), "iopl": (172, None), "ioprio_get": (252, 31),
            "ioprio_set": (251, 30), "kcmp": (312, 272), "kexec_file_load": (320, 294), "kexec_load": (246, 104),
            "keyctl": (250, 219), "kill": (62, 129), "lchown": (94, None), "lgetxattr": (192, 9), "link": (86, None),
            "linkat": (265, 37), "listen": (50, 201), "listxattr": (194, 11), "llistxattr": (195, 12),
            "lookup_dcookie": (212, 18), "lremovexattr": (198, 15), "lseek": (8, 62), "lsetxattr": (189, 6),
            "lstat": (6, None), "madvise": (28, 233), "membarrier": (324, 283), "memfd_create": (319, 279),
            "mincore": (27, 232), "mkdir": (83, None), "mkdirat": (258, 34), "mknod": (133, None),
            "mknodat": (259, 33), "mlock": (149, 228), "mlock2": (325, 284), "mlockall": (151, 230),
            "mmap": (9, 222), "mount": (165, 40), "mount_setattr": (442, 442), "move_mount": (429, 429),
            "mprotect": (10, 226), "mq_getsetattr": (245, 185), "mq_notify": (244, 184), "mq_open": (240, 180),
            "mq_timedreceive": (243, 183), "mq_timedsend": (242, 182), "mq_unlink": (241, 181), "mremap": (25, 216),
            "msgctl": (71, 187), "msgget": (68, 186), "msgrcv": (70, 188), "msgsnd": (69, 189), "msync": (26, 227),
            "munlock": (150, 229), "munlockall": (152, 231), "munmap": (11, 215), "name_to_handle_at": (303, 264),
            "nanosleep": (35, 101), "newfstatat": (262, 79), "open": (2, None), "open_by_handle_at": (304, 265),
            "open_tree": (428, 428), "openat": (257, 56), "openat2": (437, 437), "pause": (34, None),
            "perf_event_open": (298, 241), "personality": (135, 92), "pidfd_getfd": (438, 438),
            "pidfd_open": (434, 434), "pidfd_send_signal": (424, 424), "pipe": (22, None), "pipe2": (293, 59),
            "pivot_root": (155, 41), "poll": (7, None), "ppoll": (271, 73), "prctl": (157, 167), "pread64": (17, 67),
            "preadv": (295, 69), "preadv2": (327, 286), "prlimit64": (302, 261), "process_vm_readv": (310, 270),
            "process_vm_writev": (311, 271), "pselect6": (270, 72), "ptrace": (101, 117), "pwrite64": (18, 68),
            "pwritev": (296, 70), "pwritev2": (328, 287), "quotactl": (179, 60), "quotactl_fd": (443, 443),
            "read": (0, 63), "readahead": (187, 213), "readlink": (89, None), "readlinkat": (267, 78),
            "readv": (19, 65), "reboot": (169, 142), "recvfrom": (45, 207), "recvmmsg": (299, 243),
            "recvmsg": (47, 212), "removexattr": (197, 14), "rename": (82, None), "renameat": (264, 38),
            "renameat2": (316, 276), "request_key": (249, 218), "restart_syscall": (219, 128), "rmdir": (84, None),
            "rseq": (334, 293), "rt_sigaction": (13, 134), "rt_sigpending": (127, 136), "rt_sigprocmask": (14, 135),
            "rt_sigqueueinfo": (129, 138), "rt_sigreturn": (15, 139), "rt_sigsuspend": (130, 133),
            "rt_sigtimedwait": (128, 137), "rt_tgsigqueueinfo": (297, 240), "sched_get_priority_max": (146, 125),
            "sched_get_priority_min": (147, 126), "sched_getaffinity": (204, 123), "sched_getattr": (315, 275),
            "sched_getparam": (143, 121), "sched_getscheduler": (145, 120), "sched_rr_get_interval": (148, 127),
            "sched_setaffinity": (203, 122), "sched_setattr": (314, 274), "sched_setparam": (142, 118),
            "sched_setscheduler": (144, 119), "sched_yield": (24, 124), "seccomp": (317, 277), "select": (23, None),
            "semctl": (66, 191), "semget": (64, 190), "semop": (65, 193), "semtimedop": (220, 192),
            "sendfile": (40, 71), "sendmmsg": (307, 269), "sendmsg": (46, 211), "sendto": (44, 206),
            "set_robust_list": (273, 99), "set_tid_address": (218, 96), "setdomainname": (171, 162),
            "setfsgid": (123, 152), "setfsuid": (122, 151), "setgid": (106, 144), "setgroups": (116, 159),
            "sethostname": (170, 161), "setitimer": (38, 103), "setns": (308, 268), "setpgid": (109, 154),
            "setpriority": (141, 140), "setregid": (114, 143), "setresgid": (119, 149), "setresuid": (117, 147),
            "setreuid": (113, 145), "setrlimit": (160, 164), "setsid": (112, 157), "setsockopt": (54, 208),
            "settimeofday": (164, 170), "setuid": (105, 146), "setxattr": (188, 5), "shmat": (30, 196),
            "shmctl": (31, 195), "shmdt": (67, 197), "shmget": (29, 194), "shutdown": (48, 210),
            "sigaltstack": (131, 132), "signalfd": (282, None), "signalfd4": (289, 74), "socket": (41, 198),
            "socketpair": (53, 199), "splice": (275, 76), "stat": (4, None), "statfs": (137, 43),
            "statx": (332, 291), "swapoff": (168, 225), "swapon": (167, 224), "symlink": (88, None),
            "symlinkat": (266, 36), "sync": (162, 81), "sync_file_range": (277, 84), "syncfs": (306, 267),
            "sysinfo": (99, 179), "syslog": (103, 116), "tee": (276, 77), "tgkill": (234, 131), "time": (201, None),
            "timer_create": (222, 107), "timer_delete": (226, 111), "timer_getoverrun": (225, 109),
            "timer_gettime": (224, 108), "timer_settime": (223, 110), "timerfd_create": (283, 85),
            "timerfd_gettime": (287, 87), "timerfd_settime": (286, 86), "times": (100, 153), "tkill": (200, 130),
            "truncate": (76, 45), "umask": (95, 166), "umount2": (166, 39), "uname": (63, 160), "unlink": (87, None),
            "unlinkat": (263, 35), "unshare": (272, 97), "userfaultfd": (323, 282), "utime": (132, None),
            "utimensat": (280, 88), "utimes": (235, None), "vfork": (58, None), "vhangup": (153, 58),
            "wait4": (61, 260), "waitid": (247, 95), "write": (1, 64), "writev": (20, 66)}
