"""pending_tasks.md is the person's own file: `python fallback.py` (against the fake Gemini server) ticks a task,
adds, counts up and takes back a failure task in it, and every other byte stays as the person wrote it."""
import re

import fake_gemini as api
from test_fallback import outcomes, run_fallback

# CRLF, bytes that are not UTF-8 (\xe9, \x85), a form feed and a NEL (\xc2\x85) in a person's note, no final line break
PERSONS = (b"# Pending tasks\r\n\r\n- [ ] keep the notes tidy\r\n  see page\x0c2 of the manual,\x85 then\xc2\x85tidy\r\n"
           b"- [ ] add a caf\xe9 mode\r\n- [ ] a person's last idea")
DOES_NOT_COMPILE = [("calc.py", "def add(a, b:\n    return a + b\n")]


def test_a_tick_comes_with_a_landing_and_changes_only_the_ticked_lines_box(workspace, env, gemini):
    tasks = workspace / "pending_tasks.md"
    tasks.write_bytes(PERSONS)
    gemini.reply(api.answer(done=[2, 3]))  # the seed lists: 1 keep the notes tidy, 2 add a caf? mode, 3 the last
    gemini.reply(api.answer([("cafe.py", "MODE = 'café'\n")], done=[2, 3]))
    done = run_fallback(workspace, env, "--iterations", "2")
    assert done.returncode == 0, done.stderr
    assert outcomes(workspace) == ["no change: no file to write: the answer held 3 task(s) and 0 file(s)",
                                   "landed: 1 file(s) changed"]  # nothing is finished without a landing
    assert tasks.read_bytes() == PERSONS.replace(b"- [ ] add a caf", b"- [x] add a caf").replace(
        b"- [ ] a person's last", b"- [x] a person's last")


def test_a_failure_task_is_added_taken_back_and_counted_up_around_every_byte_of_the_persons(workspace, env, gemini):
    tasks = workspace / "pending_tasks.md"
    gemini.reply(api.answer([("a.py", "a = 1\n")]))
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    tasks.write_bytes(PERSONS)
    env.update(SEED_FAULT_PAUSE="1", SEED_MEMORY_MB="1")  # too little memory for the seed to start
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    assert outcomes(workspace)[-1].startswith("rolled back: ")
    added = tasks.read_bytes().removeprefix(PERSONS)
    assert added.startswith(b"\r\n- [ ] Iteration 2 was rolled back: ") and b"[failure " in added
    assert added.count(b"\n") == added.count(b"\r\n") > 1 and not added.endswith(b"\n")  # its detail lines too
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    assert outcomes(workspace)[-1].startswith("waiting until ")  # not the code's fault: the task is taken back
    assert tasks.read_bytes() == PERSONS
    del env["SEED_MEMORY_MB"]
    gemini.reply(api.answer(DOES_NOT_COMPILE)).reply(api.answer(DOES_NOT_COMPILE))
    assert run_fallback(workspace, env, "--iterations", "2").returncode == 0
    assert [o.split(":")[0] for o in outcomes(workspace)[-2:]] == ["no change"] * 2
    assert re.fullmatch(re.escape(PERSONS) + rb"\r\n- \[ \] The last answer was not applied: compile error[^\r\n]* \[failure \w{8}: "
                        rb"2 times since [^\r\n]*\] This keeps happening: fix it before anything else\.",
                        tasks.read_bytes())
