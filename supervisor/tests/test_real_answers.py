"""What a real small model answers, through `python fallback.py`: the shapes Qwen2.5-Coder 1.5B and 0.5B sent
(bench/real_model.py keeps its exchanges), each read, salvaged or refused as a person would want, and the exact
reason of every unusable answer said where the person and the model read it: the console line, the log, --show
and the next prompt.
"""
import json
import re
import runpy
from pathlib import Path

import pytest

import fake_gemini as api
from conftest import REPO, fresh_workspace, load_keeper
from test_fallback import outcomes, run_fallback
from test_gateway import CUT_AT_THE_LIMIT, answer_of, ask, gateway_module
from test_openai_compatible import (LLAMA_CPP, Stream, llama_cpp, llama_cpp_answer, local,  # noqa: F401 (servers)
                                    servers)

formats = load_keeper("formats")
Problem, Trouble = load_keeper("outcomes").Problem, load_keeper("outcomes").Trouble

# Qwen2.5-Coder 1.5B, asked for JSON: a file's text as a Python triple-quoted string, then a `\'` escape
TRIPLE_QUOTED = '```json\n{\n  "tasks": ["Create notes.py"],\n  "done": [],\n  "files": [\n    {\n      "path": ' \
                '"notes.py",\n      "content": """import json\nNOTES = []\n"""\n    }\n  ]\n}\n```'
BAD_ESCAPE = '{"tasks": ["Add notes"], "done": [], "files": [{"path": "notes.py", "content": "print(\\\'hi\\\')\\n"}]}'
GOOD = api.answer([("notes.py", "NOTES = []\n")])


def test_an_unusable_answers_exact_reason_is_on_the_console_in_the_log_in_show_and_in_the_next_prompt(
        workspace, env, gemini):
    gemini.reply(api.text_answer(BAD_ESCAPE)).reply(GOOD)
    done = run_fallback(workspace, env, "--iterations", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    why = "not valid JSON: Invalid \\escape at line 1 column 87"
    assert re.search(rf"#1 no change: {re.escape(why)}", done.stdout), done.stdout
    assert outcomes(workspace)[0].startswith(f"no change: {why}")
    assert why in run_fallback(workspace, env, "--show", "1").stdout
    assert why in gemini.prompts()[1]  # the model reads it in the log's end


def test_an_answer_with_file_contents_as_triple_quoted_strings_says_where_it_broke(workspace, env, gemini):
    gemini.reply(api.text_answer(TRIPLE_QUOTED))
    run_fallback(workspace, env, "--iterations", "1")
    [outcome] = outcomes(workspace)
    assert outcome.startswith("no change: not valid JSON: Expecting ',' delimiter at line 8 column 20, near ") and \
        '"content": """import json' in outcome


def test_after_five_answers_that_landed_nothing_the_console_says_what_they_came_to(workspace, env, gemini):
    for answer in [api.text_answer(BAD_ESCAPE)] * 3 + [api.answer([("notes.py", "... existing code ...")])] * 2:
        gemini.reply(answer)
    done = run_fallback(workspace, env, "--iterations", "5")
    assert "gemini-3.5-flash: the last 5 answers landed nothing (3 not valid JSON, 2 no file to write); if this goes " \
           "on, this model may be too small for whole-file answers" in done.stdout
    assert "- Stalled: gemini-3.5-flash: the last 5 answers" in (workspace / "iteration_log.md").read_text()


@pytest.mark.parametrize("files", [[("notes.py", "def add(:\n")], [("notes.py", "NOTES = []\n"), (
    "tests/test_notes.py", "def test_notes():\n    assert False\n")], [("seed.py", "SAME")]],
    ids=["compile-error", "tests-fail", "nothing-changed"])
def test_done_is_logged_only_for_an_answer_that_landed(workspace, env, gemini, files):
    (workspace / "pending_tasks.md").write_text("# Pending tasks\n\n- [ ] add notes\n")
    files = [(path, (workspace / path).read_text() if text == "SAME" else text) for path, text in files]
    gemini.reply(api.answer(files, done=[1]))
    run_fallback(workspace, env, "--iterations", "1")
    assert not outcomes(workspace)[0].startswith("landed")
    assert "Done from pending_tasks.md" not in (workspace / "iteration_log.md").read_text()
    assert "- [ ] add notes" in (workspace / "pending_tasks.md").read_text()


def test_the_status_counts_open_tasks_as_the_page_does(workspace, env, gemini):
    (workspace / "pending_tasks.md").write_text("# Pending tasks\n\n- [ ] mine\n- [ ] Iteration 3 was rolled back: "
                                                "x [failure 0a1b2c3d: 1 time since 2026-11-25, first after snapshot "
                                                "s1]\n")
    done = run_fallback(workspace, env, "--status")
    assert "pending tasks: 2 open (1 yours, 1 failures remembered: the page lists them apart)" in done.stdout
    page = run_fallback(workspace, env, "--report")
    assert page.returncode == 0 and "<h3>Open (1)</h3>" in (workspace / "report.html").read_text()
    assert json.loads(json.dumps(done.returncode)) == 0


def test_done_is_logged_and_ticked_for_an_answer_that_landed(workspace, env, gemini):
    (workspace / "pending_tasks.md").write_text("# Pending tasks\n\n- [ ] add notes\n")
    gemini.reply(api.answer([("notes.py", "NOTES = []\n")], done=[1]))
    run_fallback(workspace, env, "--iterations", "1")
    assert outcomes(workspace)[0].startswith("landed")
    assert "- Done from pending_tasks.md: add notes" in (workspace / "iteration_log.md").read_text()
    assert "- [x] add notes" in (workspace / "pending_tasks.md").read_text()


# --- the answers Qwen2.5-Coder 1.5B gave through llama-cpp-python, streamed as it streams them -------------------
REAL = json.loads((Path(__file__).parent / "real_answers.json").read_text())


def streamed(name, finish=None):
    """A recorded answer as llama-cpp-python streams it: an event a token (here a few characters)."""
    text = REAL[name]["content"]
    return Stream(re.findall(r".{1,4}", text, re.S), finish or REAL[name]["finish_reason"])


def ask_local(servers, tmp_path, answer):
    """What the gateway makes of an answer from a local server: (the seed's answer or None, the run's report)."""
    server = servers(llama_cpp()).answer(answer)
    gw = gateway_module.Gateway(local.OpenAICompatible(server.base, "", [LLAMA_CPP], 8192), tmp_path / "backups",
                                backoff=0.01, say=lambda line: None)
    gw.start()
    try:
        plan = gw.open_run()
        response = ask(gw, plan.token)
        return (answer_of(response) if response.status_code == 200 else None), gw.close_run(plan.token)
    finally:
        gw.close()


def test_a_file_whose_fence_is_opened_and_never_closed_is_unwrapped_and_compiles(servers, tmp_path):
    answer, report = ask_local(servers, tmp_path, streamed("unclosed_fence"))
    assert [f["path"] for f in answer["files"]] == ["notes.py", "seed.py", "tests/test_notes.py"]
    notes = answer["files"][0]["content"]
    assert notes.startswith("import json\n") and "```" not in notes
    compile(notes, "notes.py", "exec")


def test_blocks_that_end_with_their_fence_and_no_closing_tag_are_taken_and_the_model_told(servers, tmp_path):
    """Qwen2.5-Coder 1.5B closed every block with its Markdown fence and never wrote </file> (3 of 10 answers)."""
    answer, report = ask_local(servers, tmp_path, streamed("fence_for_a_tag"))
    paths = ["notes.py", "tests/test_notes.py", "seed.py", "README.md"]
    assert [f["path"] for f in answer["files"]] == paths
    for item in answer["files"]:
        assert "```" not in item["content"] and item["content"].endswith("\n")
    compile(answer["files"][0]["content"], "notes.py", "exec")
    assert answer["files"][3]["content"].startswith("# Notes\n") and "MIT" in answer["files"][3]["content"]
    assert report.salvaged == ("4 block(s) ended with a Markdown fence, not </file> (notes.py, tests/test_notes.py, "
                                  "seed.py, README.md): the fenced text was taken: kept the 4 file(s) that came whole")


@pytest.mark.parametrize("block, taken", [
    ("```python\nx = 1\n```\nsome words after it\n", "x = 1\n"),
    ("```python\nx = 1\n", None),                            # the fence never closed: cut off, not whole
    ("x = 1\n```\n", None),                                  # no fence opened it
    ("```\n```\n", None),                                    # nothing in it
], ids=["closed-then-words", "never-closed", "not-opened", "empty"])
def test_only_a_block_that_is_one_whole_fence_is_taken_without_its_closing_tag(block, taken):
    text = f'- a task\n<file path="app.py">\n{block}'
    if taken is None:
        with pytest.raises(ValueError, match="the block of app.py \\(line 2\\) has no </file>"):
            formats.read_files(text)
    else:
        assert formats.read_files(text)[0]["files"] == [{"path": "app.py", "content": taken}]


def test_a_markdown_file_without_its_closing_tag_is_not_cut_at_a_fence_inside_it():
    """A README's own code blocks end with bare fences too: the last one is the file's only with nothing after it."""
    readme = "```markdown\n# App\n```bash\npython app.py\n```\nMore words.\n"
    with pytest.raises(ValueError, match="has no </file>"):
        formats.read_files(f'<file path="README.md">\n{readme}')
    [item] = formats.read_files(f'<file path="README.md">\n{readme}```\n')[0]["files"]
    assert item["content"] == "# App\n```bash\npython app.py\n```\nMore words.\n"


def test_the_answer_format_sent_back_is_no_answer(servers, tmp_path):
    answer, report = ask_local(servers, tmp_path, streamed("format_echoed"))
    assert answer is None and report.problem.why == (
        "no file to write: the answer held 3 task(s) and 1 file(s); dropped: path/of/the/file.py: the instructions' "
        "example path, not a file of the codebase")


def test_an_answer_cut_off_before_a_file_came_whole_says_so(servers, tmp_path):
    answer, report = ask_local(servers, tmp_path, streamed("dash_on_every_line", "length"))
    assert answer is None and report.problem == Problem(Trouble.UNUSABLE, (
        "no file came whole: the block of seed.py (line 3) has no </file> (finishReason MAX_TOKENS, 563 characters: "
        "the answer was cut off at its token limit)"))


def test_files_written_as_a_named_fenced_block_are_taken_and_the_whole_ones_kept_from_a_cut(servers, tmp_path):
    """Aider's "whole" shape: 'Create a new Python file named `app.py` in the same directory as `seed.py` ...'."""
    answer, report = ask_local(servers, tmp_path, streamed("aider_whole_cut_off"))
    assert [f["path"] for f in answer["files"]] == ["app.py"] and answer["files"][0]["content"].startswith("import os")
    assert report.salvaged == CUT_AT_THE_LIMIT


def test_the_seed_never_rewrites_a_file_its_prompt_could_not_show(workspace, env, gemini):
    """At 8,192 tokens seed.py does not fit its own prompt: Qwen2.5-Coder 1.5B wrote its notes keeper there."""
    env["SEED_PROMPT_TOKENS"] = "3000"
    content = REAL["seed_blind"]["content"].split("```python\n", 1)[1]
    gemini.reply(api.answer([("seed.py", content), ("notes.py", "NOTES = []\n")]))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert outcomes(workspace) == ["landed: 1 file(s) changed"], done.stdout
    assert "- Refused: seed.py: not shown in the prompt: it would be rewritten blind" in \
        (workspace / "iteration_log.md").read_text()
    assert "seed.py" not in gemini.prompts()[0].split("# Codebase", 1)[1]  # its name alone draws a small model in


def test_json_that_is_not_the_answer_says_so_and_where(workspace, env, gemini):
    """Asked with the schema as text, Qwen2.5-Coder 1.5B sent the schema back with its own values in it."""
    echoed = '```json\n{\n  "type": "OBJECT",\n  "required": ["tasks", "files"],\n  "properties": {\n    "tasks": ' \
             '{"type": "ARRAY"}, "files": {"type": "ARRAY"}\n  }\n}\n```'
    gemini.reply(api.text_answer(echoed))
    run_fallback(workspace, env, "--iterations", "1")
    [outcome] = outcomes(workspace)
    assert outcome.startswith("no change: JSON, but no list of tasks and list of files of {path, content} in it (line 5 "
                              "column 17, near '{\\n    \"tasks\": {")


NOTES = '''import json
from pathlib import Path

NOTES = Path("notes.json")


def add(text):
    notes = json.loads(NOTES.read_text()) if NOTES.exists() else []
    NOTES.write_text(json.dumps(notes + [text]))
    return len(notes) + 1
'''
NOTES_TEST = '''from notes import add


def test_add_saves_a_note_where_the_test_stands():
    assert add("one") == 1 and add("two") == 2
    with open("notes.json") as saved:
        assert saved.read() == '["one", "two"]'


def test_each_test_has_a_folder_of_its_own():
    assert add("three") == 1


def test_the_codebase_reads_where_the_test_stands():
    assert open("notes.py").read().startswith("import json")
'''


def test_a_test_that_writes_a_file_where_it_stands_writes_in_its_own_temporary_folder(workspace, env, gemini):
    """Qwen2.5-Coder's tests write notes.json in the current folder: it was the read-only copy, and they failed.
    What a test reads there by a relative path is still the codebase's (a grown codebase's tests may)."""
    gemini.reply(api.answer([("notes.py", NOTES), ("tests/test_notes.py", NOTES_TEST)]))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert outcomes(workspace) == ["landed: 2 file(s) changed"], done.stdout
    assert not (workspace / "notes.json").exists() and not (workspace / ".seed" / "judged" / "notes.json").exists()


def files_answer(*files):
    return llama_cpp_answer("- a task\nDone: none\n" + "".join(
        f'<file path="{path}">\n{text}</file>\n' for path, text in files))


def test_a_local_model_is_shown_its_last_answer_rolled_back_to_mend_it_asked_warmer_if_unmended_and_replayed_so(
        workspace, env, servers):
    """Shown only the error, the 1.5B wrote its whole answer anew each time, making new mistakes (0 of 10 landed);
    shown its failing test, it sent it back unchanged five times at 0.2. A replay of the run (compared as the server
    was asked: a chat, the rules first) shows the same: the record's budget and request leave the same room."""
    server = servers(llama_cpp())
    broken = "import notes\n\n\ndef test_add():\n    assert notes.add('x') == 2\n"
    server.answer(files_answer(("notes.py", NOTES), ("tests/test_notes.py", broken)))
    server.answer(files_answer(("notes.py", NOTES), ("tests/test_notes.py", broken)))  # sent back unmended
    server.answer(files_answer(("notes.py", NOTES), ("tests/test_notes.py", broken.replace("== 2", "== 1"))))
    server.answer(files_answer(("notes.py", NOTES + "\n\ndef count():\n    return 0\n")))
    del env["GEMINI_API_KEY"]
    (workspace / ".env").write_text(f"OPENAI_BASE_URL={server.base}\nOPENAI_MODEL={LLAMA_CPP}\n")
    done = run_fallback(workspace, env, "--iterations", "4")
    assert [o.split(":")[0] for o in outcomes(workspace)] == ["rolled back"] * 2 + ["landed"] * 2, done.stdout
    assert [chat["body"]["temperature"] for chat in server.chats()] == [0.2, 0.2, 0.5, 0.2]
    prompts = [chat["body"]["messages"][-1]["content"] for chat in server.chats()]
    assert ["# Your last answer, rolled back" in prompt for prompt in prompts] == [False, True, True, False]
    shown = prompts[1].split("# Your last answer, rolled back: tests failed\n", 1)[1].split("# Codebase")[0]
    assert "> E   AssertionError: assert 1 == 2" in shown
    assert f'<file path="tests/test_notes.py">\n{broken}\n</file>' in shown
    assert f'<file path="notes.py">\n{NOTES}\n</file>' in shown and prompts[1].endswith(formats.FILES_FORMAT)
    replayed = run_fallback(workspace, env, "--replay")
    assert "all 4 iteration(s) replayed the same (0 skipped)" in replayed.stdout, replayed.stdout + replayed.stderr
    assert len(server.chats()) == 4  # every answer came from the record


def test_a_last_answer_that_carries_a_secret_in_any_form_is_never_shown(workspace, env, servers):
    """The attack on the section above: a file of the answer rolled back holds the key, base64-encoded."""
    import base64
    key = "sk-local-4f9a2c7e1b3d5f8a"
    server = servers(llama_cpp())
    leak = f"TOKEN = {base64.b64encode(key.encode()).decode()!r}\n"
    server.answer(files_answer(("notes.py", leak), ("tests/test_notes.py", "def test_x():\n    assert 0\n")))
    server.answer(files_answer(("notes.py", "NOTES = []\n")))
    del env["GEMINI_API_KEY"]
    (workspace / ".env").write_text(f"OPENAI_BASE_URL={server.base}\nOPENAI_MODEL={LLAMA_CPP}\nOPENAI_API_KEY={key}\n")
    done = run_fallback(workspace, env, "--iterations", "2")
    assert [o.split(":")[0] for o in outcomes(workspace)] == ["rolled back", "landed"], done.stdout
    second = server.chats()[1]["body"]["messages"][-1]["content"]
    assert "# Your last answer" not in second and base64.b64encode(key.encode()).decode() not in second


def test_gemini_is_shown_its_last_answer_as_the_seed_asks_and_the_rules_name_none_of_the_keepers_files(
        workspace, env, gemini):
    """What the model is shown of a failure is the seed's to choose: the genesis seed shows every model its last
    answer rolled back. Named in the rules as not the model's, requirements.txt, goal.md, pending_tasks.md and
    evaluate.py were what the 1.5B wrote first, every run: 3,277 tokens, 300 seconds, cut off."""
    gemini.reply(api.answer([("notes.py", "x = 1\n"), ("tests/test_notes.py", "def test_x():\n    assert 0\n")]))
    gemini.reply(api.answer([("notes.py", "x = 2\n")]))
    run_fallback(workspace, env, "--iterations", "2")
    shown = "# Your last answer, rolled back: tests failed\n"
    assert outcomes(workspace)[0].startswith("rolled back") and shown not in gemini.prompts()[0]
    assert shown in gemini.prompts()[1]
    rules = gemini.requests[0]["body"]["systemInstruction"]["parts"][0]["text"]
    named = [name for name in ("requirements.txt", "goal.md", "pending_tasks.md", "evaluate.py", "fallback.py",
                               "README.md", "backups/") if name in rules]
    assert not named and "not the keeper's" in rules, rules


def test_the_genesis_seed_shows_a_last_answer_with_the_files_that_fit_its_room_and_not_at_all_when_none_does():
    mending = runpy.run_path(str(REPO / "seed.py"), run_name="genesis")["mending"]  # the organism's, not the keeper's
    facts = {"why": "tests failed", "lines": ["E   assert 0"],
             "files": [{"path": "big.py", "content": "x = 1\n" * 100}, {"path": "small.py", "content": "y = 2\n"}]}
    shown = mending(facts, 400)
    assert '<file path="small.py">\ny = 2\n\n</file>' in shown and "big.py" not in shown and len(shown) <= 400
    assert mending(facts, 100) == "" and mending({}, 400) == ""
    named = mending({"why": "tests failed", "lines": ["tests/test_a.py:3: in test_a"],
                     "files": [{"path": "b.py", "content": "B = 1\n"}, {"path": "tests/test_a.py", "content": "T"}]},
                    400)
    assert named.index('<file path="tests/test_a.py">') < named.index('<file path="b.py">')


def test_a_local_model_that_sends_the_same_files_again_is_asked_warmer_each_time(workspace, env, servers):
    """At 0.2 the 1.5B sent its landed notes.py back unchanged six times running."""
    server = servers(llama_cpp())
    for _ in range(4):
        server.answer(files_answer(("notes.py", NOTES)))
    server.answer(files_answer(("notes.py", NOTES + "\n\ndef count():\n    return 0\n")))
    del env["GEMINI_API_KEY"]
    (workspace / ".env").write_text(f"OPENAI_BASE_URL={server.base}\nOPENAI_MODEL={LLAMA_CPP}\n")
    done = run_fallback(workspace, env, "--iterations", "5")
    assert [o.split(":")[0] for o in outcomes(workspace)] == ["landed", "no change", "no change", "no change",
                                                              "landed"], done.stdout
    assert [chat["body"]["temperature"] for chat in server.chats()] == [0.2, 0.2, 0.5, 0.8, 1.0]


def test_answers_of_the_same_files_are_said_as_such_and_gemini_is_asked_as_the_seed_asks(workspace, env, gemini):
    same = (workspace / "seed.py").read_text()
    for _ in range(5):
        gemini.reply(api.answer([("seed.py", same)]))
    done = run_fallback(workspace, env, "--iterations", "5")
    assert "the last 5 answers landed nothing (5 the same files again)" in done.stdout, done.stdout
    configs = [request["body"].get("generationConfig", {}) for request in gemini.requests]
    assert len(configs) == 5 and not [config for config in configs if "temperature" in config], configs


def test_a_change_of_blank_lines_and_line_end_spaces_alone_is_no_landing_but_indentation_is(workspace, env, gemini):
    """The 1.5B "landed" notes.py +1 -0 and notes.json +1 -0 four times. Indentation is code, and a Markdown line break
    is meaning: they land."""
    code = "def add(notes, text):\n    if text:\n        notes.append(text)\n        return notes\n"
    dedented = code.replace("        return", "    return")  # returns the notes when the text is empty too
    gemini.reply(api.answer([("notes.py", code), ("notes.json", "[]"), ("notes.md", "a  \nb\n")]))
    gemini.reply(api.answer([("notes.py", code.replace("\n        return", "   \n\n        return") + "\n\n"),
                             ("notes.json", "[]\n")]))
    gemini.reply(api.answer([("notes.md", "a\nb\n")]))  # a Markdown line break taken out: it lands
    gemini.reply(api.answer([("notes.py", dedented)]))
    done = run_fallback(workspace, env, "--iterations", "4")
    assert outcomes(workspace) == ["landed: 3 file(s) changed", "no change: its files differ from the codebase's only "
                                   "in blank lines and spaces (at line ends in Python, at the end in others)",
                                   "landed: 1 file(s) changed", "landed: 1 file(s) changed"], done.stdout
    assert (workspace / "notes.py").read_text() == dedented


def test_a_failing_tests_task_says_what_a_small_model_needs_to_mend_it(workspace, env, gemini):
    """The 1.5B's tasks, before: twelve lines of unittest.mock's frames with its own test cut off; a bare NameError
    for json used without its import (four iterations running); one for add_note, defined in notes.py (three)."""
    stdlib = "import json\n\n\ndef test_reads_the_notes():\n    assert json.loads('{\"notes\": [1, 2,]}')\n"
    no_json = "def test_notes_are_json():\n    assert json.loads('[]') == []\n"
    no_add = "def test_add_note():\n    assert add_note('hi') == 1\n"
    for test in (stdlib, no_json, no_add):
        gemini.reply(api.answer([("notes.py", "def add_note(text):\n    return 1\n"), ("tests/test_notes.py", test)]))
    run_fallback(workspace, env, "--iterations", "3")
    tasks = (workspace / "pending_tasks.md").read_text().split("\n- [ ] ")[1:]
    first = [line.removeprefix("      > ") for line in tasks[0].splitlines() if line.startswith("      > ")]
    assert any("_ test_reads_the_notes _" in line for line in first), first
    assert "tests/test_notes.py:5: in test_reads_the_notes" in first, first
    assert any(line.startswith("E   json.decoder.JSONDecodeError: ") for line in first), first
    assert not [line for line in first if "python3" in line or re.fullmatch(r"\s*\^+", line)], first
    assert "tests/test_notes.py:5: in test_reads_the_notes" in run_fallback(workspace, env, "--show", "1").stdout
    assert "> E   NameError: name 'json' is not defined. Did you forget to import 'json'?\n" in tasks[1]
    assert "> E   NameError: name 'add_note' is not defined. Did you forget 'from notes import add_note'?" in tasks[2]


def test_a_link_out_named_as_a_tests_folder_is_never_followed_when_the_gate_takes_the_links_away(
        workspace, env, gemini, tmp_path):
    """The attack on the gate's clean-up of each test's folder: a test plants, in its temporary folder, a link by
    the folders' name to a folder elsewhere holding a link of its own."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "kept").symlink_to(tmp_path)
    test = ("import os\nimport tempfile\n\n\ndef test_plants():\n    os.symlink("
            f"{str(elsewhere)!r}, os.path.join(tempfile.gettempdir(), 'keeper-here-planted'))\n")
    gemini.reply(api.answer([("notes.py", "NOTES = []\n"), ("tests/test_plant.py", test)]))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert outcomes(workspace) == ["landed: 2 file(s) changed"], done.stdout
    assert (elsewhere / "kept").is_symlink()


def test_show_tells_what_the_seed_asked_and_apart_what_the_wire_adaptation_changed(workspace, env, gemini, servers,
                                                                                   tmp_path):
    """The keeper adds nothing to what the model is told: Gemini gets the seed's text word for word; a server of one's
    own, asked for <file> blocks, gets it with the answer format after it, and nothing else; the sampling is the
    seed's (the genesis seed asks a small model 0.2, Gemini nothing)."""
    def adaptation(root, run_env):
        shown = run_fallback(root, run_env, "--show", "1").stdout
        assert "--- what the seed asked (" in shown, shown[-2000:]
        assert re.search(r"--- the prompt as sent \([\d,]+ bytes\): what the seed asked, with the changes above", shown)
        return shown.split("--- what the wire adaptation changed of it:\n")[1].split("--- the prompt as sent")[0]

    gemini.reply(api.answer([("notes.py", NOTES)]))
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    told = adaptation(workspace, env).splitlines()
    assert told[0] == "the text: none (the model was told what the seed asked, word for word)", told
    assert told[1].replace("asked:", "") == told[2].replace("sent: ", "") and "temperature" not in told[1], told
    local = fresh_workspace(tmp_path / "local")
    server = servers(llama_cpp())
    server.answer(files_answer(("notes.py", NOTES)))
    local_env = {**env}
    del local_env["GEMINI_API_KEY"]
    (local / ".env").write_text(f"OPENAI_BASE_URL={server.base}\nOPENAI_MODEL={LLAMA_CPP}\n")
    assert run_fallback(local, local_env, "--iterations", "1").returncode == 0
    told = adaptation(local, local_env).splitlines()
    added = [line[1:] for line in told if line.startswith("+")]
    assert not [line for line in told if line.startswith("-")], told
    assert "\n".join(added).strip() == formats.FILES_FORMAT.strip(), added
    assert '"temperature": 0.2' in told[-2] and '"temperature": 0.2' in told[-1], told


def test_nothing_junk_lands_from_an_echo_of_the_prompt(workspace, env, servers):
    """The 1.5B copied the seed's own `<file path="{rel}">` template: a file named {rel} landed. Nor does a file at
    the answer format's example path, nor one that is only text of its prompt (its goal, its log) sent back; a
    function taken out of a file it was shown into a module of its own is work, and lands."""
    more = "Keep each note on a line of its own in notes.json,\nand list them newest first, with the date they were added.\n"
    (workspace / "goal.md").write_text((workspace / "goal.md").read_text() + more)
    server = servers(llama_cpp())
    seed = (REPO / "seed.py").read_text()
    moved = seed[seed.index("def write_atomically("):seed.index("def apply(")]  # code it was shown, moved
    server.answer(files_answer(("{rel}", "x = 1\n"), ("path/of/the/file.py", "x = 2\n"), ("notes.md", more),
                               ("notes.py", NOTES), ("files.py", "import os\n\n\n" + moved.strip() + "\n")))
    del env["GEMINI_API_KEY"]
    (workspace / ".env").write_text(f"OPENAI_BASE_URL={server.base}\nOPENAI_MODEL={LLAMA_CPP}\n")
    done = run_fallback(workspace, env, "--iterations", "1")
    assert outcomes(workspace) == ["landed: 2 file(s) changed"], done.stdout
    assert sorted(p.name for p in workspace.iterdir() if p.suffix in (".py", ".md") or "{" in p.name) == \
        ["fallback.py", "files.py", "goal.md", "iteration_log.md", "notes.py", "pending_tasks.md", "seed.py"]
    log = (workspace / "iteration_log.md").read_text()
    assert "path/of/the/file.py: the instructions' example path" in log, log
    assert "{rel}" in log and "notes.md: an echo of its prompt" in log, log
