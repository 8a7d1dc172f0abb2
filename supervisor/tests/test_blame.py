"""Blame is proven, never assumed: `python fallback.py` against the fake Gemini, where the world changes (a package of
the Python the keeper runs on breaks) and where it does not (a test that depends on the moment, an answer that crashes
the seed while it is applied).

The world's fault needs a control (the known-good state failing the same way now, without the new answer) and a cause
observed outside the code; each attack here is a failure that used to be taken for the world's on the first alone, and
left the loop waiting forever with no word to the model.
"""
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

import fake_gemini as api
from test_every_request import linger_for_one_second
from test_fallback import outcomes, run_fallback


def own_python(tmp_path):
    """A virtual environment of the test's own, holding a copy of this Python's packages: its site-packages is the
    test's to change while the keeper runs on it (the machine's packages changing under a long run)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(sysconfig.get_paths(vars={"base": str(venv), "platbase": str(venv)})["purelib"])
    shutil.copytree(sysconfig.get_paths()["purelib"], site, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    return venv / "bin" / "python", site


def test_a_gate_that_fails_the_same_way_at_the_known_good_state_with_a_package_broken_waits_and_writes_no_task(
        workspace, env, gemini, tmp_path):
    python, site = own_python(tmp_path)
    env["SEED_FAULT_PAUSE"] = "1"

    def break_requests(request):  # while the seed waits: an upgrade breaks requests (its files and its version)
        (site / "requests" / "__init__.py").write_text("raise ImportError('requests is broken on this machine')")
        for info in site.glob("requests-*.dist-info"):
            info.rename(site / "requests-99.0.dist-info")
            text = (site / "requests-99.0.dist-info" / "METADATA").read_text()
            (site / "requests-99.0.dist-info" / "METADATA").write_text(text.replace("\nVersion: ", "\nVersion: 99.0\nX: "))

    (workspace / "net.py").write_text("import requests\n")  # a module of the person's codebase that needs requests
    gemini.reply(api.answer([("a.py", "a = 1\n")]), hook=break_requests)
    done = subprocess.run([str(python), "fallback.py", "--delay", "0", "--iterations", "1"], cwd=workspace, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert outcomes(workspace)[0].endswith("import check failed at the last known-good state too"), outcomes(workspace)
    assert "the installed packages changed since it ran well: the cause is outside the code" in done.stdout
    assert not (workspace / "a.py").exists() and "[failure" not in (workspace / "pending_tasks.md").read_text()


@pytest.mark.parametrize("says", ["", ", 'MemoryError: No space left on device'"], ids=["plainly", "claiming a cause"])
def test_a_test_that_depends_on_the_moment_is_the_codes_failure_a_task_and_never_a_wait(workspace, env, gemini, says):
    """It passed when it landed; now it fails at the known-good state too, and nothing outside the code changed. The
    attack on the cause: its message claims memory and the disk ran out; the keeper measures them itself (it waited
    for good, never telling the model, when it read the cause from the code's own output)."""
    until = time.time() + 3  # the first iteration lands its test in under a second; the rest is a loaded machine's
    clock = ("tests/test_clock.py", "import time\n\nfrom clock import DEADLINE\n\n\ndef test_before_the_deadline():\n"
             f"    assert time.time() < DEADLINE{says}\n")
    gemini.reply(api.answer([("clock.py", f"DEADLINE = {until}\n"), clock]))
    gemini.reply(api.answer([("clock.py", f"DEADLINE = {until}  # the deadline\n")]),
                 hook=lambda request: time.sleep(max(0.0, until - time.time())))
    gemini.reply(api.answer([("clock.py", f"DEADLINE = {until}  # the deadline, again\n")]))
    done = run_fallback(workspace, env, "--iterations", "3")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    seen = outcomes(workspace)
    assert seen[0] == "landed: 2 file(s) changed" and all(o.startswith("rolled back: tests failed") for o in seen[1:]), \
        seen  # the loop goes on: no wait
    tasks = (workspace / "pending_tasks.md").read_text()
    assert "nothing outside the code changed" in tasks and "test_before_the_deadline" in tasks, tasks


def test_an_answer_that_crashes_the_seed_as_it_is_applied_is_that_answers_failure(workspace, env, gemini):
    """Two of its paths conflict: a.py a file, and a folder a.py/ for a.py/b.py. The seed, known good, crashes while
    writing them: the model is told (a task), and the loop goes on."""
    gemini.reply(api.answer([("x.py", "x = 1\n")]))  # the seed's state becomes known good
    gemini.reply(api.answer([("a.py", "a = 1\n"), ("a.py/b.py", "b = 1\n")]))
    gemini.reply(api.answer([("c.py", "c = 1\n")]))
    done = run_fallback(workspace, env, "--iterations", "3")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    seen = outcomes(workspace)
    assert seen[0] == seen[2] == "landed: 1 file(s) changed" and seen[1].startswith("rolled back: "), seen
    assert "Iteration 2 was rolled back" in (workspace / "pending_tasks.md").read_text()
    assert (workspace / "x.py").exists() and (workspace / "c.py").exists() and not (workspace / "a.py").exists()


ASK_THEN_QUIT = (  # the seed sends its request, then ends by itself while the model still has it
    "    import threading\n    threading.Thread(target=ask, args=(build_prompt(open_tasks(), {}), 0), daemon=True)"
    ".start()\n    import time\n    time.sleep(2)\n    raise SystemExit('my own bug')\n")


def test_a_seed_that_ends_by_itself_while_the_model_answers_is_the_codes_failure(workspace, env, gemini):
    """"The model still had the request" is the world's only when the keeper ended the run (its --timeout): a seed
    whose own client gave up is the code's, a task (the person was told to raise --timeout, for good)."""
    env["SEED_FAULT_PAUSE"] = "1"
    seed = (workspace / "seed.py").read_text()
    (workspace / "seed.py").write_text(seed.replace("def main():\n", "def main():\n" + ASK_THEN_QUIT, 1))
    gemini.reply(api.answer([("a.py", "a = 1\n")]), delay=6)  # under way still when the keeper stops waiting for it
    linger_for_one_second(workspace)
    done = run_fallback(workspace, env, "--iterations", "1", timeout=200)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert outcomes(workspace)[0].startswith("rolled back: seed.py crashed"), outcomes(workspace)
    assert "[failure" in (workspace / "pending_tasks.md").read_text() and "--timeout" not in done.stdout
