"""The supervisor end to end: `python fallback.py` in a copy of the workspace, against the fake Gemini server.

These are slow for the gate, so fallback.py keeps this file out of it.
"""
import gc
import gzip
import hashlib
import json
import os
import re
import socket
import shutil
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

import fake_gemini as api
from conftest import KEY, REPO, fresh_workspace, keeper, load_keeper, requests_booked, subreaper

CRASHES_AT_START = "def main():\n    raise RuntimeError('the evolved seed broke at start')\n\n\n" \
                   "if __name__ == '__main__':\n    main()\n"
HANGS_WITH_A_CHILD = """import os, subprocess, sys, time
def main():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    print("child pid", child.pid, flush=True)
    time.sleep(300)
if __name__ == "__main__":
    main()
"""
DOES_NOTHING = "if __name__ == '__main__':\n    pass\n"


def evolved_seed(body):
    """A stand-in seed.py that runs `body`, then leaves a record as a real seed does."""
    return (f"import json, pathlib, sys, time\n\n\ndef main():\n{body}\n"
            "    pathlib.Path('.seed').mkdir(exist_ok=True)\n"
            "    pathlib.Path('.seed/record.json').write_text(json.dumps({'outcome': 'applied', 'requests': 1}))\n\n\n"
            "if __name__ == '__main__':\n    main()\n")


def snapshot_folders(root, sid):
    """{folder: sha256 of its listing} of a snapshot, as README documents backups/NNNN.json."""
    return json.loads((root / "backups" / f"{sid}.json").read_bytes())


def snapshot_files(root, sid):
    """{path: sha256} of a snapshot: each folder's listing is an object, {name: sha256}."""
    read = lambda sha: json.loads((root / "backups" / "objects" / sha[:2] / sha[2:]).read_bytes())
    return {folder + name: sha for folder, listing in snapshot_folders(root, sid).items()
            for name, sha in read(listing).items()}


def run_fallback(root, env, *args, timeout=120):
    """The keeper, with no rest between iterations, in this process (conftest.keeper)."""
    return keeper(root, env, "--delay", "0", *args, timeout=timeout)


def fallback_process(root, env, *args, timeout=120):
    """The keeper as a process of its own: for what only a process shows (its exit, its signals, its output)."""
    return subprocess.run([sys.executable, "fallback.py", "--delay", "0", *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=timeout)


def outcomes(root):
    return re.findall(r"^## Iteration \d+ — [\d-]+ [\d:]+ UTC — (.*)$", (root / "iteration_log.md").read_text(), re.M)


def alive(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def processes_in(root):
    """Process ids whose working directory is the workspace (the seed and anything it started)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and os.readlink(entry / "cwd").startswith(str(root)):
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def command_of(pid):
    """A process's command line, or '' if it has just ended."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:
        return ""


def wait_for(condition, seconds=20):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def test_a_keeper_run_in_this_process_leaves_it_as_it_found_it(tmp_path, env, gemini):
    """The tests run the keeper in their own process (conftest.keeper): each run must leave nothing behind that the
    next test, or the next keeper on the same folder, would meet."""
    def state():
        children = load_keeper("sandbox").descendants(os.getpid())
        return (threading.active_count(), sorted(os.listdir("/proc/self/fd")), children, os.getcwd(), dict(os.environ),
                [signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM)], list(sys.path),
                sorted(name for name in sys.modules if name.partition(".")[0] == "supervisor"), sys.stdout, sys.stderr,
                subreaper())
    gc.collect()  # what earlier tests of this worker left to the collector is not this run's
    before = state()
    workspace = fresh_workspace(tmp_path / "workspace")
    for n in range(2):  # the second run finds the folder free: the first's lock and record are closed
        gemini.reply(api.answer([("notes.py", f"def add(text):\n    return text * {n + 2}\n")], tasks=["Add"]))
        done = run_fallback(workspace, env, "--iterations", "1")
        assert done.returncode == 0, done.stderr
        assert re.search(r"#\d+ landed", done.stdout)
        settled = time.monotonic() + 5  # the fake server's thread for the last request ends as its client hangs up
        while state() != before and time.monotonic() < settled:
            time.sleep(0.05)
        assert state() == before
    assert (workspace / "notes.py").read_text().endswith("text * 3\n")


def test_a_test_with_processes_of_its_own_is_refused_a_keeper_in_its_process(workspace, env):
    """The keeper ends and reaps every process below its own at a run's end (sandbox.end_descendants): in the test's
    process, those would be the test's too. So a test that has any is told to start the keeper as a process."""
    own = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with pytest.raises(AssertionError, match="start the keeper as a process"):
            run_fallback(workspace, env, "--iterations", "1")
        assert own.poll() is None and not (workspace / "backups").exists()  # nothing ran, nothing was ended
    finally:
        own.kill()
        own.wait()


def test_a_change_lands_and_is_logged(workspace, env, gemini):
    gemini.reply(api.answer([("notes.py", "def add(text):\n    return text\n")],
                            tasks=["Create notes.py", "Add add()", "Keep it small"]))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0, done.stderr
    assert (workspace / "notes.py").exists()
    log = (workspace / "iteration_log.md").read_text()
    assert outcomes(workspace) == ["landed: 1 file(s) changed"]
    assert "  1. Create notes.py" in log and "notes.py (new) +2 −0" in log
    assert "gemini-3.5-flash, 1 request(s), tokens 1,200 prompt + 300 output + 150 thinking" in log
    assert re.search(r"#1 landed: .*notes\.py \(new\) \+2", done.stdout)
    assert "1 iteration(s): 1 landed; 1 request(s), 1,650 tokens; codebase 1 → 2 files" in done.stdout
    assert "\x1b" not in done.stdout  # redirected: plain lines, no colour or status line
    shown = run_fallback(workspace, env, "--materialise", "1")
    assert shown.returncode == 0 and str(workspace / "backups" / "0001") in shown.stdout
    assert (workspace / "backups" / "0001" / "seed.py").read_bytes() == (REPO / "seed.py").read_bytes()
    assert not (workspace / "backups" / "0001" / "notes.py").exists()  # genesis: as it was before the change


def test_every_test_the_project_ships_lives_where_the_model_never_writes():
    settings = load_keeper("settings")
    tracked = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, text=True, check=True)
    shipped = [rel for rel in tracked.stdout.split("\0") if re.search(r"(^|/)(test_[^/]*|conftest)\.py$", rel)]
    assert shipped and all(rel.split("/")[0] in settings.NOT_CODE for rel in shipped)  # else the gate runs them
    assert settings.CONTRACT in shipped and set(settings.TEST_SUPPORT) <= set(shipped) | {"supervisor/tests/fake_gemini.py"}


def test_the_readmes_test_command_runs_none_of_the_models_code(tmp_path):
    """The keeper's tests live in supervisor/tests/, whose pytest.ini makes it their root, and run with -P (the
    folder is not put on sys.path): a test, conftest.py, pytest.ini, plugin or json.py the model grew in the folder
    is never collected, loaded or imported by them."""
    clone = a_fresh_clone(tmp_path)
    command = re.search(r"```sh\n(python [^\n]*-m pytest [^\n]*)\n```", (REPO / "README.md").read_text())[1]
    assert command in (REPO / ".ci" / "run").read_text()  # CI runs the README's command
    (clone / ".env").write_text("GEMINI_API_KEY=AIzaSyTHE-PERSONS-OWN-KEY-0123456789abcdef\n")
    leaked = tmp_path / "leaked.txt"
    spy = f"import pathlib\npathlib.Path({str(leaked)!r}).write_text(pathlib.Path('../.env').read_text())\n"
    for rel in ("tests/test_spy.py", "tests/conftest.py", "conftest.py", "spyplugin.py", "json.py", "textwrap.py"):
        (clone / rel).parent.mkdir(exist_ok=True)
        (clone / rel).write_text(spy)
    (clone / "pytest.ini").write_text("[pytest]\naddopts = -p spyplugin\n")
    env = {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_")}  # not this worker's
    done = subprocess.run([sys.executable, *command.split()[1:], "--collect-only", "-n", "0"], cwd=clone, env=env,
                          capture_output=True, text=True, timeout=120)  # collected in one process: no workers
    assert done.returncode == 0, done.stdout + done.stderr
    assert "test_seed.py::" in done.stdout and "test_spy" not in done.stdout
    assert not leaked.exists()


def test_a_syntax_error_is_refused_and_fed_back_to_the_next_prompt(workspace, env, gemini):
    gemini.reply(api.answer([("calc.py", "def add(a, b:\n    return a + b\n")]))
    gemini.reply(api.answer([("calc.py", "def add(a, b):\n    return a + b\n")], done=[1]))
    done = run_fallback(workspace, env, "--iterations", "2")
    assert done.returncode == 0, done.stderr
    assert outcomes(workspace) == ["no change: compile error: '(' was never closed (calc.py, line 1)",
                                   "landed: 1 file(s) changed"]
    assert "The last answer was not applied: compile error" in gemini.prompts()[1]
    assert "- [x] The last answer was not applied: compile error" in (workspace / "pending_tasks.md").read_text()


def test_broken_code_that_reaches_the_disk_is_rolled_back(workspace, env, gemini):
    (workspace / "seed.py").write_text(evolved_seed("    pathlib.Path('broken.py').write_text('def f(:\\n')"))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0, done.stderr
    assert outcomes(workspace) == ["rolled back: does not compile"]
    assert not (workspace / "broken.py").exists()
    assert "broken.py" in snapshot_files(workspace, "0002")  # the failing state is kept
    assert "broken.py" in (workspace / "pending_tasks.md").read_text()


def test_a_seed_that_crashes_at_its_next_start_is_rolled_back(workspace, env, gemini):
    gemini.reply(api.answer([("hello.py", "print('hi')\n")]))
    gemini.reply(api.answer([("seed.py", CRASHES_AT_START)]))
    gemini.reply(api.answer([("later.py", "x = 1\n")]))
    done = run_fallback(workspace, env, "--iterations", "4")
    assert done.returncode == 0, done.stderr
    assert outcomes(workspace) == ["landed: 1 file(s) changed", "landed: 1 file(s) changed",
                                   "rolled back: seed.py crashed (exit 1)", "landed: 1 file(s) changed"]
    assert (workspace / "seed.py").read_bytes() == (REPO / "seed.py").read_bytes()
    assert (workspace / "hello.py").exists() and (workspace / "later.py").exists()
    tasks = (workspace / "pending_tasks.md").read_text()
    assert "- [ ] Iteration 3 was rolled back: seed.py crashed (exit 1)" in tasks
    assert "RuntimeError: the evolved seed broke at start" in tasks


def test_a_hang_is_killed_with_its_children(workspace, env, gemini):
    gemini.reply(api.answer([("seed.py", HANGS_WITH_A_CHILD)]))
    started = time.monotonic()
    done = run_fallback(workspace, env, "--iterations", "2", "--timeout", "4")
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 30
    assert outcomes(workspace)[1] == "rolled back: seed.py timed out and was killed with its children"
    assert "child pid" in (workspace / "iteration_log.md").read_text()  # a pid of its own PID namespace, maybe
    assert not processes_in(workspace)
    assert (workspace / "seed.py").read_bytes() == (REPO / "seed.py").read_bytes()


IGNORES_ITS_BUDGET = """import os, sys, requests
def main():
    body = {"contents": [{"role": "user", "parts": [{"text": "x" * 1_000_000}]}]}
    reply = requests.post(os.environ["GEMINI_API_BASE"] + "/v1beta/models/any:generateContent", json=body,
                          headers={"x-goog-api-key": os.environ["GEMINI_API_KEY"]})
    print(reply.status_code, reply.json()["error"]["message"])
    sys.exit(75)
if __name__ == "__main__":
    main()
"""


def test_a_seed_that_breaks_the_gateways_rules_is_rolled_back_and_costs_no_request(workspace, env, gemini):
    gemini.reply(api.answer([("seed.py", IGNORES_ITS_BUDGET)]))
    done = run_fallback(workspace, env, "--iterations", "2")
    assert done.returncode == 0, done.stderr
    assert outcomes(workspace)[1] == "rolled back: the gateway refused seed.py's request"
    assert len(gemini.requests) == 1  # the over-budget prompt never left the gateway
    assert "over this run's budget" in (workspace / "pending_tasks.md").read_text()
    assert (workspace / "seed.py").read_bytes() == (REPO / "seed.py").read_bytes()


def test_a_seed_that_does_nothing_is_a_stall_and_rolled_back(workspace, env, gemini):
    gemini.reply(api.answer([("seed.py", DOES_NOTHING)]))
    done = run_fallback(workspace, env, "--iterations", "2")
    assert outcomes(workspace)[1] == "rolled back: seed.py exited 0 without asking the model or changing anything (a stall)"
    assert (workspace / "seed.py").read_bytes() == (REPO / "seed.py").read_bytes()
    assert done.returncode == 0


def test_a_failing_test_the_model_wrote_rolls_its_change_back(workspace, env, gemini):
    gemini.reply(api.answer([("calc.py", "def add(a, b):\n    return a - b\n"),
                             ("tests/test_calc.py", "from calc import add\n\n\ndef test_add():\n"
                                                    "    assert add(2, 2) == 4\n")]))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0, done.stderr
    assert outcomes(workspace) == ["rolled back: tests failed"]
    assert not (workspace / "calc.py").exists() and not (workspace / "tests" / "test_calc.py").exists()
    assert "assert -0 == 4" in (workspace / "pending_tasks.md").read_text() or \
           "assert 0 == 4" in (workspace / "pending_tasks.md").read_text()


def test_the_seed_contract_tests_in_the_gate_roll_back_an_unsafe_seed(workspace, env, gemini):
    (workspace / "supervisor" / "tests" / "test_seed.py").write_bytes((REPO / "supervisor/tests/test_seed.py").read_bytes())
    original = (REPO / "seed.py").read_text()
    unsafe = original.replace('if why := refusal(item.get("path"), item.get("content")):', "if why := None:")
    assert unsafe != original
    gemini.reply(api.answer([("seed.py", unsafe)]))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0, done.stderr
    assert outcomes(workspace) == ["rolled back: tests failed: seed.py breaks its docstring's rules: unsafe paths are "
                                   "refused and the rest written"]
    assert (workspace / "seed.py").read_text() == original
    assert "supervisor/tests" not in (workspace / "pending_tasks.md").read_text()  # the keeper's file: never shown


def test_a_seed_rewrite_that_breaks_its_contract_is_dropped_and_the_rest_of_the_answer_lands(workspace, env, gemini):
    """A small model wrote the goal's code into seed.py beside a good module: nothing imports the seed, so the rest
    is judged on its own; the task says which of the seed's rules its rewrite broke, in words."""
    (workspace / "supervisor" / "tests" / "test_seed.py").write_bytes((REPO / "supervisor/tests/test_seed.py").read_bytes())
    original = (REPO / "seed.py").read_text()
    gemini.reply(api.answer([("seed.py", original + "\n\ndef add(a, b):\n    return a + b\n" * 3),
                             ("calc.py", "def add(a, b):\n    return a + b\n")]))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0, done.stderr
    assert outcomes(workspace) == ["landed: 1 file(s) changed"]
    assert (workspace / "seed.py").read_text() == original and (workspace / "calc.py").exists()
    tasks = (workspace / "pending_tasks.md").read_text()
    assert "Iteration 1 landed without its seed.py: seed.py breaks its docstring's rules: the seed stays tiny" in tasks
    assert "supervisor/tests" not in tasks, tasks


def test_unsafe_paths_are_refused_and_logged(workspace, env, gemini):
    fallback_before = (workspace / "fallback.py").read_bytes()
    gemini.reply(api.answer([("fallback.py", "print('mine now')\n"), ("../outside.py", "x = 1\n"),
                             ("/tmp/absolute.py", "x = 1\n")]))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0, done.stderr
    assert (workspace / "fallback.py").read_bytes() == fallback_before
    assert not (workspace.parent / "outside.py").exists()
    log = (workspace / "iteration_log.md").read_text()
    assert "- Refused: fallback.py: protected; ../outside.py: a name that starts with \".\"" in log  # off the list of
    assert "/tmp/absolute.py: an empty name" in log  # names, left out before the seed writes: the seed refuses the rest


def test_the_keepers_files_a_seed_writes_never_land(workspace, env, gemini):
    fallback_before = (workspace / "fallback.py").read_bytes()
    (workspace / "seed.py").write_text(evolved_seed("    pathlib.Path('fallback.py').write_text('gone')"))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0, done.stderr
    assert (workspace / "fallback.py").read_bytes() == fallback_before
    assert "- Not landed (the keeper's): fallback.py" in (workspace / "iteration_log.md").read_text()


def test_a_rewritten_seed_cannot_forge_log_headings_through_its_record(workspace, env, gemini):
    (workspace / "seed.py").write_text(
        "import json, pathlib\n\n\nif __name__ == '__main__':\n    pathlib.Path('.seed').mkdir()\n"
        "    pathlib.Path('.seed/record.json').write_text(json.dumps({'tasks': ['real\\n\\n## Iteration 99 — "
        "forged'], 'requests': 'many', 'tokens': {'prompt': -5}}))\n")
    gemini.reply(api.answer([]))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0, done.stderr
    assert outcomes(workspace) == ["rolled back: seed.py exited 0 without asking the model or changing anything "
                                   "(a stall)"]
    assert "Iteration 99" not in (workspace / "iteration_log.md").read_text()  # the tasks come from the answer
    assert "0 request(s), 0 tokens" in done.stdout


def test_endless_output_neither_stalls_the_loop_nor_bloats_a_file(workspace, env, gemini):
    (workspace / "seed.py").write_text(evolved_seed("    for _ in range(20 * 1024):\n"
                                                    "        sys.stdout.write('x' * 1023 + '\\n')"))
    started = time.monotonic()
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 30
    assert outcomes(workspace) == ["rolled back: seed.py exited 0 without asking the model or changing anything "
                                   "(a stall)"]
    assert (workspace / "iteration_log.md").stat().st_size < 20_000
    assert (workspace / "pending_tasks.md").stat().st_size < 20_000


def test_a_per_minute_limit_is_waited_out_without_rollback(workspace, env, gemini):
    gemini.reply(api.per_minute("0.2s")).reply(api.answer([("a.py", "a = 1\n")]))
    tasks_before = (workspace / "pending_tasks.md").read_text()
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0, done.stderr
    assert outcomes(workspace) == ["landed: 1 file(s) changed"] and len(gemini.requests) == 2
    assert (workspace / "pending_tasks.md").read_text() == tasks_before


def test_a_spent_day_waits_for_the_reset_without_retrying(workspace, env, gemini):
    gemini.reply(api.per_day())
    tasks_before = (workspace / "pending_tasks.md").read_text()
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0, done.stderr
    [outcome] = outcomes(workspace)
    assert re.fullmatch(r"waiting until \d{4}-\d\d-\d\d 0[78]:00 UTC", outcome)  # the log and record: UTC
    midnight = datetime.strptime(outcome[14:30], "%Y-%m-%d %H:%M").replace(tzinfo=timezone.utc).astimezone()
    assert f"#1 waiting until {midnight:%a %H:%M} local time" in done.stdout  # the console: local, as its clock
    assert len(gemini.requests) == 1
    assert (workspace / "pending_tasks.md").read_text() == tasks_before  # no rollback, no task


def test_a_missing_key_stops_before_anything_runs(workspace, env, gemini):
    del env["GEMINI_API_KEY"]
    shutil.copy(REPO / ".env.example", workspace / ".env")  # the README's set-up, before the key is put in
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 78
    assert done.stdout == "" and len(done.stderr.strip().splitlines()) == 1
    assert "GEMINI_API_KEY is not set: put it in .env as  GEMINI_API_KEY=your-key" in done.stderr
    assert "https://aistudio.google.com/apikey" in done.stderr
    assert gemini.requests == [] and not (workspace / "backups" / "index.json").exists()


@pytest.mark.parametrize("line, environment, said", [
    ("GEMINI_API_KEY=AIzaSyKEY-IN-ENV-0000000000000000000", "", "GEMINI_API_KEY is set but empty in the environment, "
                                                               "which wins over .env: unset it"),
    ("GEMINI_API_KEY= #AIzaSyKEY-AFTER-A-HASH-000000000000000", None, "GEMINI_API_KEY in .env could not be read: write "
                                                                       "it as one line,  GEMINI_API_KEY=your-key")],
    ids=["empty in the environment", "read as a comment"])
def test_a_key_written_in_env_that_does_not_reach_the_keeper_is_said_as_such(workspace, env, gemini, line,
                                                                              environment, said):
    """.env is read once, at the start (envfile.py): what it gave a value to and what the environment holds decide."""
    del env["GEMINI_API_KEY"]
    if environment is not None:
        env["GEMINI_API_KEY"] = environment
    (workspace / ".env").write_text(line + "\n")
    done = run_fallback(workspace, env, "--iterations", "1")
    assert (done.returncode, done.stderr.strip()) == (78, f"fallback: {said}") and gemini.requests == []


@pytest.mark.parametrize("mistake, says", [
    (lambda root: (root / "goal.md").unlink(), "goal.md is missing or empty"),
    (lambda root: (root / "goal.md").write_text("  \n"), "goal.md is missing or empty"),
    (lambda root: (root / "backups").write_text("a file where the folder should be"), "cannot write in"),
    (lambda root: (root / ".env").write_text("SEED_MEMORY_MB=4 GB\n"), "SEED_MEMORY_MB='4 GB' is not a whole number"),
    (lambda root: (root / ".env").write_text("SEED_REQUESTS_PER_RUN=0\n"), "SEED_REQUESTS_PER_RUN='0' is not"),
    (lambda root: (root / ".env").write_text("SEED_FAULT_PAUSE=5m\n"), "SEED_FAULT_PAUSE='5m' is not a number"),
    (lambda root: (root / ".env").write_text("SEED_SANDBOX=required\n"), "the one value it takes is  require"),
    (lambda root: (root / ".env").write_text("GEMINI_MODEL=x\n", "utf-16"), "cannot read .env (not UTF-8 text)"),
])
def test_a_setup_mistake_stops_with_one_line_that_says_what_to_fix(workspace, env, gemini, mistake, says):
    mistake(workspace)
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 78 and gemini.requests == []
    assert done.stdout == "" and len(done.stderr.strip().splitlines()) == 1 and says in done.stderr
    assert run_fallback(workspace, env, "--help").returncode == 0  # whatever the mistake, the help is there


@pytest.mark.parametrize("dotenv, works", [
    (b"\xef\xbb\xbfGEMINI_API_KEY=%s\n", True),  # saved by Notepad: a byte-order mark first
    (b"GEMINI_API_KEY='%s\n", False),  # a quote left open
])
def test_a_key_in_dotenv_is_read_as_an_editor_saves_it_or_said_unreadable(workspace, env, gemini, dotenv, works):
    del env["GEMINI_API_KEY"]
    (workspace / ".env").write_bytes(dotenv % KEY.encode())
    gemini.reply(api.answer([("a.py", "a = 1\n")]))
    done = run_fallback(workspace, env, "--iterations", "1")
    if works:
        assert done.returncode == 0 and outcomes(workspace) == ["landed: 1 file(s) changed"], done.stderr
    else:
        assert done.returncode == 78 and ".env line 1 (GEMINI_API_KEY=…) cannot be read" in done.stderr
        assert gemini.requests == [] and KEY not in done.stdout + done.stderr


def test_started_from_another_folder_it_works_on_its_own(workspace, env, gemini, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    gemini.reply(api.answer([("a.py", "a = 1\n")]))
    done = subprocess.run([sys.executable, str(workspace / "fallback.py"), "--iterations", "1"], cwd=elsewhere,
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"growing {workspace}" in done.stdout
    assert (workspace / "a.py").exists() and list(elsewhere.iterdir()) == []


def a_fresh_clone(tmp_path):
    """Every file git tracks in this project, as a user's `git clone` has them."""
    tracked = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, text=True, check=True)
    root = tmp_path / "clone"
    for rel in filter(None, tracked.stdout.split("\0")):
        if (REPO / rel).is_file():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, root / rel)
    return root


def test_the_demo_runs_offline_in_a_copy_leaves_the_workspace_alone_and_says_how_to_read_its_record(env, tmp_path):
    workspace = a_fresh_clone(tmp_path)
    env["TMPDIR"] = str(tmp_path)  # where the demo's copy goes, and pytest clears
    del env["GEMINI_API_KEY"]
    env["GEMINI_API_BASE"] = "http://127.0.0.1:9"  # the real API is never asked
    before = {p: p.read_bytes() for p in workspace.rglob("*") if p.is_file()}
    done = subprocess.run([sys.executable, "fallback.py", "--demo"], cwd=workspace, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert {p: p.read_bytes() for p in workspace.rglob("*") if p.is_file()} == before
    copy = Path(re.search(r"The demo's copy is (\S+)", done.stdout).group(1))
    assert copy.is_relative_to(tmp_path)
    assert outcomes(copy) == ["landed: 2 file(s) changed", "rolled back: tests failed", "landed: 2 file(s) changed"]
    assert "notes.find(\"milk\", path)" in (copy / "pending_tasks.md").read_text()
    assert "- [x] Iteration 2 was rolled back" in (copy / "pending_tasks.md").read_text()
    assert "GEMINI_API_KEY=" in done.stdout  # the next step
    page = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", (copy / "report.html").read_text()))
    assert f"its page: {copy / 'report.html'}" in " ".join(done.stdout.split())
    assert "3 iterations 2 landed 1 rolled back" in page and "Files: 3" in page and "Tests: 2" in page
    said = re.search(r"^  its record: cd (\S+) && python (fallback\.py --show 2)  ", done.stdout, re.M)
    assert Path(said[1]) == copy
    shown = subprocess.run([sys.executable, *said[2].split()], cwd=copy, env=env, capture_output=True, text=True,
                           timeout=60)
    assert shown.returncode == 0 and shown.stdout.startswith("Iteration 2 — ") and "rolled back" in shown.stdout
    replayed = run_fallback(workspace, env, "--replay", str(copy)).stdout  # the same keeper, from the clone
    keepers = re.search(r"recorded by keeper (\S+), replayed by keeper (\S+)$", replayed.strip()).groups()
    assert keepers[0] == keepers[1], replayed
    exported = subprocess.run([sys.executable, "fallback.py", "--export-git", str(tmp_path / "history")], cwd=copy,
                              env=env, capture_output=True, text=True, timeout=60)
    assert exported.returncode == 0, exported.stderr
    log = subprocess.run(["git", "-C", str(tmp_path / "history"), "log", "--format=%s"], capture_output=True,
                         text=True).stdout.splitlines()
    assert log == ["Iteration 3: Fix find so that it ignores case (the rolled-back iteration's task)",
                   "Iteration 1: Create notes.py with add and list", "Genesis: the codebase before iteration 1"]
    again = subprocess.run([sys.executable, "fallback.py", "--export-git", str(copy)], cwd=copy, env=env,
                           capture_output=True, text=True, timeout=60)
    assert again.returncode == 78 and len(again.stderr.strip().splitlines()) == 1  # not into the workspace


def test_a_rejected_key_stops_with_one_clear_line_and_leaks_nowhere(workspace, env, gemini):
    gemini.reply(api.key_invalid(KEY))
    done = run_fallback(workspace, env)
    assert done.returncode == 78
    assert "Gemini refused this key (400 INVALID_ARGUMENT, API_KEY_INVALID)" in done.stdout
    assert "Fix GEMINI_API_KEY in .env" in done.stdout
    assert outcomes(workspace) == ["stopped: configuration error"]
    assert KEY not in done.stdout + done.stderr
    assert not [p for p in workspace.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]


def test_no_process_started_for_the_models_code_has_the_key(workspace, env, gemini):
    spy = "import os, pathlib\n(pathlib.Path(os.environ['TMPDIR']) / 'seen_by_the_gate.txt').write_text(repr(dict(os.environ)))\n"
    gemini.reply(api.answer([("spy.py", spy), ("tests/test_spy.py", "import spy\n\n\ndef test_spy():\n    pass\n")]))
    (workspace / "seed.py").write_text((REPO / "seed.py").read_text().replace(
        "def main():\n", "def main():\n    Path('seen_by_the_seed.txt').write_text(repr(dict(os.environ)))\n"))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0, done.stderr
    assert outcomes(workspace) == ["landed: 3 file(s) changed"]
    by_seed = (workspace / "seen_by_the_seed.txt").read_text()  # it landed
    by_gate = (workspace / ".seed" / "tmp" / "seen_by_the_gate.txt").read_text()  # written by the import check
    assert "'GEMINI_API_KEY': '" in by_seed and "'GEMINI_API_BASE': 'http://127.0.0.1:" in by_seed
    assert "'GEMINI_API_BASE': 'http://127.0.0.1:9'" in by_gate and "GEMINI_API_KEY" not in by_gate
    assert KEY not in by_seed + by_gate and KEY not in done.stdout + done.stderr
    assert not [p for p in workspace.rglob("*") if p.is_file() and p.name != ".env" and KEY.encode() in p.read_bytes()]


def test_the_key_and_settings_come_from_dotenv_and_the_environment_wins(workspace, env, gemini):
    del env["GEMINI_API_KEY"]
    (workspace / ".env").write_text(f"GEMINI_API_KEY={KEY}\nGEMINI_MODEL=gemini-from-dotenv\n")
    gemini.reply(api.answer([("a.py", "a = 1\n")]))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0, done.stderr
    assert gemini.requests[0]["headers"]["x-goog-api-key"] == KEY
    assert gemini.models_asked() == ["gemini-3.5-flash"]  # from the environment, not .env
    leaks = [p for p in workspace.rglob("*") if p.is_file() and p.name != ".env" and KEY.encode() in p.read_bytes()]
    assert leaks == []


def test_an_edit_to_goal_md_reaches_the_next_prompt(workspace, env, gemini):
    def steer(request):
        (workspace / "goal.md").write_text("Grow a haiku generator instead.\n")

    gemini.reply(api.answer([("a.py", "a = 1\n")]), hook=steer)
    gemini.reply(api.answer([("b.py", "b = 1\n")]))
    done = run_fallback(workspace, env, "--iterations", "2")
    assert done.returncode == 0, done.stderr
    prompts = gemini.prompts()
    assert "haiku" not in prompts[0] and "Grow a haiku generator instead." in prompts[1]
    assert (workspace / "goal.md").read_text() == "Grow a haiku generator instead.\n"


def run_in_terminal(root, env, *args):
    """Run fallback.py with a pseudo-terminal as its console; everything it drew."""
    import pty
    import select
    main, secondary = pty.openpty()
    child = subprocess.Popen([sys.executable, "fallback.py", "--delay", "0", *args], cwd=root, env=env,
                             stdin=secondary, stdout=secondary, stderr=secondary)
    os.close(secondary)
    screen, deadline = b"", time.monotonic() + 60
    while time.monotonic() < deadline:
        if select.select([main], [], [], 0.2)[0]:
            try:
                screen += os.read(main, 65536)
            except OSError:  # the terminal closed: the supervisor exited
                break
        elif child.poll() is not None:
            break
    os.close(main)
    assert child.wait(timeout=10) == 0
    return screen.decode("utf-8", "replace")


def test_a_terminal_shows_what_is_happening_and_colours_outcomes(workspace, env, gemini):
    env.pop("NO_COLOR", None)
    env["TERM"] = "xterm"
    gemini.reply(api.answer([("a.py", "a = 1\n")]), delay=1.5)
    screen = run_in_terminal(workspace, env, "--iterations", "1")
    assert "seed.py: asking gemini-3.5-flash (prompt ~" in screen  # the live status line
    assert "\x1b[32m" in screen and "#1 landed" in screen  # green for a landing
    env["NO_COLOR"] = "1"
    gemini.reply(api.answer([("b.py", "b = 1\n")]))
    assert "\x1b[32m" not in run_in_terminal(workspace, env, "--iterations", "1")


def test_backups_can_be_listed_restored_and_reset_without_losing_anything(workspace, env, gemini):
    gemini.reply(api.answer([("a.py", "a = 1\n")])).reply(api.answer([("b.py", "b = 1\n")]))
    assert run_fallback(workspace, env, "--iterations", "2").returncode == 0
    listing = run_fallback(workspace, {k: v for k, v in env.items() if k != "GEMINI_API_KEY"}, "--list-backups")
    assert listing.returncode == 0
    rows = listing.stdout.splitlines()[1:]
    assert [row.split()[0] for row in rows] == ["0001", "0002", "0003"] and "genesis" in rows[0]
    assert rows[1].endswith("yes") and "landed" in rows[2] and rows[2].endswith("not yet  <- the codebase now")
    reset = run_fallback(workspace, env, "--reset")
    assert reset.returncode == 0 and "restored snapshot 0001" in reset.stdout
    assert not (workspace / "a.py").exists() and not (workspace / "b.py").exists()
    assert "The codebase now is snapshot 0001." in (workspace / "report.html").read_text()  # the page says so too
    kept = re.search(r"kept as snapshot (\d{4})", reset.stdout).group(1)
    assert run_fallback(workspace, env, "--restore", kept).returncode == 0
    assert (workspace / "a.py").read_text() == "a = 1\n" and (workspace / "b.py").read_text() == "b = 1\n"
    missing = run_fallback(workspace, env, "--restore", "9999")
    assert missing.returncode == 78 and "--list-backups" in missing.stderr


def test_usage_is_kept_per_day_and_model_with_the_waste_and_its_reasons(workspace, env, gemini):
    gemini.reply(api.per_minute("0.1s")).reply(api.answer([("a.py", "a = 1\n")]))
    gemini.reply(api.answer([("seed.py", "import os\n# ... existing code ...\n")]))
    assert run_fallback(workspace, env, "--iterations", "2").returncode == 0
    use = requests_booked(workspace / "backups")["gemini-3.5-flash"]
    assert use["requests"] == 3 and use["prompt"] == 2400 and use["output"] == 600 and use["thinking"] == 300
    assert use["kinds"] == {"429 per minute": 1, "answer": 1, "unusable answer": 1}
    assert use["wasted"] == {"429 per minute": 1, "unusable answer": 1}
    assert "no file to write: the answer held 3 task(s) and 1 file(s); dropped: seed.py: lazy: '# ... existing code " \
           "...' stands in for code it would drop" in (workspace / "iteration_log.md").read_text()


def test_requests_that_never_reached_the_server_are_not_shown_against_the_quota(workspace, env):
    closed = socket.create_server(("127.0.0.1", 0))
    env["GEMINI_API_BASE"] = f"http://127.0.0.1:{closed.getsockname()[1]}"
    closed.close()
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    status = run_fallback(workspace, env, "--status").stdout
    assert re.search(r"gemini-3.5-flash +0 request\(s\), 0 wasted, .*\(and 3 that never reached it\)", status), status
    run_fallback(workspace, env, "--report")
    assert "gemini-3.5-flash</code>: 0 request(s) (and 3 that never reached it), quota" in \
        (workspace / "report.html").read_text()


def test_status_shows_iterations_tasks_models_and_backups_without_a_request(workspace, env, gemini):
    gemini.reply(api.answer([("a.py", "a = 1\n")])).reply(api.per_day())
    assert run_fallback(workspace, env, "--iterations", "2").returncode == 0
    (workspace / "pending_tasks.md").write_text("- [ ] make it faster\n- [x] done already\n")
    asked = len(gemini.requests)
    status = run_fallback(workspace, env, "--status")
    assert status.returncode == 0 and len(gemini.requests) == asked
    out = status.stdout
    assert "keeper: not running" in out and "iterations: 2 recorded" in out
    assert "Iteration 2 — " in out and "— waiting until" in out
    assert "pending tasks: 1 open" in out and "  - make it faster" in out
    assert re.search(r"gemini-3\.5-flash +2 request\(s\), 1 wasted, +1,650 tokens +spent until \w{3} \d\d:00 local", out)
    assert re.search(r"backups: 2 snapshot\(s\), [\d.]+ MB; .*; the newest a run worked from: 0001", out)


def test_models_lists_what_the_key_can_call_and_marks_the_chosen_ones(workspace, env, gemini):
    listed = run_fallback(workspace, env, "--models")
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line for line in listed.stdout.splitlines()[1:]}
    assert set(rows) == {"gemini-3.5-flash", "gemini-2.5-flash-lite"}  # the embedding model cannot generate
    assert rows["gemini-3.5-flash"].endswith("yes") and "1,048,576" in rows["gemini-3.5-flash"]
    assert gemini.requests[0]["headers"]["x-goog-api-key"] == KEY and KEY not in gemini.requests[0]["path"]
    gemini.model_list = api.key_invalid(KEY)
    rejected = run_fallback(workspace, env, "--models")
    assert rejected.returncode == 78 and "API key not valid" in rejected.stderr and KEY not in rejected.stderr


@pytest.fixture
def running(workspace, env, gemini):
    """A supervisor whose seed is waiting on a slow answer; stopped at the end whatever happens."""
    gemini.reply(api.answer([("slow.py", "x = 1\n")]), delay=30)
    supervisor = subprocess.Popen([sys.executable, "fallback.py", "--delay", "0"], cwd=workspace, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: gemini.requests)
    yield supervisor
    if supervisor.poll() is None:
        supervisor.kill()
        supervisor.communicate()


@pytest.mark.parametrize("stop, said", [(signal.SIGINT, "Ctrl+C"), (signal.SIGTERM, "SIGTERM")])
def test_ctrl_c_stops_within_seconds_and_frees_everything(running, workspace, env, gemini, stop, said):
    seed_processes = [pid for pid in processes_in(workspace) if pid != running.pid]
    assert seed_processes
    running.send_signal(stop)
    out, err = running.communicate(timeout=10)
    assert running.returncode == 130, err
    assert "interrupted" in out and "0 iteration(s)" in out
    assert not [pid for pid in seed_processes if alive(pid)]
    assert not (workspace / "slow.py").exists()
    assert outcomes(workspace) == [f"stopped: interrupted ({said})"]
    assert "gemini-3.5-flash, 1 request(s)" in (workspace / "iteration_log.md").read_text()  # the one in flight
    assert requests_booked(workspace / "backups")["gemini-3.5-flash"]["requests"] == 1
    gemini.reply(api.answer([("after.py", "x = 1\n")]))
    again = run_fallback(workspace, env, "--iterations", "1")  # the lock is free, and the run resumes
    assert again.returncode == 0, again.stderr
    assert (workspace / "after.py").exists()


def test_a_second_supervisor_on_the_same_workspace_is_refused(running, workspace, env):
    started = time.monotonic()
    second = fallback_process(workspace, env, "--iterations", "1", timeout=20)  # a second keeper: a process
    assert second.returncode == 1 and "already running" in second.stderr
    assert f"pid {running.pid}" in second.stderr
    assert time.monotonic() - started < 5
    restore = fallback_process(workspace, env, "--reset", timeout=20)
    assert restore.returncode == 1 and "already running" in restore.stderr
    running.send_signal(signal.SIGINT)
    running.communicate(timeout=10)


# --- faults: the same failure again, limits, a killed supervisor, a full disk, dry spells --------------------
def test_the_same_failure_again_counts_up_in_one_task(workspace, env, gemini):
    for _ in range(2):
        gemini.reply(api.answer([("seed.py", CRASHES_AT_START)]))
    done = run_fallback(workspace, env, "--iterations", "4")
    assert done.returncode == 0, done.stderr
    assert [o.split(":")[0] for o in outcomes(workspace)] == ["landed", "rolled back", "landed", "rolled back"]
    tasks = (workspace / "pending_tasks.md").read_text()
    assert len(re.findall(r"^- \[ \] ", tasks, re.M)) == 1
    assert re.search(r"- \[ \] Iteration 4 was rolled back: seed\.py crashed \(exit 1\)\. Find and fix the cause\. "
                     r"\[failure \w{8}: 2 times since [\d-]+ [\d:]+ UTC, first after snapshot 0002\] This keeps "
                     r"happening: fix it before anything else\.", tasks)


def test_a_failure_task_a_person_edited_does_not_trip_the_supervisor(workspace, env, gemini):
    gemini.reply(api.answer([("seed.py", CRASHES_AT_START)]))
    assert run_fallback(workspace, env, "--iterations", "2").returncode == 0
    tasks = workspace / "pending_tasks.md"
    tasks.write_text(tasks.read_text().replace(": 1 time since", ": once, since"))  # the count, edited by hand
    gemini.reply(api.answer([("seed.py", CRASHES_AT_START)]))
    done = run_fallback(workspace, env, "--iterations", "2")
    assert done.returncode == 0, done.stderr
    assert outcomes(workspace)[-1] == "rolled back: seed.py crashed (exit 1)"
    assert len(re.findall(r"^- \[ \] Iteration \d+ was rolled back", tasks.read_text(), re.M)) == 2


def test_failure_tasks_are_bounded_and_a_persons_tasks_are_kept(workspace, env, gemini):
    old = "".join(f"- [ ] old failure {n} [failure {n:08d}: 1 time since then, first after snapshot 0001]\n"
                  f"      detail {n}\n" for n in range(12))
    (workspace / "pending_tasks.md").write_text(f"# Pending tasks\n- [ ] mine, first\n{old}- [ ] mine, last\n")
    (workspace / "seed.py").write_text(DOES_NOTHING)
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    tasks = (workspace / "pending_tasks.md").read_text()
    assert "- [ ] mine, first" in tasks and "- [ ] mine, last" in tasks
    assert len(re.findall(r"\[failure \w+:", tasks)) == 10
    assert "old failure 2 " not in tasks and "detail 2\n" not in tasks and "old failure 3 " in tasks
    assert "a stall" in tasks


@pytest.mark.parametrize("hog, limit, says", [
    ("    bytearray(1 << 31)", {"SEED_MEMORY_MB": "300"}, "MemoryError"),
    ("    while True:\n        pass", {"SEED_CPU_SECONDS": "1"}, "killed by SIGXCPU"),
])
def test_a_seed_that_hogs_memory_or_cpu_is_stopped_by_its_limit(workspace, env, gemini, hog, limit, says):
    gemini.reply(api.answer([("seed.py", evolved_seed(hog))]))
    env.update(limit)
    started = time.monotonic()
    done = run_fallback(workspace, env, "--iterations", "2", "--timeout", "60")
    assert done.returncode == 0, done.stderr
    assert outcomes(workspace)[1].startswith("rolled back: seed.py")
    assert says in (workspace / "iteration_log.md").read_text() + outcomes(workspace)[1]
    assert time.monotonic() - started < 30
    assert (workspace / "seed.py").read_bytes() == (REPO / "seed.py").read_bytes()


@pytest.mark.parametrize("zygote", ["50", "0"])
def test_a_killed_supervisor_leaves_no_orphan_and_the_next_start_puts_things_right(workspace, env, gemini, tmp_path,
                                                                                   zygote):
    env = {**env, "SEED_ZYGOTE": zygote}
    forked = zygote != "0" and load_keeper("sandbox").isolation()[0]
    hold = tmp_path / "hold"
    hold.write_text("the seed waits while this file exists")
    (workspace / "seed.py").write_text(evolved_seed(  # the path written in: the run gets none of the test's variables
        "    pathlib.Path('partial.py').write_text('half = True\\n')\n    import os\n"
        f"    while os.path.exists({str(hold)!r}):\n        time.sleep(0.05)"))
    first = subprocess.Popen([sys.executable, "fallback.py"], cwd=workspace, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: (workspace / ".seed" / "work" / "partial.py").exists())
    finally:
        first.kill()  # kill -9: no chance to clean up
        first.wait()
    orphan = json.loads((workspace / "backups" / "running.json").read_text())["pid"]
    try:
        if forked:  # the preloaded process that forked the run ends it as the keeper's socket closes
            wait_for(lambda: not alive(orphan))
        else:  # launched: it runs on until the next start ends its group
            assert alive(orphan)
        done = run_fallback(workspace, env, "--iterations", "1", "--timeout", "3")
    finally:
        hold.unlink(missing_ok=True)  # whatever happened, the orphan's wait ends
    assert done.returncode == 0, done.stderr
    assert not alive(orphan) and (forked or f"ended process group {orphan}" in done.stdout)
    assert outcomes(workspace)[0] == "stopped: the keeper was killed during this iteration"
    assert not (workspace / "partial.py").exists()
    kept = json.loads((workspace / "backups" / "index.json").read_text())["snapshots"]
    assert any(e["kind"] == "interrupted" and "partial.py" in snapshot_files(workspace, e["id"]) for e in kept)


def test_an_interrupted_restore_is_finished_at_the_next_start(workspace, env, gemini):
    gemini.reply(api.answer([("a.py", "a = 1\n")]))
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    (workspace / "seed.py").unlink()  # a restore of snapshot 0001 killed half way
    (workspace / "backups" / "restoring.json").write_text('{"id": "0001"}')
    gemini.reply(api.answer([("b.py", "b = 1\n")]))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0, done.stderr
    assert "finished the restore of snapshot 0001" in done.stdout
    assert (workspace / "seed.py").read_bytes() == (REPO / "seed.py").read_bytes()
    assert not (workspace / "a.py").exists() and (workspace / "b.py").exists()
    assert not (workspace / "backups" / "restoring.json").exists()


def test_a_snapshot_cut_short_by_kill_9_leaves_nothing_that_gets_in_the_way(workspace, env, gemini):
    gemini.reply(api.answer([("a.py", "a = 1\n")]))
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    backups = workspace / "backups"
    (backups / "0003.json").write_text('{"": "0000"}')  # written, never indexed
    (backups / "objects" / "ff").mkdir()
    (backups / "objects" / "ff" / ".half.tmp").write_bytes(b"half an object")
    gemini.reply(api.answer([("b.py", "b = 1\n")]))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0, done.stderr
    ids = [e["id"] for e in json.loads((backups / "index.json").read_text())["snapshots"]]
    assert ids == ["0001", "0002", "0004"]  # the orphan's number is not reused
    assert outcomes(workspace)[-1] == "landed: 1 file(s) changed" and (workspace / "b.py").exists()


def test_a_file_size_limit_during_a_snapshot_waits_and_loses_nothing(workspace, env, gemini):
    (workspace / "big.py").write_text("x = 1\n" * 50_000)  # 300 KB: more than the limit below
    limited = ("import resource, signal, sys, runpy; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
               "resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000)); "
               "sys.argv = ['fallback.py', '--iterations', '1']; runpy.run_path('fallback.py', run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", limited], cwd=workspace, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert re.search(r"#1 waiting until .*: cannot write \(File too large\)", done.stdout) and gemini.requests == []
    assert (workspace / "big.py").stat().st_size == 300_000 and not list((workspace / "backups").glob("[0-9]*.json"))
    gemini.reply(api.answer([("a.py", "a = 1\n")]))
    again = run_fallback(workspace, env, "--iterations", "1")
    assert again.returncode == 0 and outcomes(workspace)[-1] == "landed: 1 file(s) changed"


def test_a_full_disk_that_stays_full_is_waited_out_longer_each_time_in_one_log_section(workspace, env, gemini):
    """Retried every minute, it was an iteration number and a log section each time: hundreds a night."""
    (workspace / "big.py").write_text("x = 1\n" * 50_000)  # 300 KB: more than the limit below
    env["SEED_FAULT_PAUSE"] = "0.3"
    limited = ("import resource, signal, sys, runpy; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
               "resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000)); "
               "sys.argv = ['fallback.py', '--iterations', '3']; runpy.run_path('fallback.py', run_name='__main__')")
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-c", limited], cwd=workspace, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - began > 0.3 + 0.6  # waited 0.3 s, then 0.6 s: twice as long (the third's is not waited)
    assert len(outcomes(workspace)) <= 1 and gemini.requests == []  # one section at most (here the record's own
    # write meets the limit too) for the wait that repeats, and one iteration number
    assert done.stdout.count("#1 waiting until") == 1 and "#2" not in done.stdout and "#3" not in done.stdout
    assert done.stdout.count("File too large: free some disk space") == 3, done.stdout


def stopped_by_ctrl_c_when(root, env, ready):
    """fallback.py run until `ready()`, then Ctrl+C: its stdout (it exited 130)."""
    keeper = subprocess.Popen([sys.executable, "fallback.py", "--delay", "0"], cwd=root, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(ready, 60)  # a keeper's start, the seed's run and the gate's, on a loaded machine (20 s ran out once)
        keeper.send_signal(signal.SIGINT)
        out, err = keeper.communicate(timeout=20)
    finally:
        keeper.kill()
    assert keeper.returncode == 130, err
    return out


@pytest.mark.parametrize("phase", ["gate", "wait"])
def test_ctrl_c_in_the_gate_or_in_a_wait_stops_cleanly(workspace, env, gemini, phase):
    if phase == "gate":
        gemini.reply(api.answer([("tests/test_slow.py", "import time\n\n\ndef test_slow():\n    time.sleep(60)\n")]))
        ready = lambda: any("pytest" in command_of(pid) for pid in processes_in(workspace))
    else:
        gemini.reply(api.per_day())
        ready = lambda: "waiting until" in (workspace / "iteration_log.md").read_text()
    stopped_by_ctrl_c_when(workspace, env, ready)
    assert not (workspace / "tests" / "test_slow.py").exists()
    wait_for(lambda: processes_in(workspace) == [], 5)  # a namespace's last processes go as the kernel tears it down


def test_a_dry_spell_is_reported_then_walked_back(workspace, env, gemini):
    gemini.reply(api.answer([("a.py", "a = 1\n")]))
    for _ in range(20):
        gemini.reply(api.text_answer("not JSON at all"))
    done = run_fallback(workspace, env, "--iterations", "21")
    assert done.returncode == 0, done.stderr
    log = (workspace / "iteration_log.md").read_text()
    assert "- Stalled: nothing has landed in the last 10 iterations\n" in log
    assert re.search(r"- Stalled: nothing has landed in the last 20 iterations; went back to "
                     r"snapshot 0001 \(this state is kept as 0002\)", log)
    assert not (workspace / "a.py").exists()
    assert re.search(r"Stalled: nothing has landed .* first after snapshot \d{4}\]", (workspace / "pending_tasks.md").read_text())


@pytest.mark.parametrize("files, says", [
    ([("broken_import.py", "raise RuntimeError('crashes at import')\n")], "crashes at import"),
    ([("seed.py", "import helper\n" + evolved_seed("    pathlib.Path('helper.py').unlink()")),
      ("helper.py", "VALUE = 1\n")], "No module named 'helper'"),
])
def test_code_that_breaks_at_import_is_rolled_back(workspace, env, gemini, files, says):
    gemini.reply(api.answer(files))
    done = run_fallback(workspace, env, "--iterations", "2")
    assert done.returncode == 0, done.stderr
    assert "rolled back: import check failed" in outcomes(workspace)
    assert says in (workspace / "pending_tasks.md").read_text()


def test_thousands_of_files_land_and_the_log_stays_short(workspace, env, gemini):
    gemini.reply(api.answer([(f"many/m{i}.py", f"N = {i}\n") for i in range(2000)]))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0, done.stderr
    assert outcomes(workspace) == ["landed: 2000 file(s) changed"]
    assert "and 1980 more" in (workspace / "iteration_log.md").read_text()
    assert [e["kind"] for e in json.loads((workspace / "backups" / "index.json").read_text())["snapshots"]] == \
        ["genesis", "landed"]


@pytest.mark.skipif(not os.environ.get("SEED_SOAK_TESTS"), reason="a soak (16 s): SEED_SOAK_TESTS=1 runs it, "
                    "as python bench/soak.py runs longer ones")
def test_a_short_seeded_soak_runs_clean():
    """The soak of bench/soak.py, short: every fault class may come up; every invariant must hold."""
    done = subprocess.run([sys.executable, str(REPO / "bench" / "soak.py"), "--steps", "12", "--seed", "2"],
                          capture_output=True, text=True, timeout=600)
    closing = done.stdout.strip().splitlines()[-1]
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.fullmatch(r"\d+ iterations, \d+ faults injected, 0 stuck, 0 lost, 0 escaped, 0 leaked, 0 broken, "
                        r"0 left running, worst recovery \d+ iterations", closing)


def test_snapshots_share_unchanged_files_and_retention_keeps_what_walk_back_needs(workspace, env, gemini):
    (workspace / "big.py").write_text("x = 1\n" * 10_000)
    (workspace / "lib").mkdir()
    (workspace / "lib" / "util.py").write_text("U = 1\n")
    for n in range(6):
        gemini.reply(api.answer([(f"m{n}.py", f"N = {n}\n")]))
    env.update(BACKUPS_KEEP="3", SEED_KEEP_LANDED_DAYS="0")  # today's landings are not all kept
    assert run_fallback(workspace, env, "--iterations", "6").returncode == 0
    backups = workspace / "backups"
    ids = [e["id"] for e in json.loads((backups / "index.json").read_text())["snapshots"]]
    assert ids == ["0001", "0004", "0005", "0006", "0007"]  # genesis, the last 3, the newest 3 known good
    assert not (backups / "0002.json").exists()
    objects = {p.parent.name + p.name for p in (backups / "objects").glob("*/*")}
    listed = {sha for i in ids for sha in [*snapshot_files(workspace, i).values(), *snapshot_folders(workspace, i).values()]}
    assert objects == listed  # each content and listing once; what only pruned snapshots had is gone
    assert sum(1 for p in (backups / "objects").glob("*/*") if p.stat().st_size == 60_000) == 1  # big.py, once
    assert len({snapshot_folders(workspace, i)["lib/"] for i in ids}) == 1  # an unchanged folder's listing, once
    assert run_fallback(workspace, env, "--reset").returncode == 0
    assert sorted(p.name for p in workspace.glob("*.py")) == ["big.py", "fallback.py", "seed.py"]
    assert (workspace / "lib" / "util.py").read_text() == "U = 1\n"


def test_retention_keeps_recent_landings_one_a_day_one_a_week_within_a_cap_and_what_a_person_kept(workspace, env,
                                                                                                   gemini):
    for n in range(11):  # each landing replaces data.txt: every snapshot holds 200 KB of its own
        gemini.reply(api.answer([("data.txt", f"{n:06d}\n" * 28_572)]))
    env.update(BACKUPS_KEEP="2", SEED_KEEP_LANDED_DAYS="1", SEED_KEEP_DAILY_DAYS="30", SEED_BACKUPS_MB="100")
    assert run_fallback(workspace, env, "--iterations", "9").returncode == 0
    index_file = workspace / "backups" / "index.json"
    index = json.loads(index_file.read_text())
    assert [e["id"] for e in index["snapshots"]] == [f"{n:04d}" for n in range(1, 11)]  # today's: all kept
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    day = lambda days, hour: (now - timedelta(days=days)).replace(hour=hour, minute=0, second=0)
    for entry, time_taken in zip(index["snapshots"], [day(400, 9), day(300, 9), day(300, 10), day(200, 9), day(200, 10),
                                                      day(20, 9), day(20, 10), day(3, 9), now - timedelta(hours=12), now]):
        entry["time"] = f"{time_taken:%Y-%m-%d %H:%M:%S} UTC"
    index_file.write_text(json.dumps(index))
    assert run_fallback(workspace, env, "--keep", "0004").returncode == 0
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    kept = [e["id"] for e in json.loads(index_file.read_text())["snapshots"]]
    # genesis; one a week (0003, 0005); 0004 kept by hand; one a day (0007, 0008); the newest known good and the
    # last two (0009 to 0011). Gone: 0002 and 0006, older ones of their week and day.
    assert kept == ["0001", "0003", "0004", "0005", "0007", "0008", "0009", "0010", "0011"]
    assert "kept: the last 2, every landing of the last 1 day(s), one a day for 30 days, one a week before, within " \
           "100 MB; 1 kept by hand" in run_fallback(workspace, env, "--status").stdout
    env["SEED_BACKUPS_MB"] = "1"  # over the cap: those kept by age go, the oldest first; never the ones always kept
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    assert [e["id"] for e in json.loads(index_file.read_text())["snapshots"]] == \
        ["0001", "0004", "0009", "0010", "0011", "0012"]
    assert run_fallback(workspace, env, "--restore", "0004").returncode == 0
    assert (workspace / "data.txt").read_text().startswith("000002\n")


def test_a_snapshot_taken_by_an_older_fallback_is_still_restored(workspace, env, gemini):
    """Older versions kept a snapshot as one gzipped list of every file (NNNN.json.gz): it still restores."""
    (workspace / "a.py").write_text("a = 1\n")
    old = {}
    for rel in ("a.py", "seed.py"):
        data = (workspace / rel).read_bytes()
        old[rel] = hashlib.sha256(data).hexdigest()
        (workspace / "backups" / "objects" / old[rel][:2]).mkdir(parents=True, exist_ok=True)
        (workspace / "backups" / "objects" / old[rel][:2] / old[rel][2:]).write_bytes(data)
    (workspace / "backups" / "0001.json.gz").write_bytes(gzip.compress(json.dumps(old).encode()))
    (workspace / "backups" / "index.json").write_text(json.dumps({"iteration": 1, "snapshots": [
        {"id": "0001", "time": "2026-11-01 10:00:00 UTC", "iteration": 0, "kind": "genesis", "good": True,
         "digest": "0" * 64, "count": 2}]}))
    (workspace / "a.py").write_text("a = 2\n")
    (workspace / "b.py").write_text("b = 1\n")
    done = run_fallback(workspace, env, "--restore", "0001")
    assert done.returncode == 0, done.stderr
    assert (workspace / "a.py").read_text() == "a = 1\n" and not (workspace / "b.py").exists()
    assert snapshot_files(workspace, "0001") == old and not (workspace / "backups" / "0001.json.gz").exists()


# --- a workspace that has lived: open tasks, failures, odd module names, faults from outside the code ---------
def lived_in(root):
    """Tasks a person wrote that no answer ticks, an open failure task, a log of thousands of sections, and the
    seed's contract tests in the gate, as a workspace has after weeks."""
    (root / "supervisor" / "tests" / "test_seed.py").write_bytes((REPO / "supervisor/tests/test_seed.py").read_bytes())
    (root / "pending_tasks.md").write_text(
        "# Pending tasks\n\n- [ ] keep the notes tidy\n- [ ] add a --version flag\n"
        + "".join(f"- [ ] a person's idea number {n}\n" for n in range(25))
        + "- [ ] Iteration 2999 was rolled back: tests failed. Find and fix the cause. [failure 0badf00d: 3 times "
          "since 2026-11-01 10:00:00 UTC, first after snapshot 0001]\n      E   AssertionError: assert 1 == 2\n")
    (root / "iteration_log.md").write_text("# Iteration log\n" + "".join(
        f"\n## Iteration {n} — 2026-11-01 10:00:00 UTC — {'landed: 1 file(s) changed' if n % 3 else 'no change'}\n\n"
        f"- Tasks:\n  1. step {n}\n- Files: m{n}.py +1 −0\n" for n in range(1, 3001)))


def good_change(name):
    return [(f"{name}.py", f"def value():\n    return '{name}'\n"),
            (f"tests/test_{name}.py", f"from {name} import value\n\n\ndef test_value():\n    assert value() == '{name}'\n")]


def test_in_a_lived_in_workspace_good_answers_land_after_a_failure_and_ticks_land_with_the_change(workspace, env,
                                                                                                     gemini):
    lived_in(workspace)
    gemini.reply(api.answer(good_change("first") + [("tests/test_fails.py", "def test_fails():\n    assert 1 == 2\n")],
                            done=[2]))  # says it added the flag, but its change is rolled back
    gemini.reply(api.answer(good_change("second")))  # ticks nothing
    gemini.reply(api.answer(good_change("third"), done=[2]))
    done = run_fallback(workspace, env, "--iterations", "3", timeout=300)
    assert done.returncode == 0, done.stderr
    assert outcomes(workspace)[-3:] == ["rolled back: tests failed", "landed: 2 file(s) changed",
                                        "landed: 2 file(s) changed"]
    assert "## Iteration 3003 — " in (workspace / "iteration_log.md").read_text()
    tasks = (workspace / "pending_tasks.md").read_text()
    assert "- [ ] keep the notes tidy" in tasks and "- [x] add a --version flag" in tasks
    assert tasks.count("- [x]") == 1 and "- [ ] a person's idea number 24" in tasks
    assert "- [ ] Iteration 3001 was rolled back: tests failed" in tasks
    assert (workspace / "second.py").exists() and (workspace / "third.py").exists()


SHADOWING = [("json.py", '"""the model\'s own json"""\nVALUE = 1\n'), ("tempfile.py", "VALUE = 1\n"),
             ("email/__init__.py", "VALUE = 1\n")]


def test_modules_named_like_the_standard_library_in_the_folder_hijack_nothing(workspace, env, gemini):
    """The person's own (or landed before such names were refused: test_startup): the keeper, the seed and the gate's
    checks each still use the real json, tempfile and email."""
    for rel, text in SHADOWING:
        (workspace / rel).parent.mkdir(exist_ok=True)
        (workspace / rel).write_text(text)
    gemini.reply(api.answer(good_change("notes")))
    gemini.reply(api.answer(good_change("later")))
    done = run_fallback(workspace, env, "--iterations", "2")
    assert done.returncode == 0, done.stderr
    assert outcomes(workspace) == ["landed: 2 file(s) changed", "landed: 2 file(s) changed"]
    assert (workspace / "json.py").exists() and (workspace / "later.py").exists()
    status = run_fallback(workspace, env, "--status")
    assert status.returncode == 0 and "iterations: 2 recorded" in status.stdout, status.stderr


def test_a_model_that_refuses_a_feature_is_asked_without_it_and_never_walks_back_landed_work(workspace, env, gemini):
    env["GEMINI_MODEL"] = "gemini-3.5-flash,gemma-refuses-json"
    gemini.reply(api.answer([("a.py", "a = 1\n")]), model="gemini-3.5-flash")
    gemini.reply(api.per_day(), model="gemini-3.5-flash")
    gemini.reply(api.error(400, "INVALID_ARGUMENT", "JSON mode is not enabled for models/gemma-refuses-json"),
                 model="gemma-refuses-json")
    fenced = '```json\n' + json.dumps({"tasks": ["b"], "files": [{"path": "b.py", "content": "b = 1\n"}]}) + '\n```'
    gemini.reply(api.text_answer(" Here it is:\n" + fenced), model="gemma-refuses-json")
    gemini.reply(api.text_answer(fenced.replace("b.py", "c.py")), model="gemma-refuses-json")
    done = run_fallback(workspace, env, "--iterations", "3")
    assert done.returncode == 0, done.stderr
    assert outcomes(workspace) == ["landed: 1 file(s) changed"] * 3
    assert all((workspace / name).exists() for name in ("a.py", "b.py", "c.py"))
    assert "[failure" not in (workspace / "pending_tasks.md").read_text()
    asked = [(r["model"], "responseMimeType" in r["body"].get("generationConfig", {})) for r in gemini.requests]
    assert asked == [("gemini-3.5-flash", True), ("gemini-3.5-flash", True), ("gemma-refuses-json", True),
                     ("gemma-refuses-json", False), ("gemma-refuses-json", False)]  # learned: never asked so again


@pytest.mark.parametrize("restarts", [False, True], ids=["one run", "restarted between iterations"])
def test_a_fault_outside_the_code_waits_and_never_walks_back_landed_work(workspace, env, gemini, restarts):
    env["SEED_FAULT_PAUSE"] = "1"
    gemini.reply(api.answer([("a.py", "a = 1\n")]))
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    env["SEED_MEMORY_MB"] = "1"  # the limits change: too little memory for any Python to start, whatever its size
    runs = [run_fallback(workspace, env, "--iterations", "1") for _ in range(3)] if restarts else \
        [run_fallback(workspace, env, "--iterations", "3")]
    assert all(run.returncode == 0 for run in runs), runs[-1].stderr
    assert [o.split(" until")[0].split(":")[0] for o in outcomes(workspace)] == ["landed", "rolled back", "waiting",
                                                                                "waiting"]
    assert re.search(r"seed.py crashed \(exit \d+\) at the last known-good state too$", outcomes(workspace)[2])
    assert (workspace / "a.py").exists()  # the walk-back was undone, and not walked again
    assert "[failure" not in (workspace / "pending_tasks.md").read_text()  # nothing for the model to fix
    assert restarts or re.search(r"waiting until \d\d:\d\d local time .*: .*; the same happens at the last known-good "
                                 r"state, and the limits a run gets \(SEED_MEMORY_MB\) changed since it ran well: "
                                 r"the cause is outside the code", runs[0].stdout)  # said as the loop waits
    del env["SEED_MEMORY_MB"]
    gemini.reply(api.answer([("b.py", "b = 1\n")]))
    again = run_fallback(workspace, env, "--iterations", "1")
    assert again.returncode == 0 and outcomes(workspace)[-1] == "landed: 1 file(s) changed"
    assert (workspace / "a.py").exists() and (workspace / "b.py").exists()


def test_a_restore_by_hand_after_a_walk_back_is_never_undone_by_the_loop(workspace, env, gemini):
    env["SEED_FAULT_PAUSE"] = "1"
    gemini.reply(api.answer([("a.py", "a = 1\n")]))
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    env["SEED_MEMORY_MB"] = "1"
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0  # walked back: a.py is gone
    assert outcomes(workspace)[-1].startswith("rolled back") and not (workspace / "a.py").exists()
    assert run_fallback(workspace, env, "--reset").returncode == 0  # the person chooses genesis
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    assert outcomes(workspace)[-1].startswith("waiting") and not (workspace / "a.py").exists()


@pytest.mark.parametrize("junk", ['{"suspect": {"home": 5, "kind": [], "mark": null}, "world": 3}', "[1, 2", "\0\xff"])
def test_the_keepers_own_memory_damaged_is_forgotten_and_the_loop_goes_on(workspace, env, gemini, junk):
    (workspace / "backups").mkdir(exist_ok=True)
    for name in ["suspicion.json", "quota.json", "usage.json", "models.json"]:
        (workspace / "backups" / name).write_text(junk)
    gemini.reply(api.answer([("a.py", "a = 1\n")]))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0 and "Traceback" not in done.stdout + done.stderr, done.stderr
    assert outcomes(workspace) == ["landed: 1 file(s) changed"] and len(gemini.requests) == 1


@pytest.mark.parametrize("steer, says", [
    (lambda root: (root / "goal.md").write_text("- a line of the spec about tagging, search and export\n" * 800),
     r"stopped: goal.md and the open tasks \(~[\d,]+ tokens\) leave no room for code in any model's prompt"),
    (lambda root: (root / "pending_tasks.md").write_text("# Pending tasks\n\n- [ ] " + "do it all " * 100_000 + "\n"),
     r"fallback: goal.md and the open tasks come to ~[\d,]+ tokens, more than the largest prompt"),
], ids=["a goal of 43 KB", "a task of 1 MB"])
def test_a_goal_or_task_too_big_for_the_model_is_said_and_costs_nothing(workspace, env, gemini, steer, says):
    env.update(GEMINI_MODEL="gemma-4-26b-a4b-it", GEMINI_LIMITS="gemma-4-26b-a4b-it=30/16000/1500")
    gemini.reply(api.answer([("a.py", "a = 1\n")]))
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    steer(workspace)
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 78 and len(gemini.requests) == 1  # nothing sent that could not succeed
    assert re.search(says, done.stdout + done.stderr)
    assert outcomes(workspace) == ["landed: 1 file(s) changed"]  # no iteration spent
    assert (workspace / "a.py").exists() and "[failure" not in (workspace / "pending_tasks.md").read_text()


def test_a_persons_edit_during_a_wait_for_the_world_is_never_walked_back(workspace, env, gemini):
    env["SEED_FAULT_PAUSE"] = "3"
    gemini.reply(api.answer([("a.py", "a = 1\n")])).reply(api.answer([("a.py", "a = 1\n")]))  # the same again:
    assert run_fallback(workspace, env, "--iterations", "2").returncode == 0  # a.py lands, then is proven good
    env["SEED_MEMORY_MB"] = "1"
    keeper = subprocess.Popen([sys.executable, "fallback.py", "--delay", "0", "--iterations", "2"], cwd=workspace,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: len(outcomes(workspace)) == 3, seconds=60)  # the first wait for the world has begun
        (workspace / "c.py").write_text("c = 'a person fixing things'\n")
        out, err = keeper.communicate(timeout=120)
    finally:  # never left running to the next test
        keeper.kill()
        keeper.wait()
    assert keeper.returncode == 0 and "Traceback" not in err, err
    assert [o.split(" until")[0] for o in outcomes(workspace)[2:]] == ["waiting", "waiting"]
    assert (workspace / "c.py").exists() and (workspace / "a.py").exists()


def test_a_task_whose_detail_the_seed_shows_in_part_does_not_keep_a_small_model_from_being_asked(workspace, env,
                                                                                                  gemini):
    env.update(GEMINI_MODEL="gemma-4-26b-a4b-it", GEMINI_LIMITS="gemma-4-26b-a4b-it=30/16000/1500")
    (workspace / "pending_tasks.md").write_text("# Pending tasks\n\n- [ ] tidy\n" + "  a long detail line\n" * 2_000)
    gemini.reply(api.answer([("a.py", "a = 1\n")]))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0 and outcomes(workspace) == ["landed: 1 file(s) changed"], done.stdout


def test_a_model_that_keeps_the_seed_past_its_time_walks_nothing_back(workspace, env, gemini):
    env["SEED_FAULT_PAUSE"] = "1"
    gemini.reply(api.answer([("a.py", "a = 1\n")]))
    gemini.reply(api.answer([("b.py", "b = 1\n")]), delay=5)  # longer than the run may take
    done = run_fallback(workspace, env, "--iterations", "2", "--timeout", "3")
    assert done.returncode == 0, done.stderr
    assert outcomes(workspace)[0] == "landed: 1 file(s) changed"  # a state no run has proven yet
    assert outcomes(workspace)[1].endswith("seed.py timed out and was killed with its children while the model "
                                           "still had its request")
    assert (workspace / "a.py").exists() and "[failure" not in (workspace / "pending_tasks.md").read_text()


def test_a_failing_tests_output_names_the_files_as_the_model_knows_them(workspace, env, gemini):
    """The gate's output named /.../.seed/judged/tests/test_x.py: a 1.5B model then wrote its files under
    .seed/judged/ (refused, three answers spent)."""
    gemini.reply(api.answer([("tests/test_x.py", "from nowhere import nothing\n\n\ndef test_x():\n    assert nothing\n")]))
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    assert outcomes(workspace) == ["rolled back: tests failed"]
    for told in (workspace / "iteration_log.md", workspace / "pending_tasks.md"):
        assert "tests/test_x.py" in told.read_text() and ".seed/judged" not in told.read_text(), told.read_text()


FILL = ("    import os\n    if os.path.exists('a0.py'):  # from the second run on: 1 MB files until the disk is full\n"
        "        os.makedirs('junk', exist_ok=True)\n        try:\n            for n in range(10_000):\n"
        "                with open(f'junk/{n}', 'wb') as out:\n                    out.write(bytes(1 << 20))\n"
        "        except OSError as error:\n            print('filled:', error, flush=True)\n")


@pytest.mark.skipif(not shutil.which("unshare") or subprocess.run(["unshare", "--user", "--map-root-user", "--mount",
                                                                   "true"], capture_output=True).returncode != 0,
                    reason="no user and mount namespaces here")
def test_a_run_that_fills_the_disk_has_its_folders_emptied_and_the_loop_goes_on(workspace, env, gemini, tmp_path):
    """The red team's: a seed filled the disk from its working copy; the keeper crashed with a traceback, then every
    start said to free space that its own folders held. Here the folder is on a 48 MB disk of its own."""
    seed = (workspace / "seed.py").read_text()
    (workspace / "seed.py").write_text(seed.replace("def main():\n", "def main():\n" + FILL, 1))
    for n in range(4):
        gemini.reply(api.answer([(f"a{n}.py", f"a = {n}\n")]))
    env["SEED_FAULT_PAUSE"] = "0.2"
    small = tmp_path / "small"
    small.mkdir()
    script = (f"mount -t tmpfs -o size=48m tmpfs {small} && cp -a {workspace} {small}/ws && cd {small}/ws && "
              "\"$@\" fallback.py --delay 0 --iterations 3; code=$?; du -sm .seed; exit $code")
    done = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script, "sh",
                           sys.executable], env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout[-3000:] + done.stderr[-3000:]
    assert "the working copy and the runs' temporary folder were emptied" in done.stdout, done.stdout[-3000:]
