"""The cascade gate, end to end through `python fallback.py`: the test files a change can affect run first, and
alone when that selection is sound; every test runs when it is not, when the seed changed, and at least every
SEED_FULL_GATE_EVERY landings; no change that breaks a test lands."""
import os
import re

import pytest

import fake_gemini as api
from conftest import load_keeper
from test_fallback import outcomes, run_fallback

CODEBASE = [("a.py", "def one():\n    return 1\n"),
            ("b.py", "from a import one\n\n\ndef two():\n    return one() + 1\n"),
            ("c.py", "def three():\n    return 3\n"),
            ("data.txt", "ok\n"),
            ("tests/test_a.py", "from a import one\n\n\ndef test_one():\n    assert one() == 1\n"),
            ("tests/test_b.py", "from b import two\n\n\ndef test_two():\n    assert two() == 2\n"),  # a, through b
            ("tests/test_c.py", "from c import three\n\n\ndef test_three():\n    assert three() == 3\n"),
            ("tests/test_dyn.py", "import importlib\n\n\ndef test_dyn():\n"  # imports what it names at run time
                                  "    assert importlib.import_module('c').three() == 3\n"),
            ("tests/test_data.py", "import pathlib\n\n\ndef test_data():\n"  # reads a file
                                   "    assert (pathlib.Path(__file__).parent.parent / 'data.txt').read_text() "
                                   "in ('ok\\n', 'OK\\n')\n")]


def lines_about_tests(root):
    return re.findall(r"^- Tests: (.*)$", (root / "iteration_log.md").read_text(), re.M)


def test_a_change_runs_the_tests_it_can_affect_and_every_test_when_it_must(workspace, env, gemini):
    gemini.reply(api.answer(CODEBASE))
    gemini.reply(api.answer([("a.py", "def one():\n    return 1  # the same\n")]))    # a: test_a, test_b; test_dyn
    gemini.reply(api.answer([("c.py", "def three():\n    return 3  # the same\n")]))  # c: test_c; test_dyn
    gemini.reply(api.answer([("a.py", "def one():\n    return 2\n")]))               # breaks test_a and test_b
    gemini.reply(api.answer([("data.txt", "OK\n")]))                                   # data: every test
    gemini.reply(api.answer([("c.py", "def three():\n    return 3  # again\n")]))
    env["SEED_FULL_GATE_EVERY"] = "2"
    done = run_fallback(workspace, env, "--iterations", "6", timeout=180)
    assert done.returncode == 0, done.stderr
    assert outcomes(workspace) == ["landed: 9 file(s) changed", "landed: 1 file(s) changed",
                                   "landed: 1 file(s) changed", "rolled back: tests failed",
                                   "landed: 1 file(s) changed", "landed: 1 file(s) changed"]
    assert lines_about_tests(workspace) == [
        "5 of the model's pass; the gate ran all test files",
        "5 of the model's pass; the gate ran 3 of 5 test files, those this change can affect",
        "5 of the model's pass; the gate ran 2 of 5 test files, those this change can affect",
        "0 of the model's pass; the gate ran all test files",  # two landings on a selection: all again, failing fast
        "5 of the model's pass; the gate ran all test files",  # a data file changed: anything may read it
        "5 of the model's pass; the gate ran 2 of 5 test files, those this change can affect"]
    assert "test_a.py" in (workspace / "pending_tasks.md").read_text()  # the first affected test, failing


def test_a_changed_seed_or_conftest_runs_every_test(workspace, env, gemini):
    gemini.reply(api.answer(CODEBASE))
    seed = (workspace / "seed.py").read_text()
    gemini.reply(api.answer([("seed.py", seed.replace('"""seed: one', '"""seed: just one', 1))]))
    done = run_fallback(workspace, env, "--iterations", "2", timeout=120)
    assert done.returncode == 0, done.stderr
    assert outcomes(workspace) == ["landed: 9 file(s) changed", "landed: 1 file(s) changed"]
    assert lines_about_tests(workspace) == ["5 of the model's pass; the gate ran all test files"] * 2
    selection = load_keeper("selection")
    files = {rel: load_keeper("snapshots").store_object(text.encode()) for rel, text in CODEBASE}
    tests = [rel for rel, _ in CODEBASE if rel.startswith("tests/")]
    assert selection.affected(tests, [("tests/sub/conftest.py", "new", 1, 0)], files) == (tests, False)
    assert selection.affected(tests, [("c.py", "changed", 1, 1)], files) == (["tests/test_c.py", "tests/test_dyn.py"],
                                                                               True)
    spaced = {rel: load_keeper("snapshots").store_object(text.encode()) for rel, text in [  # a namespace package
        ("pkg/mod.py", "M = 1\n"), ("pkg/other.py", "O = 1\n"), ("tests/test_mod.py", "from pkg import mod\n"),
        ("tests/test_other.py", "from pkg import other\n")]}
    assert selection.affected(["tests/test_mod.py", "tests/test_other.py"], [("pkg/mod.py", "changed", 1, 1)],
                              spaced) == (["tests/test_mod.py"], True)


ORDERED = [("registry.py", "ITEMS = []\n"),
           ("c.py", "def three():\n    return 3\n"),
           ("tests/test_a.py", "import registry\n\n\ndef test_fill():\n    registry.ITEMS.append(1)\n"),
           ("tests/test_b.py", "import registry\n\n\ndef test_filled():\n    assert registry.ITEMS == [1]\n"),  # after a
           ("tests/test_c.py", "from c import three\n\n\ndef test_three():\n    assert three() == 3\n")]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="the tests run in parts on two cores or more")
def test_a_suite_runs_in_two_parts_at_once_and_what_fails_there_is_judged_in_one_process(workspace, env, gemini):
    gemini.reply(api.answer(ORDERED))  # test_b passes only after test_a in the same process: in parts, it fails
    gemini.reply(api.answer([("registry.py", "ITEMS = [0]\n")]))  # a real failure, of test_b in any process
    env["SEED_PARALLEL_FROM"] = "2"
    done = run_fallback(workspace, env, "--iterations", "2", timeout=120)
    assert done.returncode == 0, done.stderr
    assert outcomes(workspace) == ["landed: 5 file(s) changed", "rolled back: tests failed"]  # the first confirmed
    assert lines_about_tests(workspace)[0] == "3 of the model's pass; the gate ran all test files"  # in one process
    task = (workspace / "pending_tasks.md").read_text()
    assert "(the tests ran first in 2 parts at once, and one did not pass: the verdict is this run's, in one" in task
    assert "assert [0, 1] == [1]" in task  # the verdict of the one process: test_a ran first
    assert (workspace / "registry.py").read_text() == "ITEMS = []\n"


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="the tests run in parts on two cores or more")
def test_parts_that_hang_only_beside_each_other_are_judged_again_in_one_process_in_time(workspace, env, gemini):
    waits = "import time\n\n\ndef test_waits(request):\n    if request.config.option.basetemp:  # in a part only\n" \
            "        time.sleep(120)\n"
    gemini.reply(api.answer([("tests/test_a.py", waits), ("tests/test_b.py", "def test_b():\n    pass\n")]))
    env.update(SEED_PARALLEL_FROM="2", SEED_GATE_SECONDS="4")  # the parts have 2 s, then one process has 4
    done = run_fallback(workspace, env, "--iterations", "1", timeout=60)
    assert done.returncode == 0, done.stderr
    assert outcomes(workspace) == ["landed: 2 file(s) changed"]
    assert lines_about_tests(workspace) == ["2 of the model's pass; the gate ran all test files"]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="the tests run in parts on two cores or more")
def test_a_break_the_parts_hid_is_found_by_the_cadences_run_in_one_process(workspace, env, gemini):
    dirty = "import registry\n\n\ndef test_fill():\n    registry.ITEMS.append(1)\n"
    clean = "import registry\n\n\ndef test_empty():\n    assert registry.ITEMS == []\n"  # only alone, or first
    gemini.reply(api.answer([("registry.py", "ITEMS = []\n"), ("tests/test_a.py", dirty), ("tests/test_b.py", clean)]))
    gemini.reply(api.answer([("c.py", "C = 1\n")]))  # no test can see it: it lands on a selection of none
    gemini.reply(api.answer([("d.py", "D = 1\n")]))  # then the cadence's run, in one process
    env.update(SEED_PARALLEL_FROM="2", SEED_FULL_GATE_EVERY="1")
    done = run_fallback(workspace, env, "--iterations", "3", timeout=120)
    assert done.returncode == 0, done.stderr
    assert outcomes(workspace) == ["landed: 3 file(s) changed", "landed: 1 file(s) changed",
                                   "rolled back: tests failed"]  # the first passed in parts
    assert "assert [1] == []" in (workspace / "pending_tasks.md").read_text()
