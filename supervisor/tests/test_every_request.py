"""Every request that may have reached a model is in the record, with its day and model, whatever ends its iteration:
Ctrl+C while the model answers or while the gate judges its answer, --timeout, kill -9. The record is the one count of
requests, written as each leaves: --status, the page and the closing line agree with it (`python fallback.py` in a
copy of the workspace).
"""
import json
import os
import sqlite3
import subprocess
import sys
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import fake_gemini as api
from conftest import requests_booked
from test_fallback import outcomes, processes_in, run_fallback, stopped_by_ctrl_c_when, wait_for

SLOW_TEST = ("tests/test_slow.py", "import time\n\n\ndef test_slow():\n    time.sleep(60)\n")


def today():
    return datetime.now(ZoneInfo("America/Los_Angeles")).date().isoformat()


def requests_in_record(root):
    """[(iteration, day, model, kind)] of every request the record holds."""
    with sqlite3.connect(root / "backups" / "record.sqlite") as db:
        return db.execute("SELECT iteration, day, model, kind FROM requests ORDER BY id").fetchall()


def booked_today(root):
    return requests_booked(root / "backups")


def said_everywhere(root, env, out):
    """The one request is said the same by the record, --status, the page and the closing line."""
    assert requests_in_record(root) == [(1, today(), "gemini-3.5-flash", requests_in_record(root)[0][3])]
    assert booked_today(root)["gemini-3.5-flash"]["requests"] == 1
    assert "; 1 request(s)" in out, out
    status = run_fallback(root, env, "--status").stdout
    assert "gemini-3.5-flash" in status and "1 request(s)" in status, status
    page = (root / "report.html").read_text()
    assert f"Pacific days, {today()} to {today()}" in page and "No request is in the ledger yet" not in page
    assert "Model: gemini-3.5-flash, 1 request(s)" in (root / "iteration_log.md").read_text()


def test_ctrl_c_while_the_model_answers_keeps_the_request_with_its_day(workspace, env, gemini):
    gemini.reply(api.answer([("slow.py", "x = 1\n")]), delay=30)
    out = stopped_by_ctrl_c_when(workspace, env, lambda: gemini.requests)
    assert outcomes(workspace) == ["stopped: interrupted (Ctrl+C)"]
    said_everywhere(workspace, env, out)


def cwd_of(pid):
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:  # it ended as /proc was read
        return ""


def test_ctrl_c_while_the_gate_judges_the_answer_keeps_the_request_and_its_exchange(workspace, env, gemini):
    gemini.reply(api.answer([SLOW_TEST]))
    gate = (str(workspace / ".seed" / "judged"), str(workspace / ".seed" / "tmp" / "keeper-here-"))  # where the
    # gate's check collects (the candidate laid out), then where it runs the slow test (a folder of the test's own)
    out = stopped_by_ctrl_c_when(workspace, env, lambda: any(cwd_of(pid).startswith(gate)
                                                             for pid in processes_in(workspace)))
    said_everywhere(workspace, env, out)
    assert requests_in_record(workspace)[0][3] == "answer"
    shown = run_fallback(workspace, env, "--show", "1").stdout
    assert "test_slow" in shown, shown  # the answer, as the model sent it


def test_a_seed_ended_by_timeout_while_the_model_answers_keeps_the_request_with_its_day(workspace, env, gemini):
    gemini.reply(api.answer([("slow.py", "x = 1\n")]), delay=6)  # under way still when the keeper stops waiting for it
    linger_for_one_second(workspace)
    done = run_fallback(workspace, env, "--iterations", "1", "--timeout", "2")
    assert done.returncode == 0, done.stderr
    said_everywhere(workspace, env, done.stdout)


def linger_for_one_second(root):
    """The keeper of this workspace waits one second, not ten, for a request under way when its run ended."""
    gateway = root / "supervisor" / "gateway" / "gateway.py"
    text = gateway.read_text()
    assert "\nLINGER = 10.0 " in text
    gateway.write_text(text.replace("\nLINGER = 10.0 ", "\nLINGER = 1.0 ", 1))


def test_a_request_cut_short_by_kill_9_is_in_the_row_the_next_start_writes(workspace, env, gemini):
    gemini.reply(api.answer([("slow.py", "x = 1\n")]), delay=30)
    keeper = subprocess.Popen([sys.executable, "fallback.py"], cwd=workspace, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: gemini.requests)
    finally:
        keeper.kill()  # kill -9: no row is written; the record booked the request as it left
        keeper.wait()
    assert booked_today(workspace)["gemini-3.5-flash"]["requests"] == 1
    gemini.reply(api.answer([("a.py", "a = 1\n")]))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0, done.stderr
    assert outcomes(workspace) == ["stopped: the keeper was killed during this iteration", "landed: 1 file(s) changed"]
    assert [row[:3] for row in requests_in_record(workspace)] == [(1, today(), "gemini-3.5-flash"),
                                                                 (2, today(), "gemini-3.5-flash")]
    assert booked_today(workspace)["gemini-3.5-flash"]["requests"] == 2


def test_the_usage_json_an_older_keeper_left_adds_what_the_record_lacks_once_and_nonsense_adds_none(workspace, env,
                                                                                                  gemini):
    """A keeper before 2026-12-06 booked each request first in backups/usage.json (its last seven Pacific days): one
    it booked there that the record lacks (cut short before its row) is in the next row, one that never reached the
    model as such; what is not a count of those days' requests adds none (a day of long ago, a count of 10**30);
    then the file is gone (the record is the one count)."""
    gemini.reply(api.answer([("a.py", "a = 1\n")]))
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    long_ago = (date.fromisoformat(today()) - timedelta(days=7)).isoformat()
    (workspace / "backups" / "usage.json").write_text(json.dumps({
        today(): {"gemini-3.5-flash": {"requests": 3, "kinds": {"network error": 1}}, "gemma-4": {"requests": "x"},
                  "other": 5},
        "not a day": {"gemini-3.5-flash": {"requests": 4}}, "1000-01-01": {"gemini-3.5-flash": {"requests": 10 ** 30}},
        long_ago: {"gemini-3.5-flash": {"requests": 5}}}))
    gemini.reply(api.answer([("b.py", "b = 1\n")]))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert not (workspace / "backups" / "usage.json").exists()
    assert [row[:3] for row in requests_in_record(workspace)] == [(1, today(), "gemini-3.5-flash")] + \
        [(2, today(), "gemini-3.5-flash")] * 3
    assert "gemini-3.5-flash, 2 request(s)" in (workspace / "iteration_log.md").read_text().split("## Iteration 2")[1]
    assert booked_today(workspace) == {"gemini-3.5-flash": {
        "requests": 4, "prompt": 2400, "output": 600, "thinking": 300,
        "kinds": {"answer": 2, "no answer": 1, "network error": 1}, "wasted": {}}}
    gemini.reply(api.answer([("c.py", "c = 1\n")]))
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    assert len(requests_in_record(workspace)) == 5  # folded once


def test_a_usage_json_that_is_no_file_is_left_alone_and_one_of_junk_migrated_counts_none(workspace, env, gemini):
    """The attacks on the one count: a folder named usage.json beside a record; and a workspace from before the
    record whose usage.json holds today's requests as counts and kinds as junk (a hand edit): the keeper runs,
    carrying only what counts."""
    (workspace / "backups").mkdir(exist_ok=True)
    (workspace / "backups" / "usage.json").write_text(json.dumps({today(): {"gemini-3.5-flash": {
        "requests": 2, "kinds": ["x"], "wasted": {"429 per day": "1"}, "prompt": -5}}}))
    gemini.reply(api.answer([("a.py", "a = 1\n")]))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    with sqlite3.connect(workspace / "backups" / "record.sqlite") as db:
        assert db.execute("SELECT day, model, requests, prompt, kinds, wasted FROM carried").fetchall() == [
            (today(), "gemini-3.5-flash", 2, 0, "{}", "{}")]
    assert not (workspace / "backups" / "usage.json").exists()  # kept in the record whole (its table `kept`)
    (workspace / "backups" / "usage.json").mkdir()
    gemini.reply(api.answer([("b.py", "b = 1\n")]))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert (workspace / "backups" / "usage.json").is_dir() and len(requests_in_record(workspace)) == 2
