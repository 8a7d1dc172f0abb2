"""The seed's contract, tested from outside: `python seed.py` against a fake of the keeper's gateway.

They build their own workspace from fixed texts (conftest.py), so they judge the code, never the moment. The
keeper's gate runs them whenever seed.py (or a module it imports) changed, so an evolved seed that drops a
rule is rolled back.
"""
import json
import re

import pytest

import fake_gemini as api
from conftest import REPO, run_seed

KEEPER = ("fallback.py supervisor/ bench/ docs/ backups/ README.md requirements.txt goal.md pending_tasks.md "
          "evaluate.py iteration_log.md report.html")  # as the keeper names them


@pytest.fixture
def env(env, gemini):
    """What the keeper hands the seed: the gateway's address, a one-run token, the model and its budget."""
    env.update(GEMINI_API_KEY="run-token-1234", GEMINI_MODEL="gemini-3.5-flash", SEED_PROMPT_TOKENS="30000",
               SEED_KEEPER=KEEPER)
    return env


def record_of(root):
    return json.loads((root / ".seed" / "record.json").read_text())


def test_an_answer_is_written_recorded_and_its_tasks_named_not_ticked(workspace, env, gemini):
    (workspace / "pending_tasks.md").write_text("# Pending tasks\n\n- [ ] add hello\n      detail\n- [ ] later\n")
    gemini.reply(api.clean([("hello.py", "print('hello')\n"), ("pkg/util.py", "X = 1\n")], done=[1, 7]))
    done = run_seed(workspace, env)
    assert done.returncode == 0, done.stderr
    assert (workspace / "hello.py").read_text() == "print('hello')\n" and (workspace / "pkg/util.py").exists()
    record = record_of(workspace)
    assert record["outcome"] == "applied" and sorted(record["files"]) == ["hello.py", "pkg/util.py"]
    assert record["tasks"] == ["task one", "task two", "task three"] and record["done"] == ["add hello"]
    assert "- [ ] add hello" in (workspace / "pending_tasks.md").read_text()  # the keeper ticks it if it lands
    [request] = gemini.requests
    assert request["path"] == "/v1beta/models/gemini-3.5-flash:generateContent"
    assert request["headers"]["x-goog-api-key"] == "run-token-1234"
    body = request["body"]
    assert body["generationConfig"]["responseMimeType"] == "application/json"
    assert {"tasks", "files"} <= set(body["generationConfig"]["responseSchema"]["required"])
    rules = body["systemInstruction"]["parts"][0]["text"]
    assert "150 lines" in rules  # the seed's size, told to the model (the keeper's paths are not named: their names
    # drew a 1.5B model to write requirements.txt, goal.md, pending_tasks.md and evaluate.py, 300 s of its answer)


def test_unsafe_paths_are_refused_and_the_rest_written(workspace, env, gemini, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (workspace / "link").symlink_to(outside)
    for rel in ("fallback.py", "supervisor/gateway.py"):  # the keeper's, wherever these tests run
        (workspace / rel).parent.mkdir(exist_ok=True)
        (workspace / rel).write_text("# the keeper's\n")
    unsafe = ["fallback.py", "goal.md", ".env", "iteration_log.md", "pending_tasks.md", ".env~", "tools/.git",
              ".github/workflows/run.yml", "Supervisor/tests/conftest.py", "evaluate.py",
              "backups/x.py", "supervisor/gateway.py", "../escaped.py", str(tmp_path / "absolute.py"),
              "link/through.py", "FALLBACK.PY", "C:/windows.py", "two\nlines.py", "", "big.py", "nul.py"]
    protected = {p: (workspace / p).read_bytes() for p in ("fallback.py", "goal.md", "supervisor/tests/conftest.py",
                                                          "supervisor/gateway.py")}
    files = [(p, "owned = True\n") for p in unsafe[:-2]] + [("big.py", "x = 1\n" * 200_000), ("nul.py", "a\x00")]
    gemini.reply(api.clean(files + [("ok.py", "ok = True\n"), ("ünï cødé/-m.py", "x = 1\n")]))
    done = run_seed(workspace, env)
    assert done.returncode == 0, done.stderr
    assert {p: (workspace / p).read_bytes() for p in protected} == protected
    assert not any((workspace / p).exists() for p in (".env", ".env~", "tools/.git", ".github", "backups/x.py",
                                                      "big.py", "nul.py"))
    assert list(outside.iterdir()) == [] and not (tmp_path / "escaped.py").exists()
    assert not (tmp_path / "absolute.py").exists()
    record = record_of(workspace)
    assert len(record["refused"]) == len(unsafe) and sorted(record["files"]) == ["ok.py", "ünï cødé/-m.py"]
    assert "../escaped.py: leaves the workspace" in record["refused"]


def test_a_compile_error_puts_every_written_file_back_byte_for_byte(workspace, env, gemini):
    (workspace / "util.py").write_text("VALUE = 1\n")
    (workspace / "data.py").write_bytes(b"X = 1  # \xff\xfe not UTF-8\n")
    gemini.reply(api.clean([("util.py", "VALUE = 2\n"), ("data.py", "X = 2\n"), ("new.py", "x = 1\n"),
                            ("broken.py", "def f(:\n")], done=[1]))
    done = run_seed(workspace, env)
    assert done.returncode == 0, done.stderr
    assert (workspace / "util.py").read_text() == "VALUE = 1\n"
    assert (workspace / "data.py").read_bytes() == b"X = 1  # \xff\xfe not UTF-8\n"
    assert not (workspace / "new.py").exists() and not (workspace / "broken.py").exists()
    record = record_of(workspace)
    assert record["outcome"] == "rejected" and "broken.py, line 1" in record["reason"] and record["done"] == []
    assert record["reason"].startswith("compile error: ")


def test_the_prompt_holds_goal_tasks_log_and_what_of_the_codebase_fits_the_budget(workspace, env, gemini):
    (workspace / "goal.md").write_text("Grow a tiny calculator.\n")
    (workspace / "pending_tasks.md").write_text("- [ ] add a square root to calc.py\n- [x] done already\n")
    (workspace / "iteration_log.md").write_text("# Iteration log\n\n## Iteration 7 — landed: notes.py\n")
    (workspace / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (workspace / "huge.txt").write_text("z" * 100_000)
    for n in range(400):  # more than fits: the list of what is not shown must fit the budget too
        (workspace / "grown" / f"module_with_a_long_name_{n:03d}.py").parent.mkdir(exist_ok=True)
        (workspace / "grown" / f"module_with_a_long_name_{n:03d}.py").write_text(f"VALUE = {n}\n" * 40)
    env["SEED_PROMPT_TOKENS"] = "12000"
    gemini.reply(api.clean([]))
    assert run_seed(workspace, env).returncode == 0
    body = gemini.requests[0]["body"]
    prompt, rules = body["contents"][0]["parts"][0]["text"], body["systemInstruction"]["parts"][0]["text"]
    assert "Grow a tiny calculator." in prompt and "1. add a square root to calc.py" in prompt
    assert "done already" not in prompt and "## Iteration 7" in prompt
    assert prompt.index('<file path="seed.py">') < prompt.index('<file path="calc.py">')  # seed.py first
    assert "z" * 1000 not in prompt and int(re.findall(r"# Not shown \((\d+), too big", prompt)[-1]) > 300
    assert len(prompt) + len(rules) <= 12000 * 3
    assert record_of(workspace)["outcome"] == "applied"


@pytest.mark.parametrize("reply, says", [
    (api.error(429, "RESOURCE_EXHAUSTED", "gemini-3.5-flash: daily quota spent"), "daily quota spent"),
    (api.error(502, "INTERNAL", "answer cut off, empty or not the JSON asked for"), "not the JSON asked for"),
    ({"candidates": [{"content": {"parts": [{"text": "Sure! Here is the code."}]}}]}, "Sure! Here is"),
])
def test_no_usable_answer_exits_75_with_the_reason_and_changes_nothing(workspace, env, gemini, reply, says):
    seed_before = (workspace / "seed.py").read_bytes()
    gemini.reply(reply)
    done = run_seed(workspace, env)
    assert done.returncode == 75, done.stderr
    assert (workspace / "seed.py").read_bytes() == seed_before
    assert record_of(workspace)["outcome"] == "stopped" and says in record_of(workspace)["reason"]


def test_not_started_by_the_keeper_it_exits_78_without_a_request(workspace, env, gemini):
    del env["GEMINI_API_BASE"]
    done = run_seed(workspace, env)
    assert done.returncode == 78 and "python fallback.py" in done.stdout and gemini.requests == []


def test_the_seed_stays_tiny():
    """At most 150 lines that are not blank, none over 110 characters: a seed that grows past it is rolled back."""
    lines = (REPO / "seed.py").read_text().splitlines()
    assert len([line for line in lines if line.strip()]) <= 150
    assert [n for n, line in enumerate(lines, 1) if len(line) > 110] == []
