"""Benchmark: what confining one run costs, launch by launch: Landlock alone, and namespaces of its own with the relay.

    python bench/launch.py                # 40 launches of each kind; about ten seconds
    python bench/launch.py --launches 100

Each kind launches `python -c pass` through supervisor/confined/sandbox.py's launcher as the keeper does (the seed's
policy: Landlock, the gateway's port; the gate's: its own servers; both, the system call filter), started in
sandbox.START and entering a throwaway working copy, with a loopback server standing in for the gateway. Rows:
plain `python -c pass`; the seed's and the gate's policy without namespaces; the same with namespaces (user, PID,
mount, network, IPC, UTS, cgroup, a private /dev/shm, the relay); and
a connection through the relay to the gateway and back, against one straight to it. Medians and the 90th
percentile, in milliseconds. Also the one-time trial at the keeper's start (sandbox.isolation()). Prints
figures; asserts nothing.
"""
import argparse
import importlib.util
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LIMITS = {"RLIMIT_AS": 4096 << 20, "RLIMIT_CPU": 600, "RLIMIT_FSIZE": 64 << 20, "RLIMIT_NOFILE": 1024}
ROUND_TRIP = """import socket, sys, time
port, times = int(sys.argv[1]), []
for _ in range(int(sys.argv[2])):
    start = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port)) as gateway:
        gateway.sendall(b"ping")
        gateway.recv(4)
    times.append(time.perf_counter() - start)
print(" ".join(map(str, times)))
"""  # connections to the gateway, each timed from connect to its answer


def load_sandbox():
    spec = importlib.util.spec_from_file_location("bench_sandbox", REPO / "supervisor" / "confined" / "sandbox.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def echo_server():
    """A stand-in gateway on loopback: answers each connection's four bytes with four bytes."""
    server = socket.create_server(("127.0.0.1", 0))

    def answer(client):
        with client:
            client.sendall(client.recv(4))

    def serve():
        while True:
            threading.Thread(target=answer, args=(server.accept()[0],), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return server.getsockname()[1]


def timed(argv, cwd, launches):
    """Milliseconds of each of `launches` runs of argv, start to exit."""
    times = []
    for _ in range(launches):
        start = time.perf_counter()
        subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
        times.append((time.perf_counter() - start) * 1000)
    return times


def row(name, times):
    ordered = sorted(times)
    print(f"  {name:<56} median {statistics.median(ordered):7.1f} ms   p90 {ordered[int(len(ordered) * 0.9)]:7.1f} ms")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=40)
    args = parser.parse_args()
    sandbox = load_sandbox()
    start = time.perf_counter()
    sandbox.isolation.cache_clear()
    isolated, how = sandbox.isolation()
    trial = (time.perf_counter() - start) * 1000
    print(f"{platform.platform()}, Python {platform.python_version()}, {sandbox.probe().text}")
    print(f"  {how}\n  the trial at the keeper's start: {trial:.1f} ms")
    port = echo_server()
    with tempfile.TemporaryDirectory() as folder:
        work, temp = Path(folder, "work"), Path(folder, "temp")
        work.mkdir()
        temp.mkdir()
        policy = lambda **choices: sandbox.policy_for(work, temp, choices.pop("port", None), LIMITS, **choices)
        launch = lambda rules, argv: sandbox.command(argv, rules, work)  # started in sandbox.START, as the keeper does
        row("python -c pass, plain", timed([sys.executable, "-c", "pass"], work, args.launches))
        kinds = [("seed's policy", dict(port=port)), ("gate's policy (own servers)", dict(own_servers=True))]
        for name, choices in kinds:
            row(f"{name}, Landlock only", timed(launch(policy(**choices), [sys.executable, "-c", "pass"]),
                                                sandbox.START, args.launches))
            if isolated:
                argv = launch(policy(isolate=True, **choices), [sys.executable, "-c", "pass"])
                row(f"{name}, namespaces + Landlock", timed(argv, sandbox.START, args.launches))
        for name, rules in [("straight", policy(port=port)), ("through the relay", policy(port=port, isolate=True))]:
            if rules["isolate"] and not isolated:
                continue
            done = subprocess.run(launch(rules, [sys.executable, "-c", ROUND_TRIP, str(port), str(args.launches)]),
                                  cwd=sandbox.START, check=True, capture_output=True, text=True)
            row(f"a connection to the gateway and back, {name}", [float(t) * 1000 for t in done.stdout.split()])


if __name__ == "__main__":
    main()
