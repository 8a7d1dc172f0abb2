"""Text from the model and its code, untrusted, through `python fallback.py` against the fake Gemini: read in bounded
time whatever its shape, and made storable (no lone surrogate, no NUL) where it enters, so the record, the log and
the page are written and `--report` works after it.
"""
import json
import sqlite3
import time

import fake_gemini as api
from test_fallback import outcomes, run_fallback

ODD = "\ud800 \udfff \x00"  # lone surrogates (JSON's "\ud800" escape decodes to one) and NUL


def test_an_answer_holding_lone_surrogates_and_nul_is_recorded_and_the_page_is_written(workspace, env, gemini):
    gemini.reply(api.answer([("notes.py", f"NOTES = []  # {ODD}\n")], tasks=[f"add notes {ODD}", "b", "c"]))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert outcomes(workspace) == ["landed: 1 file(s) changed"]
    assert (workspace / "notes.py").read_text() == "NOTES = []  # \ufffd \ufffd \ufffd\n"
    page = workspace / "report.html"
    assert "add notes \ufffd \ufffd \ufffd" in page.read_text(encoding="utf-8")
    page.unlink()
    again = run_fallback(workspace, env, "--report")
    assert again.returncode == 0 and page.is_file(), again.stdout + again.stderr
    with sqlite3.connect(workspace / "backups" / "record.sqlite") as db:
        [tasks] = db.execute("SELECT tasks FROM iterations").fetchone()
    assert json.loads(tasks)[0] == "add notes \ufffd \ufffd \ufffd"
    assert "add notes \ufffd \ufffd \ufffd" in (workspace / "iteration_log.md").read_text(encoding="utf-8")


def test_output_of_the_models_code_holding_nul_and_bytes_that_are_not_utf8_is_recorded_and_shown(workspace, env,
                                                                                                  gemini):
    failing = "import os\n\ndef test_out():\n    os.write(1, b'nul \\x00 byte \\xff end\\n')\n    assert False\n"
    gemini.reply(api.answer([("tests/test_out.py", failing)]))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert outcomes(workspace)[0].startswith("rolled back")
    assert run_fallback(workspace, env, "--report").returncode == 0
    with sqlite3.connect(workspace / "backups" / "record.sqlite") as db:
        [output] = db.execute("SELECT output FROM iterations").fetchone()
    assert "nul \ufffd byte \ufffd end" in output and "\x00" not in output


def test_an_answer_of_thousands_of_blank_lines_is_read_in_moments(workspace, env, gemini):
    """The lazy-file check once took minutes on a few hundred blank lines (cubic), the task lines the square of an
    answer's newlines: the keeper froze, its timeout and Ctrl+C with it."""
    blank = "x = 1\n" + " \n" * 3000 + "y = 2\n"
    gemini.reply(api.answer([("notes.py", blank), ("other.py", "z = 3\n")], tasks=["a", "b", "-\n" * 20000]))
    began = time.monotonic()
    done = run_fallback(workspace, env, "--iterations", "1", timeout=60)
    assert done.returncode == 0 and outcomes(workspace)[0].startswith("landed"), done.stdout + done.stderr
    assert time.monotonic() - began < 30


def test_a_plain_text_answer_and_a_servers_error_holding_lone_surrogates_and_nul_are_recorded(workspace, env, gemini):
    gemini.reply(api.error(400, "INVALID_ARGUMENT", f"odd request {ODD}"))
    gemini.reply(api.text_answer(f'- plain {ODD}\n<file path="notes.py">\nNOTES = []  # {ODD}\n</file>\n'))
    done = run_fallback(workspace, env, "--iterations", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    first, second = outcomes(workspace)
    assert "odd request \ufffd \ufffd \ufffd" in first and second == "landed: 1 file(s) changed", (first, second)
    assert (workspace / "notes.py").read_text() == "NOTES = []  # \ufffd \ufffd \ufffd\n"
    assert run_fallback(workspace, env, "--report").returncode == 0
    assert "plain \ufffd \ufffd \ufffd" in (workspace / "report.html").read_text(encoding="utf-8")
