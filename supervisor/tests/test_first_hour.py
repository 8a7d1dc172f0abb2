"""A newcomer's first hour: what a fresh clone says on the machines people have, the console's truth, the
command line, the report and the README, end to end (`python fallback.py` in a copy of the workspace).
"""
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import fake_gemini as api
from conftest import REPO
from test_fallback import outcomes, run_fallback, run_in_terminal, snapshot_files, wait_for

PRETEND = "import runpy, sys; {before}; runpy.run_path('fallback.py', run_name='__main__')"


def run_as_if(root, env, before, *args):
    """fallback.py run by a Python that `before` (a line of code) made look older, or barer, than this one."""
    return subprocess.run([sys.executable, "-c", PRETEND.format(before=before), *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=60)


def one_line_and_nothing_done(done, root, gemini, says):
    assert done.returncode == 78, done.stdout + done.stderr
    assert done.stdout == "" and len(done.stderr.strip().splitlines()) == 1 and says in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and gemini.requests == [] and not (root / "backups" / "index.json").exists()


# --- 1, 2: the interpreter and the packages, before anything else ---------------------------------
@pytest.mark.parametrize("args", [["--demo"], ["--iterations", "1"], ["--help"]])
def test_a_python_older_than_3_11_stops_with_one_line_and_blames_no_code(workspace, env, gemini, args):
    tasks = (workspace / "pending_tasks.md").read_bytes()
    done = run_as_if(workspace, env, "sys.version_info = (3, 10, 12, 'final', 0)", *args)
    one_line_and_nothing_done(done, workspace, gemini, "needs Python 3.11 or newer, and this is 3.10")
    assert (workspace / "pending_tasks.md").read_bytes() == tasks and not (workspace / ".seed").exists()


def older_pythons():
    """Real interpreters older than 3.11 on this machine (pyenv's, or the system's), if any."""
    found = [shutil.which(f"python3.{minor}") for minor in (8, 9, 10)]
    found += [str(p) for p in Path.home().glob(".pyenv/versions/3.[89]*/bin/python")]
    found += [str(p) for p in Path.home().glob(".pyenv/versions/3.10*/bin/python")]
    working = [p for p in found if p and subprocess.run([p, "-c", "import sys; assert sys.version_info < (3, 11)"],
                                                        capture_output=True).returncode == 0]
    return sorted(set(working))


@pytest.mark.skipif(not older_pythons(), reason="no Python older than 3.11 on this machine")
def test_a_real_older_python_reads_the_file_and_says_so(workspace, env, gemini):
    for python in older_pythons():
        done = subprocess.run([python, "fallback.py", "--demo"], cwd=workspace, env=env, capture_output=True,
                              text=True, timeout=60)
        one_line_and_nothing_done(done, workspace, gemini, "needs Python 3.11 or newer")


@pytest.mark.parametrize("how, says", [
    (["-S", "fallback.py"], "missing Python packages (requests, python-dotenv, pytest)"),  # no site-packages at all
    (["-c", PRETEND.format(before="sys.modules['requests'] = None")], "missing Python packages (requests):"),
])
@pytest.mark.parametrize("args", [["--help"], ["--status"], ["--iterations", "1"]])
def test_a_missing_package_is_one_line_even_for_help(workspace, env, gemini, how, says, args):
    done = subprocess.run([sys.executable, *how, *args], cwd=workspace, env=env, capture_output=True, text=True,
                          timeout=60)
    one_line_and_nothing_done(done, workspace, gemini, says)
    assert "python3 -m venv .venv && . .venv/bin/activate && pip install -r requirements.txt" in done.stderr


def test_a_shell_that_forgot_the_folders_venv_is_told_to_activate_it_and_one_inside_it_to_pip(workspace, env, gemini):
    """pip into the system's Python fails on Debian and Ubuntu (externally managed): the folder's venv is named."""
    (workspace / ".venv").mkdir()  # the attack: a folder named .venv that is no virtual environment is not named
    done = subprocess.run([sys.executable, "-S", "fallback.py", "--help"], cwd=workspace, env=env,
                          capture_output=True, text=True, timeout=60)
    one_line_and_nothing_done(done, workspace, gemini, "missing Python packages")
    assert "python3 -m venv .venv" in done.stderr and "activate  first" not in done.stderr
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", workspace / ".venv"], check=True, timeout=120)
    done = subprocess.run([sys.executable, "-S", "fallback.py", "--help"], cwd=workspace, env=env,
                          capture_output=True, text=True, timeout=60)
    one_line_and_nothing_done(done, workspace, gemini, "not the folder's virtual environment: run  "
                              ". .venv/bin/activate  first (or  .venv/bin/python fallback.py)")
    done = subprocess.run([workspace / ".venv" / "bin" / "python", "fallback.py", "--help"], cwd=workspace,
                          env=env, capture_output=True, text=True, timeout=60)  # inside it: pip is the fix
    one_line_and_nothing_done(done, workspace, gemini, "missing Python packages (requests, python-dotenv, pytest)")
    assert "run  python -m pip install -r requirements.txt" in done.stderr, done.stderr


# --- 3, 4: the goal, the tasks and .env, each said in one line with where -------------------------
@pytest.mark.parametrize("steer, says", [
    (lambda root: (root / "goal.md").write_text("# Goal\n\nGrow notes.py\n", "utf-16"), "goal.md is not UTF-8 text"),
    (lambda root: (root / "goal.md").write_bytes(b"# Goal\n\xe9t\xe9 notes\n"), "goal.md is not UTF-8 text (line 2)"),
    (lambda root: (root / "goal.md").write_bytes(b"PK\x03\x04\x14\x00\x00\x00\x08\x00"), "goal.md holds a control"),
    (lambda root: (root / "goal.md").write_text("# Goal\n\nGrow \x1b[31mnotes\n"), "goal.md holds a control "
                                                                                   "character ('\\x1b', line 3)"),
    (lambda root: (root / "pending_tasks.md").write_bytes(b"- [ ] ship\x00\x00\x01"), "pending_tasks.md holds a control"),
    (lambda root: (root / "goal.md").write_text("- grow it\n" * 400), "more than the largest prompt (~1,000)"),
    (lambda root: (root / "goal.md").write_text("# Goal\n\n"), "goal.md gives the model no direction yet (only "
                                                                 "'# Goal')"),
    (lambda root: (root / "goal.md").write_text("# Goal\n\ncalculator\n"), "goal.md gives the model no direction"),
], ids=["utf-16", "latin-1", "binary", "escape codes", "binary tasks", "over the prompt's cap", "a heading alone",
        "one word"])
def test_a_goal_or_tasks_no_prompt_should_carry_stop_before_a_request(workspace, env, gemini, steer, says):
    env["SEED_PROMPT_TOKENS"] = "1000"
    steer(workspace)
    one_line_and_nothing_done(run_fallback(workspace, env, "--iterations", "1"), workspace, gemini, says)


@pytest.mark.parametrize("dotenv, says", [
    ("GEMINI_MODEL='gemini-2.5-flash-lite\nSEED_BACKOFF=0.01\n", ".env line 1 (GEMINI_MODEL=…) cannot be read: its "
                                                                "quote is not closed"),
    ("# models\n\nGEMINI_MODEL=\"gemini-2.5-flash-lite\n", ".env line 3 (GEMINI_MODEL=…) cannot be read"),
    ("SEED_BACKOFF=0.01\nthis is not a setting\n", ".env line 2 cannot be read: write it as NAME=value (or start "
                                                  "it with # to keep it as a comment)\n"),
    ("A B\nC D\nE F\n", ".env line 1 cannot be read: write it as NAME=value (or start it with # to keep it as a "
                        "comment) (2 more after this one)\n"),
    ("SEED_BACKOFF=0.01\nAIzaSyPASTEDALONE0123456789abcdefghijklmn\n", ".env line 2 cannot be read"),
], ids=["unclosed quote", "unclosed quote after a comment", "not a setting", "three lines", "a key pasted alone"])
def test_each_dotenv_line_that_does_not_parse_is_said_with_its_line(workspace, env, gemini, dotenv, says):
    (workspace / ".env").write_text(dotenv)
    done = run_fallback(workspace, env, "--iterations", "1")
    one_line_and_nothing_done(done, workspace, gemini, says)
    assert "dotenv" not in done.stderr and "AIzaSyPASTED" not in done.stderr  # its own words, never a value
    assert run_fallback(workspace, env, "--status").stderr == ""  # python-dotenv's raw warnings are never shown


@pytest.mark.parametrize("dotenv, says", [
    ("GEMINI_MODELS=gemini-3.5-flash-lite\n", "GEMINI_MODELS in .env is not a setting the keeper knows: did you mean "
                                              "GEMINI_MODEL?"),
    ("OPENAI_BASEURL=http://127.0.0.1:9/v1\n", "did you mean OPENAI_BASE_URL?"),
    ("SEED_WHATEVER=1\n", "SEED_WHATEVER in .env is not a setting the keeper knows (docs/settings.md lists them)"),
    ("GEMINI_API_KEY=AIzaSy TWO-WORDS\n", "GEMINI_API_KEY has a space inside it"),
], ids=["GEMINI_MODELS", "OPENAI_BASEURL", "unknown", "a key with a space"])
def test_a_misspelt_setting_or_a_broken_key_stops_with_the_setting_it_resembles(workspace, env, gemini, dotenv, says):
    (workspace / ".env").write_text(dotenv)
    env.pop("GEMINI_API_KEY") if "GEMINI_API_KEY" in dotenv else None
    one_line_and_nothing_done(run_fallback(workspace, env, "--iterations", "1"), workspace, gemini, says)


def test_every_setting_the_keeper_reads_is_known_and_documented(workspace):
    """The list misspellings are told against is the code's own: a setting read anywhere is in it, and in the docs."""
    settings = (REPO / "docs" / "settings.md").read_text()
    code = "".join(p.read_text() for p in (REPO / "supervisor").glob("*.py")) + (REPO / "fallback.py").read_text()
    read = set(re.findall(r"""(?:environ(?:\.get)?\(?\[?|number\()["']((?:GEMINI|OPENAI|SEED|BACKUPS)_[A-Z0-9_]+)""",
                          code))
    known = __import__("conftest").load_keeper("settings").KNOWN
    assert read and read <= known and {name for name in known if f"`{name}`" not in settings} == set()


# --- 5: a goal too big for every model ----------------------------------------------------------
def test_a_goal_too_big_for_every_model_is_one_short_line_and_spends_no_iteration(workspace, env, gemini):
    env.update(GEMINI_MODEL="gemma-4-26b-a4b-it,gemma-4-31b-it",
               GEMINI_LIMITS="gemma-4-26b-a4b-it=30/16000/1500,gemma-4-31b-it=30/16000/1500")
    gemini.reply(api.answer([("a.py", "a = 1\n")]))
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    (workspace / "goal.md").write_text("- a line of the spec about tagging, search and export\n" * 800)
    done = run_fallback(workspace, env, "--iterations", "3")
    assert done.returncode == 78 and len(gemini.requests) == 1
    [stop] = [line for line in done.stdout.splitlines() if " stopped: " in line]
    assert re.search(r"stopped: goal.md and the open tasks \(~[\d,]+ tokens\) leave no room for code in any model's "
                     r"prompt \(the largest takes ~[\d,]+\): shorten them$", stop) and len(stop) < 200
    assert "SEED_PROMPT_TOKENS" not in done.stdout and "gemma" not in stop  # once, not per model; free tier
    assert outcomes(workspace) == ["landed: 1 file(s) changed"]  # no iteration number spent
    assert "#2" not in done.stdout and not re.search(r"Iteration 2\b|#2\b", (workspace / "report.html").read_text())
    (workspace / "goal.md").write_text("# Goal\n\nGrow notes.py.\n")
    gemini.reply(api.answer([("b.py", "b = 1\n")]))
    assert "#2 landed" in run_fallback(workspace, env, "--iterations", "1").stdout  # the next one is number 2
    assert outcomes(workspace) == ["landed: 1 file(s) changed"] * 2


# --- 6: the console and --status tell the truth ---------------------------------------------------
def test_a_final_wait_says_its_reason(workspace, env, gemini):
    gemini.reply(api.per_day())
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0 and "#1 waiting until" in done.stdout
    assert re.search(r"the next iteration would wait: .*gemini-3\.5-flash.*daily", done.stdout), done.stdout


def test_the_status_line_shows_the_iteration_number(workspace, env, gemini):
    env.pop("NO_COLOR", None)
    env["TERM"] = "xterm"
    gemini.reply(api.answer([("a.py", "a = 1\n")])).reply(api.answer([("b.py", "b = 1\n")]), delay=1.5)
    screen = run_in_terminal(workspace, env, "--iterations", "2")
    assert re.search(r"#2 0:0\d seed\.py: asking gemini-3\.5-flash", screen), screen


def test_landed_states_are_said_in_words_a_newcomer_reads_right(workspace, env, gemini):
    gemini.reply(api.answer([("a.py", "a = 1\n")])).reply(api.answer([("b.py", "b = 1\n")]))
    assert run_fallback(workspace, env, "--iterations", "2").returncode == 0
    listing = run_fallback(workspace, env, "--list-backups").stdout.splitlines()
    assert listing[0].endswith("a run from it worked") and "known good" not in "\n".join(listing)
    assert re.search(r"^0003 .* landed +\d+ +not yet  <- the codebase now$", listing[3]), listing
    assert re.search(r"^0002 .* landed +\d+ +yes$", listing[2]), listing
    status = run_fallback(workspace, env, "--status").stdout
    assert "the codebase now is snapshot 0003 (landed, a run from it worked: not yet); the newest a run worked " \
           "from: 0002" in status and "known good" not in status


def test_restoring_the_state_you_are_at_says_so_and_keeps_no_copy(workspace, env, gemini):
    gemini.reply(api.answer([("a.py", "a = 1\n")]))
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    index = json.loads((workspace / "backups" / "index.json").read_text())
    done = run_fallback(workspace, env, "--restore", "2")
    assert done.returncode == 0 and done.stdout == "the codebase is already as snapshot 0002 holds it: nothing to " \
                                                   "restore\n"
    assert json.loads((workspace / "backups" / "index.json").read_text()) == index


@pytest.mark.parametrize("buffered", [True, False])
def test_status_read_by_head_exits_0(workspace, env, buffered):
    if buffered:  # as usual: the output is written at exit
        env.pop("PYTHONUNBUFFERED", None)
    else:
        env["PYTHONUNBUFFERED"] = "1"
    for _ in range(3):  # the reader goes away before a line is written
        reader = subprocess.Popen([sys.executable, "fallback.py", "--status"], cwd=workspace, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        reader.stdout.close()
        try:
            assert reader.wait(timeout=60) == 0 and reader.stderr.read() == b""
        finally:  # never left running to the next test
            reader.kill()
            reader.wait()
    piped = subprocess.run("python fallback.py --status | head -1", shell=True, cwd=workspace, env=env,
                           capture_output=True, text=True, executable="/bin/bash")
    assert piped.stdout == "keeper: not running\n"


def test_control_bytes_in_the_tasks_never_reach_the_terminal(workspace, env, gemini):
    (workspace / "pending_tasks.md").write_text("# Pending tasks\n\n- [ ] clear \x1b[2J\x1b]0;owned\x07 the screen\n")
    status = run_fallback(workspace, env, "--status")
    assert status.returncode == 0 and "  - clear \\x1b[2J\\x1b]0;owned\\x07 the screen" in status.stdout  # shown
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", status.stdout)


# --- 7: --version, --help, --goal, --model ------------------------------------------------------------
def test_version_and_help_say_the_settings_exit_codes_and_examples(workspace, env):
    version = run_fallback(workspace, env, "--version")
    assert version.returncode == 0 and re.fullmatch(r"seed \d{4}\.\d\d \(fallback\.py\)\n", version.stdout)
    shown = run_fallback(workspace, env, "--help").stdout
    for word in ("GEMINI_API_KEY", "GEMINI_MODEL", "OPENAI_BASE_URL", "SEED_PROMPT_TOKENS", "exit codes:", "78 ",
                 "130 ", "examples:", "--goal FILE", "--model NAME[,NAME]"):
        assert word in shown, word
    assert len(re.findall(r"^  python fallback\.py ", shown, re.M)) == 3


def test_goal_and_model_on_the_command_line_count_for_one_run(workspace, env, gemini, tmp_path):
    other = tmp_path / "ideas.md"
    other.write_text("# Another goal\n\nA tiny calculator, calc.py.\n")
    gemini.reply(api.answer([("a.py", "a = 1\n")], model="gemini-2.5-flash-lite"))
    done = run_fallback(workspace, env, "--iterations", "1", "--goal", str(other), "--model", "gemini-2.5-flash-lite")
    assert done.returncode == 0, done.stdout + done.stderr
    assert gemini.models_asked() == ["gemini-2.5-flash-lite"]
    assert "A tiny calculator, calc.py." in gemini.prompts()[0] and "note keeper" not in gemini.prompts()[0]
    assert "note keeper" in (workspace / "goal.md").read_text()  # goal.md is left as it is
    assert "A tiny calculator, calc.py." in (workspace / "report.html").read_text()  # the page shows the one used
    gemini.reply(api.answer([("b.py", "b = 1\n")]))
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0  # and the next run is as .env says
    assert gemini.models_asked()[-1] == "gemini-3.5-flash" and "note keeper" in gemini.prompts()[-1]
    missing = run_fallback(workspace, env, "--iterations", "1", "--goal", str(tmp_path / "nope.md"))
    assert missing.returncode == 78 and f"{tmp_path / 'nope.md'} is missing or empty" in missing.stderr


def test_model_on_the_command_line_names_a_local_servers_model(workspace, env, gemini):
    env.update(OPENAI_BASE_URL="http://127.0.0.1:9/v1", OPENAI_MODEL="qwen3:8b")
    listed = run_fallback(workspace, env, "--status", "--model", "llama3.2:3b").stdout
    assert re.search(r"^  llama3\.2:3b ", listed, re.M) and "qwen3:8b" not in listed
    del env["OPENAI_BASE_URL"]
    bad = run_fallback(workspace, env, "--iterations", "1", "--model", "gemini-3.5-flash,not a name!")
    assert bad.returncode == 78 and "GEMINI_MODEL: 'not a name!' is not a model's name" in bad.stderr


# --- 9: the report ----------------------------------------------------------------------------------
GOAL_IN_MARKDOWN = ("# Notes <script>alert('goal')</script>\n\nA **small** note keeper, `notes.py`:\n\n- add a note\n"
                    "- find *notes* <img src=x onerror=alert(1)>\n\n```\nprint('<b>')\n```\n")


def test_the_report_renders_the_goals_markdown_escaped_and_without_script(workspace, env, gemini):
    (workspace / "goal.md").write_text(GOAL_IN_MARKDOWN)
    gemini.reply(api.answer([("a.py", "a = 1\n")]))
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    page = (workspace / "report.html").read_text()
    goal = page[page.index('<section id="goal">'):page.index("</section>")]
    for part in ("<h3>Notes &lt;script&gt;alert(&#x27;goal&#x27;)&lt;/script&gt;</h3>", "<strong>small</strong>",
                 "<code>notes.py</code>", "<li>add a note</li>", "<em>notes</em> &lt;img src=x",
                 "<pre><code>print(&#x27;&lt;b&gt;&#x27;)</code></pre>"):
        assert part in goal, part
    assert "<script" not in page and "<img" not in page and "# Notes" not in goal


def test_the_report_shows_the_last_step_explains_its_columns_and_dates_one_day_once(workspace, env, gemini):
    gemini.reply(api.answer([("a.py", "a = 1\n")])).reply(api.answer([("b.py", "b = 1\nc = 2\n")]))
    assert run_fallback(workspace, env, "--iterations", "2").returncode == 0
    page = (workspace / "report.html").read_text()
    lines = re.findall(r'<path class="line" d="([^"]+)"', page)
    assert len(lines) == 3
    for d in lines:
        *_, (step, _) = re.findall(r"H([\d.]+)V([\d.]+)", d)  # the last landing's step: inside the chart
        assert float(step) < 340, d
    assert "<b>wasted</b>: of those, requests that brought nothing that landed" in page
    [chart] = re.findall(r'<figcaption><code>gemini-3\.5-flash</code>.*?</svg>', page, re.S)
    day = re.search(r"Pacific days, \d{4}-(\d\d-\d\d) to", page)[1]
    assert chart.count(f">{day}</text>") == 1


def test_a_model_the_backend_does_not_know_gets_no_quota_on_the_page(workspace, env, gemini):
    env["GEMINI_MODEL"] = "gemini-3.5-flsh"
    gemini.reply(api.model_gone("gemini-3.5-flsh"))
    run_fallback(workspace, env, "--iterations", "1")
    assert run_fallback(workspace, env, "--report").returncode == 0
    page = (workspace / "report.html").read_text()
    [chart] = re.findall(r'<figcaption><code>gemini-3\.5-flsh</code>.*?</svg>', page, re.S)
    assert "1 request(s)</figcaption>" in chart and "quota" not in chart


# --- 8: the README is a door ---------------------------------------------------------------------------
def test_the_readme_is_short_and_every_option_it_shows_is_in_help(workspace, env):
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    shown = set(re.findall(r"(?<![\w-])--[a-z][a-z-]+", readme))
    for page in (REPO / "docs").glob("*.md"):  # the reference's options of fallback.py, too
        shown |= {flag for line in page.read_text().splitlines() if "fallback.py" in line or "| `--" in line
                  for flag in re.findall(r"(?<![\w-])--[a-z][a-z-]+", line) if not flag.startswith("--steps")}
    helped = run_fallback(workspace, env, "--help").stdout
    assert shown and {flag for flag in shown if not re.search(rf"(?<![\w-]){flag}\b", helped)} == set()
    assert "python -P -m pytest -q supervisor/tests" in readme  # CI runs the README's test command
    for link in re.findall(r"\]\((docs/[^)#]+)\)", readme):
        assert (REPO / link).is_file() or link == "docs/local-models.md", link  # another branch brings that one


def test_a_fresh_clone_status_says_no_snapshot_yet_and_words_the_keeper_uses(workspace, env):
    done = run_fallback(workspace, env, "--status")
    assert done.returncode == 0 and "keeper: not running" in done.stdout and "supervisor" not in done.stdout
    assert "no snapshot yet: the first run takes one (genesis)" in done.stdout and "edited since" not in done.stdout


def test_backups_deleted_between_runs_is_said_by_status_and_by_the_next_start(workspace, env, gemini):
    gemini.reply(api.answer([("calc.py", "def add(a, b):\n    return a + b\n")]))
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    shutil.rmtree(workspace / "backups")
    status = run_fallback(workspace, env, "--status")
    assert "iterations: 0 recorded (iteration_log.md tells of 1: backups/, which holds the record, was deleted or " \
           "moved)" in status.stdout
    gemini.reply(api.answer([("calc.py", "def add(a, b):\n    return b + a\n")]))
    again = run_fallback(workspace, env, "--iterations", "1")
    assert again.returncode == 0 and "backups/ holds no snapshot, though iteration_log.md tells of 1 iteration(s)" \
        in again.stdout and "## Iteration 2 " in (workspace / "iteration_log.md").read_text()


def test_restoring_a_state_that_failed_the_checks_takes_force_and_says_what_it_is(workspace, env, gemini):
    gemini.reply(api.answer([("calc.py", "def add(a, b):\n    return a - b\n"),
                             ("tests/test_calc.py", "from calc import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n")]))
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    failed = re.search(r"^(\d{4}) .* failed ", run_fallback(workspace, env, "--list-backups").stdout, re.M)[1]
    refused = run_fallback(workspace, env, "--restore", failed)
    assert refused.returncode == 78 and f"snapshot {failed} is a change that failed the checks: look at it with  " \
        f"python fallback.py --materialise {failed}" in refused.stderr and f"--restore {failed} --force" in refused.stderr
    assert not (workspace / "calc.py").exists()
    forced = run_fallback(workspace, env, "--restore", failed, "--force")
    assert forced.returncode == 0 and "(a change that failed the checks)" in forced.stdout
    assert "return a - b" in (workspace / "calc.py").read_text() and "kept as snapshot" in forced.stdout
    assert run_fallback(workspace, env, "--force").returncode == 2  # --force alone is a command-line mistake
    assert "; 1 kept by hand (restored to, or --keep ID)" in run_fallback(workspace, env, "--status").stdout  # why 1


def test_ctrl_c_during_the_demo_ends_cleanly_naming_its_copy_and_old_copies_are_taken_away(env, tmp_path):
    from test_fallback import a_fresh_clone, wait_for
    clone = a_fresh_clone(tmp_path)
    env.update(TMPDIR=str(tmp_path), GEMINI_API_BASE="http://127.0.0.1:9")
    old = [tmp_path / f"seed-demo-old{n}" for n in range(4)]
    for n, folder in enumerate(old):
        (folder / "workspace").mkdir(parents=True)
        (folder / ".seed-demo").write_text("a demo's\n")
        os.utime(folder, (n, n))
    (tmp_path / "seed-demo-not-ours").mkdir()  # no mark: not the demo's to take away
    demo = subprocess.Popen([sys.executable, "fallback.py", "--demo"], cwd=clone, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, process_group=0)
    try:
        wait_for(lambda: list(tmp_path.glob("seed-demo-*/workspace/iteration_log.md")), seconds=60)
        os.killpg(demo.pid, signal.SIGINT)  # as Ctrl+C in its terminal: the whole foreground group
        out, err = demo.communicate(timeout=60)
    finally:  # never left running to the next test
        demo.kill()
        demo.wait()
    assert demo.returncode == 130 and "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "The demo's copy is " in out and "interrupted" in out
    assert [folder.exists() for folder in old] == [False, False, True, True] and (tmp_path / "seed-demo-not-ours").exists()


def test_models_offline_is_one_short_line_naming_what_to_check(workspace, env):
    env["GEMINI_API_BASE"] = "http://127.0.0.1:9"
    done = run_fallback(workspace, env, "--models")
    assert done.returncode == 75 and done.stderr == "fallback: cannot reach http://127.0.0.1:9 (ConnectionError): " \
        "check the network, or GEMINI_API_BASE in .env\n"


def test_after_an_offline_run_the_page_and_status_count_the_same_requests(workspace, env):
    env["GEMINI_API_BASE"] = "http://127.0.0.1:9"  # nothing listens: every request fails before it reaches a model
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0, done.stderr
    status = run_fallback(workspace, env, "--status").stdout
    unreached = int(re.search(r"gemini-3.5-flash\s+0 request\(s\), 0 wasted.*\(and (\d+) that never reached it\)",
                              status)[1])
    page = (workspace / "report.html").read_text()
    row = re.search(r"<tr><td><code>gemini-3.5-flash</code></td>(.*?)</tr>", page)[1]
    assert re.findall(r'class="num">([\d,]+)<', row) == ["0", "0", "0", str(unreached)]
    assert '<b>0</b><span>requests</span>' in page and unreached > 0
    said = [line for line in done.stdout.splitlines() if " #1 " in line] + [done.stdout.splitlines()[-1]]
    assert said and all("; 0 request(s)" in line or ", 0 request(s)" in line for line in said), said  # the console's
    assert "- Model: gemini-3.5-flash, 0 request(s)," in (workspace / "iteration_log.md").read_text()  # and the log's


def test_show_lays_out_the_answer_says_the_reason_once_and_shows_the_failing_output(workspace, env, gemini):
    gemini.reply(api.answer([("calc.py", "def add(a, b):\n    return a - b\n"),
                             ("tests/test_calc.py", "from calc import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n")]))
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    shown = run_fallback(workspace, env, "--show", "1").stdout
    assert "~~~ file 'calc.py'\ndef add(a, b):\n    return a - b\n" in shown  # the file as it is, not escaped JSON
    assert shown.count("- Reason: tests failed") == 1 and shown.endswith("what came of it: rolled back: tests failed\n")
    assert "=== the output that shows it" in shown and "assert 0 == 4" in shown


def test_a_finished_runs_page_draws_its_marks_clear_of_the_labels_and_says_no_running(workspace, env, gemini):
    test = "from calc import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n"
    gemini.reply(api.answer([("calc.py", "def add(a, b):\n    return a - b\n"), ("tests/test_calc.py", test)]))
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    page = (workspace / "report.html").read_text()
    assert "<span>from first to last</span>" in page and ">running<" not in page  # the keeper has stopped
    growth = re.search(r'<section id="growth">(.*?)</section>', page, re.S)[1]
    marks = [(float(y), float(length)) for y, length in re.findall(r'class="rolled" d="M[\d.]+ ([\d.]+)v([\d.]+)',
                                                                   growth)]
    labels = [float(y) for y in re.findall(r'<text x="[\d.]+" y="([\d.]+)" text-anchor="(?:start|middle|end)">\d',
                                           growth)]
    beneath = [y for y in labels if y > min(y for y, _ in marks)]  # the iteration axis's, not the scale's
    assert beneath and max(y + length for y, length in marks) <= min(beneath) - 8  # 11 px digits: 8 px high


def test_a_fresh_fork_is_said_as_a_fork_and_compared_to_its_last_iteration(workspace, env, gemini, tmp_path):
    calc = ("calc.py", "def add(a, b):\n    return a + b\n")
    gemini.reply(api.answer([calc]))
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    fork = tmp_path / "fork"
    assert run_fallback(workspace, env, "--fork", "1", str(fork)).returncode == 0
    status = run_fallback(fork, env, "--status").stdout
    assert "iterations: 0 recorded\n" in status and "deleted" not in status  # its log starts with its parent's
    gemini.reply(api.answer([("more.py", "x = 1\n")]))
    gemini.reply(api.answer([("more.py", "x = 1\n")]))  # the same file again: no change, the state stands
    assert run_fallback(fork, env, "--iterations", "2").returncode == 0
    assert [o.split(":")[0] for o in outcomes(fork)[-2:]] == ["landed", "no change"]
    assert run_fallback(fork, env, "--compare", str(workspace)).returncode == 0
    files = re.search(r"<figcaption>Files</figcaption>(.*?)</svg>", (fork / "compare.html").read_text(), re.S)[1]
    assert re.search(r'class="run r0" d="[^"]*H352\.0V[\d.]+"', files)  # the fork's line reaches the axis's end,
    assert re.findall(r'<text x="[\d.]+" y="\d+" text-anchor="\w+">(\d+)</text>', files) == ["0", "1", "2", "3"]


def test_ctrl_c_while_the_keeper_starts_is_one_line_and_exit_130(workspace, env, gemini):
    gemini.reply(api.answer([("calc.py", "def add(a, b):\n    return a + b\n")]))
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    read, write = os.pipe()
    os.set_blocking(write, False)
    while True:  # a console that takes nothing more: the start's first line waits there, after its row in the record
        try:
            os.write(write, b"x" * 4096)
        except BlockingIOError:
            break
    os.set_blocking(write, True)
    keeper = subprocess.Popen([sys.executable, "fallback.py", "--iterations", "1"], cwd=workspace, env=env,
                              stdout=write, stderr=subprocess.PIPE, text=True)
    os.close(write)
    wait_for(lambda: starts_recorded(workspace) == 2, seconds=60)
    keeper.send_signal(signal.SIGINT)  # as Ctrl+C
    with os.fdopen(read, "rb") as console:
        said = console.read().decode()
    err = keeper.communicate(timeout=60)[1]
    assert keeper.returncode == 130 and err == "", err
    assert said.endswith(" interrupted: nothing is half done that the next start does not finish\n"), said[-300:]


def starts_recorded(root):
    db = sqlite3.connect(f"file:{root / 'backups' / 'record.sqlite'}?mode=ro", uri=True)
    try:
        return db.execute("SELECT count(*) FROM runs").fetchone()[0]
    finally:
        db.close()


def test_ctrl_c_at_any_moment_of_the_start_says_no_traceback(workspace, env):
    env["GEMINI_API_BASE"] = "http://127.0.0.1:9"
    started = PRETEND.format(before="print('up', file=sys.stderr, flush=True)")  # Python itself is up: its own
    for delay in (0.2, 0.35, 0.5, 0.8, 1.2):  # loading the keeper (after runpy compiled it), its record, the loop
        keeper = subprocess.Popen([sys.executable, "-c", started], cwd=workspace, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)  # forever: offline, it asks, then waits
        try:
            assert keeper.stderr.readline() == "up\n"
            time.sleep(delay)
            keeper.send_signal(signal.SIGINT)  # as Ctrl+C
            out, err = keeper.communicate(timeout=60)
        finally:  # a keeper that went on (the Ctrl+C lost) is not left to the next test
            keeper.kill()
            keeper.wait()
        assert keeper.returncode == 130 and "Traceback" not in err, (delay, err, out)


def test_ctrl_c_where_the_interpreter_ignores_exceptions_still_stops_the_start(workspace, env):
    """The attack on the moment above: Ctrl+C lands in code whose exceptions Python prints as ignored (a weakref's
    callback, as the import system's module locks run while modules load). A SystemExit raised there was lost, and
    the keeper went on into its loop after saying it had stopped; it must end there, with 130."""
    env["GEMINI_API_BASE"] = "http://127.0.0.1:9"
    envfile = workspace / "supervisor" / "envfile.py"  # a room loaded before the loop: a callback is run as it loads
    envfile.write_text("import sys as _sys, time as _time, weakref as _weakref\n_held = type('Held', (), {})()\n"
                       "_ref = _weakref.ref(_held, lambda _: (print('in a callback', file=_sys.stderr, flush=True), "
                       "_time.sleep(5)))\ndel _held\n" + envfile.read_text())
    keeper = subprocess.Popen([sys.executable, "fallback.py"], cwd=workspace, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert keeper.stderr.readline() == "in a callback\n"
        keeper.send_signal(signal.SIGINT)
        out, err = keeper.communicate(timeout=30)
    finally:
        keeper.kill()
        keeper.wait()
    assert keeper.returncode == 130 and "Traceback" not in err, (err, out)
    assert out == "interrupted: nothing is half done that the next start does not finish\n"


# --- the third pass: the goal given for a run, a read-only folder, --status's totals -------------------
def test_a_goal_file_of_the_folder_is_the_persons_never_shown_as_code_written_or_landed(workspace, env, gemini):
    goal = "# Ideas\n\nGrow a small todo list, todo.py.\n"
    (workspace / "ideas.md").write_text(goal)
    gemini.reply(api.answer([("ideas.md", "# Goal\n\nWhatever the model likes.\n"), ("a.py", "a = 1\n")]))
    gemini.reply(api.answer([("IDEAS.MD", "# Goal\n\nThe same, by another case.\n"), ("b.py", "b = 1\n")]))
    done = run_fallback(workspace, env, "--goal", "ideas.md", "--iterations", "2")
    assert done.returncode == 0, done.stderr
    assert (workspace / "ideas.md").read_text() == goal and not (workspace / "IDEAS.MD").exists()
    assert (workspace / "a.py").exists() and (workspace / "b.py").exists()  # the rest of each answer landed
    for request in gemini.requests:  # sent once, as the goal, never again as a file of the codebase
        assert json.dumps(request["body"]).count("Grow a small todo list") == 1
    log = (workspace / "iteration_log.md").read_text()
    assert "ideas.md" in log and "IDEAS.MD" in log  # each said as the keeper's, not landed
    index = json.loads((workspace / "backups" / "index.json").read_text())
    for entry in index["snapshots"]:  # no state kept holds it: going back never writes it
        assert "a.py" in snapshot_files(workspace, entry["id"]) or entry["id"] == "0001"
        assert "ideas.md" not in snapshot_files(workspace, entry["id"])


def read_only(root, env, *args):
    """fallback.py run with root mounted read-only (a user and mount namespace of its own: root too is refused)."""
    mount = f"mount --bind {root} {root} && mount -o remount,bind,ro {root} && exec \"$@\""
    return subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", mount, "sh", sys.executable,
                           "fallback.py", *args], cwd=root, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(not shutil.which("unshare") or subprocess.run(["unshare", "--user", "--map-root-user", "--mount",
                                                                   "true"], capture_output=True).returncode != 0,
                    reason="no user and mount namespaces here")
@pytest.mark.parametrize("args", [["--restore", "0001"], ["--reset"], ["--keep", "0001"], ["--materialise", "0001"],
                                  ["--iterations", "1"]])
def test_a_read_only_folder_is_one_line_and_78_for_every_command_that_writes(workspace, env, gemini, args):
    gemini.reply(api.answer([("a.py", "a = 1\n")]))
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    before = {p: p.stat().st_mtime_ns for p in workspace.rglob("*")}
    done = read_only(workspace, env, *args)
    assert done.returncode == 78, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert "Read-only file system" in done.stderr and "make the folder writable" in done.stderr
    assert {p: p.stat().st_mtime_ns for p in workspace.rglob("*")} == before
    assert len(gemini.requests) == 1  # the loop asked nothing


def test_status_gives_the_runs_totals_the_codebase_as_it_stands_and_what_landed_last_by_name(workspace, env, gemini):
    (workspace / "evaluate.py").write_text("import json\nprint(json.dumps({'score': len(open('notes.py').read())}))\n")
    gemini.reply(api.answer([("notes.py", "x = 1\n"), ("tests/test_notes.py", "def test_x():\n    assert True\n")]))
    gemini.reply(api.answer([("notes.py", "x = 1\nraise SystemExit(3)\n")]))
    gemini.reply(api.answer([("notes.py", "x = 2\n"), ("tests/test_more.py", "def test_y():\n    assert 1\n")]))
    assert run_fallback(workspace, env, "--iterations", "3").returncode == 0
    (workspace / "pending_tasks.md").write_text("# Pending tasks\n\n- [ ] " + "word " * 30 + "\n")
    out = run_fallback(workspace, env, "--status").stdout
    assert "run so far: 3 iteration(s): 2 landed, 1 rolled back; 3 request(s), 4,950 tokens" in out, out
    assert re.search(r"codebase: \d+ file\(s\), [\d,]+ line\(s\); tests passing: 2 \(iteration 3\); score 6 "
                     r"\(iteration 3\), best 6 \(iteration 1\)", out), out
    assert re.search(r"last landed: iteration 3 \(.* UTC\): notes\.py \+1 −1, tests/test_more\.py \(new\) \+2 −0", out)
    assert re.search(r"Iteration 1 — .* — landed: 2 file\(s\) changed \(score 6\) — notes\.py \(new\) \+1 −0", out)
    assert re.search(r"^  - (word ){18}word…$", out, re.M)  # a long task is cut at a word, and says so


@pytest.mark.parametrize("args, says", [(["--iteratoins", "3"], "did you mean --iterations for --iteratoins?"),
                                        (["--stauts"], "did you mean --status for --stauts?"),
                                        (["--timeuot=5"], "did you mean --timeout for --timeuot=5?")])
def test_a_misspelt_option_is_answered_with_the_one_it_resembles(workspace, env, gemini, args, says):
    done = run_fallback(workspace, env, *args)
    assert done.returncode == 2 and says in done.stderr and gemini.requests == [], done.stderr


def test_an_unknown_option_like_none_gets_no_guess_and_help_says_three_demo_iterations(workspace, env):
    done = run_fallback(workspace, env, "--bogus")  # the attack on the guess: nothing near it is offered
    assert done.returncode == 2 and "did you mean" not in done.stderr
    assert "watch three iterations" in run_fallback(workspace, env, "--help").stdout


def test_the_page_says_a_requests_time_in_ms_and_a_right_to_left_goal_reads_right_to_left(workspace, env, gemini):
    (workspace / "goal.md").write_text("# Goal\n\nאפליקציה קטנה לניהול פתקים, notes.py, עם בדיקות.\n")
    gemini.reply(api.answer([("a.py", "a = 1\n")]))
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    page = (workspace / "report.html").read_text()
    assert '<div class="goal" dir="auto">' in page
    assert "0.0 s</td>" not in page and re.search(r'<td class="num">\d+ ms</td>', page)


def test_a_mistyped_model_given_with_the_option_is_advised_on_the_option_not_dotenv(workspace, env, gemini):
    gemini.reply(api.model_gone("gemini-3.5-flahs"))
    done = run_fallback(workspace, env, "--iterations", "1", "--model", "gemini-3.5-flahs")
    said = done.stdout + done.stderr
    assert "gemini-3.5-flahs: not found" in said and "Give --model models this key can call" in said, said
    assert "in .env" not in said
    gemini.reply(api.model_gone("gemini-3.5-flahs"))  # the same name from .env: .env is named
    env["GEMINI_MODEL"] = "gemini-3.5-flahs"
    (workspace / "backups" / "quota.json").unlink()
    again = run_fallback(workspace, env, "--iterations", "1")
    assert "Set GEMINI_MODEL in .env to models this key can call" in again.stdout + again.stderr


def test_the_log_and_the_tasks_are_made_at_the_first_start_and_git_ignores_them(env, gemini, tmp_path):
    from test_fallback import a_fresh_clone
    clone = a_fresh_clone(tmp_path)
    assert not (clone / "pending_tasks.md").exists() and not (clone / "iteration_log.md").exists()
    ignored = subprocess.run(["git", "-C", str(REPO), "check-ignore", "--no-index", "iteration_log.md",
                              "pending_tasks.md"], capture_output=True, text=True)
    assert ignored.stdout.split() == ["iteration_log.md", "pending_tasks.md"]  # a clone stays clean after a run
    gemini.reply(api.answer([("a.py", "a = 1\n")]))
    assert run_fallback(clone, env, "--iterations", "1").returncode == 0
    assert (clone / "pending_tasks.md").read_text().startswith("# Pending tasks\n\nOpen tasks come first")
    assert "## Iteration 1 — " in (clone / "iteration_log.md").read_text()
    (clone / "pending_tasks.md").write_text("- [ ] mine\n")  # the attack: a person's file is never made anew
    gemini.reply(api.answer([("b.py", "b = 1\n")]))
    assert run_fallback(clone, env, "--iterations", "1").returncode == 0
    assert (clone / "pending_tasks.md").read_text().startswith("- [ ] mine\n")
