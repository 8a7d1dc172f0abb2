"""Attacks on the seed's run forked by the preloaded process (zygote.py, preloaded.py), each run through the keeper's
own run_bounded as iteration.run_seed starts it, under the zygote and launched by exec (SEED_ZYGOTE=0), and each the
check that the two end alike: a run leaves the keeper no process, not even a zombie (the relay and the namespace's
init are the zygote's to reap: the keeper no longer looks for them); a run that ends on sys.exit with an odd
value ends with the code the interpreter gives (not 0 for 0.0, '' or [], not what a subclass of int makes of it); a
run that reads every byte of its own memory finds no earlier run's token (the zygote's copy of a request cleared)."""
import json
import os
import subprocess
import sys

import pytest

from conftest import load_keeper

sandbox = load_keeper("sandbox")
pytestmark = pytest.mark.skipif(not sandbox.isolation()[0], reason="the zygote needs namespaces of the run's own")

DRIVER = r'''import json, os, socket, sys, threading
sys.path.insert(0, sys.argv[1])
from supervisor.confined import sandbox, terrarium, zygote

gateway = socket.create_server(("127.0.0.1", 0))  # a relay is started for the seed's run: a gateway to reach
threading.Thread(target=lambda: [gateway.accept()[0].close() for _ in iter(int, 1)], daemon=True).start()


def states(pids):
    """Each process's state: "Z", "killed" (SIGKILL pending: it can run nothing more), or its state letter."""
    found = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as file:
                fields = dict(line.split(":", 1) for line in file)
        except OSError:
            continue
        pending = int(fields["SigPnd"], 16) | int(fields["ShdPnd"], 16)
        state = fields["State"].split()[0]
        found.append("killed" if state != "Z" and pending >> 8 & 1 else state)
    return found


for number, (name, text, seconds, *args) in enumerate(json.load(open(sys.argv[2]))):
    terrarium.WORK.mkdir(parents=True, exist_ok=True)
    terrarium.empty_scratch()
    (terrarium.WORK / name).write_text(text)
    env = terrarium.clean_env(GEMINI_API_KEY=f"the-token-of-run-{number}", PYTHONUNBUFFERED="1")
    code, output = terrarium.run_bounded(terrarium.python(name, *args), env, seconds,
                                         terrarium.policy(gateway_port=gateway.getsockname()[1]), start=zygote.start)
    held = zygote.current and zygote.current.process.pid
    print(json.dumps({"code": code, "output": output, "zygote": held,
                      "left": states(sandbox.descendants(os.getpid(), sandbox.KEPT)),
                      "below the zygote": states(sandbox.descendants(held)) if held else []}), flush=True)
'''


def runs(workspace, tmp_path, steps):
    """Each step ([script's name, text, seconds, its arguments...]) run as the seed is, under the zygote and launched:
    {"5": results, "0": results}, each {"code", "output", "zygote", "left": the states of the keeper's processes left
    outside the zygote, "below the zygote": the states of those below it}."""
    (tmp_path / "driver.py").write_text(DRIVER)
    (tmp_path / "steps.json").write_text(json.dumps(steps))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEED_")}
    results = {}
    for zygote in ("5", "0"):
        driver = [sys.executable, str(tmp_path / "driver.py"), str(workspace), str(tmp_path / "steps.json")]
        done = subprocess.run(driver, cwd=workspace, env={**env, "SEED_ZYGOTE": zygote}, capture_output=True, text=True,
                              timeout=240)
        assert done.returncode == 0, done.stderr
        results[zygote] = [json.loads(line) for line in done.stdout.splitlines()]
    assert all(result["zygote"] for result in results["5"]) and not any(result["zygote"] for result in results["0"])
    return results


STUBBORN = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('stays', flush=True)\n" \
           "while True:\n    time.sleep(1)\n"


def test_a_forked_run_leaves_the_keeper_no_process_not_even_a_zombie(workspace, tmp_path):
    """The attack: runs that end, and one that outstays its time. Each left its relay (and, killed, its namespace's
    init) to the keeper, their subreaper, as zombies it never reaped once it stopped looking after a zygote's run:
    one a run, for the keeper's life, each counted against the person's processes (RLIMIT_NPROC)."""
    steps = [["seed.py", "print('one')\n", 30], ["seed.py", STUBBORN, 1], *[["seed.py", "print('again')\n", 30]] * 4]
    results = runs(workspace, tmp_path, steps)
    for zygote in ("5", "0"):
        assert [result["code"] for result in results[zygote]] == [0, None, 0, 0, 0, 0]
        assert [result["left"] for result in results[zygote]] == [[]] * len(steps)
    for result in results["5"]:  # below the zygote: the last runs' (a relay still ending as the next run was asked
        assert len(result["below the zygote"]) <= 6 and set(result["below the zygote"]) <= {"Z", "killed"}  # waits)


EXITS = {"float.py": "import sys\nsys.exit(0.0)\n", "empty.py": "import sys\nsys.exit('')\n",
         "list.py": "import sys\nsys.exit([])\n", "beyond.py": "import sys\nsys.exit(2 ** 70)\n",
         "subclass.py": "import sys\nclass Code(int):\n    def __and__(self, other):\n        return 0\n"
                        "sys.exit(Code(3))\n",
         "none.py": "import sys\nsys.exit(None)\n", "wrapped.py": "import sys\nsys.exit(256 + 7)\n"}


def test_a_forked_run_ending_on_sys_exit_ends_with_the_code_a_launched_one_does(workspace, tmp_path):
    """The attack: odd values given to sys.exit. `exited.code or 0` ended 0.0, '' and [] with 0 (a launched run: the
    value printed, and 1), 2 ** 70 with 0 (255), and let a subclass of int choose its code by its own `&` (3)."""
    results = runs(workspace, tmp_path, [[name, text, 30] for name, text in EXITS.items()])
    for zygote in ("5", "0"):
        assert [result["code"] for result in results[zygote]] == [1, 1, 1, 255, 3, 0, 7]
        assert [result["output"] for result in results[zygote][:3]] == ["0.0\n", "\n", "[]\n"]


SCAN = r"""import os, re
found = set()
with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb", buffering=0) as memory:
    for line in maps:
        span, rights = line.split()[:2]
        low, high = (int(end, 16) for end in span.split("-"))
        if rights.startswith("r"):
            try:
                memory.seek(low)
                found.update(re.findall(rb"the-token-of-run-[0-9]+", memory.read(high - low)))
            except (OSError, OverflowError, ValueError):
                pass
print("TOKENS", sorted(token.decode() for token in found))
"""


def test_a_forked_run_finds_no_earlier_runs_token_in_its_memory(workspace, tmp_path):
    """The attack: read every readable byte of the run's own memory, forked from the zygote's, for a token. The
    zygote parsed each request itself and freed it: a later run of another request's size (a long argument) found
    the earlier run's token where the zygote's heap had held it."""
    steps = [["seed.py", "print('the first')\n", 30], ["scan.py", SCAN, 30], ["scan.py", SCAN, 30, "long" * 800]]
    results = runs(workspace, tmp_path, steps)
    for zygote in ("5", "0"):
        told = [next(line for line in result["output"].splitlines() if line.startswith("TOKENS"))
                for result in results[zygote][1:]]
        assert told == ["TOKENS ['the-token-of-run-1']", "TOKENS ['the-token-of-run-2']"]


UNDONE_END = "import threading\nthreading._shutdown = lambda: 1 / 0\nprint('ran', flush=True)\n"


def test_a_forked_run_that_breaks_the_interpreters_end_still_ends_there(workspace, tmp_path):
    """The attack: a script that replaces what the end of a script calls (threading._shutdown) with one that raises.
    The error escaped the child's last step into the zygote's own loop, in the child: the run must end where it is,
    without the zygote's code running on in it (its path in the traceback)."""
    results = runs(workspace, tmp_path, [["undone.py", UNDONE_END, 30]])
    forked = results["5"][0]
    assert forked["code"] is not None and forked["output"].startswith("ran\n")
    assert "preloaded.py" not in forked["output"]
