"""The run's record, backups/record.sqlite, end to end through `python fallback.py` against the fake Gemini server:
a row per iteration and per request, each exchange byte for byte, --show N, the views without the log, an old
workspace migrated, kill -9 at random moments, and a score the person owns.

These are slow for the gate, so fallback.py keeps this file out of it.
"""
import json
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time

import fake_gemini as api
from conftest import load_keeper
from test_fallback import good_change, run_fallback, wait_for
from test_report import scripted_run

record, journal = load_keeper("record"), load_keeper("journal")
Outcome = load_keeper("kinds").Outcome
BROKEN = [("tests/test_broken.py", "def test_broken():\n    assert 1 == 2\n")]


def database(root):
    db = sqlite3.connect(root / "backups" / "record.sqlite")
    db.row_factory = sqlite3.Row
    return db


def figures(root, env, tmp_path, name):
    """What --status, the page and the export say, without the moments they were made at."""
    status = run_fallback(root, env, "--status").stdout
    run_fallback(root, env, "--report")
    page = re.sub(r"Made [^<]*UTC", "", (root / "report.html").read_text())
    run_fallback(root, env, "--export-git", str(tmp_path / name))
    history = subprocess.run(["git", "-C", str(tmp_path / name), "log", "--format=%an|%aI|%B", "refs/seed/landed"],
                             capture_output=True, text=True).stdout
    return status, page, history


def test_a_mixed_run_keeps_every_iteration_request_and_exchange_byte_for_byte(workspace, env, gemini, tmp_path):
    gemini.reply(api.per_minute("0.1s")).reply(api.answer(good_change("notes"), tasks=["Create notes.py"]))
    gemini.reply(api.answer([("seed.py", "import os\n# ... existing code ...\n")]))
    gemini.reply(api.answer(good_change("later") + BROKEN))
    gemini.reply(api.per_day())
    done = run_fallback(workspace, env, "--iterations", "4")
    assert done.returncode == 0, done.stderr
    db = database(workspace)
    rows = db.execute("SELECT * FROM iterations ORDER BY number").fetchall()
    assert [(r["number"], r["kind"]) for r in rows] == [(1, "landed"), (2, "no change"), (3, "rolled back"),
                                                        (4, "waiting")]
    assert json.loads(rows[0]["files"])[0][:2] == ["notes.py", "new"] and rows[0]["snapshot_after"]
    assert rows[0]["started"] and rows[0]["gate_seconds"] > 0
    requests = db.execute("SELECT * FROM requests ORDER BY id").fetchall()
    asked = [r for r in gemini.requests if r["body"]]
    assert len(requests) == len(asked) == 5 and [r["iteration"] for r in requests] == [1, 1, 2, 3, 4]
    assert [r["kind"] for r in requests] == ["429 per minute", "answer", "unusable answer", "answer", "429 per day"]
    assert [r["wasted"] for r in requests] == ["429 per minute", None, "unusable answer", "tests failed",
                                               "429 per day"]
    assert requests[1]["prompt_tokens"] == 1200 and requests[1]["latency"] > 0
    for request, sent in zip(requests, asked):
        kept = record.exchange(workspace, request["id"])
        assert kept["prompt"] == sent["raw"] and kept["answer"] == sent["sent"]
    assert json.loads(record.exchange(workspace, requests[1]["id"])["cleaned"])["candidates"]
    log = (workspace / "iteration_log.md").read_text()
    assert all(journal.section_of(row) in log for row in record.iterations(workspace))
    shown = run_fallback(workspace, env, "--show", "1")
    assert shown.returncode == 0 and "Iteration 1 — " in shown.stdout and "landed: 2 file(s) changed" in shown.stdout
    assert gemini.prompts()[1].splitlines()[-1] in shown.stdout and "Create notes.py" in shown.stdout
    assert "--- the answer as cleaned for the seed" in shown.stdout and "=== what came of it: landed" in shown.stdout
    missing = run_fallback(workspace, env, "--show", "99")
    assert missing.returncode == 2 and "no iteration 99" in missing.stderr and "Traceback" not in missing.stderr
    before = figures(workspace, env, tmp_path, "first")
    (workspace / "iteration_log.md").write_text("")
    assert figures(workspace, env, tmp_path, "second") == before
    assert "iterations: 4 recorded" in before[0] and "Create notes.py" in before[2]


def test_an_old_workspace_is_brought_into_the_record_with_every_section_and_count(workspace, env, gemini):
    old = scripted_run(workspace / "old")  # today's version's files: log sections, usage.json, snapshots
    for name in ("iteration_log.md",):
        (workspace / name).write_text((old.root / name).read_text())
    (workspace / "backups").mkdir()
    (workspace / "backups" / "usage.json").write_text(json.dumps(old.ledger))
    (workspace / "backups" / "quota.json").write_text(json.dumps({"gemini-3.5-flash": {"recent": []}}))
    gemini.reply(api.answer(good_change("notes")))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0, done.stderr
    rows = record.iterations(workspace)
    assert [r["number"] for r in rows] == [1, 2, 3, 4]
    old_log = (old.root / "iteration_log.md").read_text()
    assert "".join(journal.section_of(row) for row in rows[:3]) == old_log.split("\n", 1)[1]
    assert (workspace / "iteration_log.md").read_text().startswith(old_log)
    assert rows[1]["restored"] == "0002" and rows[0]["files"][0] == ["notes.py", "new", 5, 0]
    ledger = record.ledger(workspace)
    for day, models in old.ledger.items():
        for model, use in models.items():
            mine = ledger[day][model]
            assert all(mine[key] >= use[key] for key in ("requests", "prompt", "output", "thinking"))
    assert sum(u["requests"] for m in ledger.values() for u in m.values()) == \
        sum(u["requests"] for m in old.ledger.values() for u in m.values()) + 1
    kept = dict(database(workspace).execute("SELECT name, content FROM kept").fetchall())
    assert json.loads(kept["quota.json"]) == {"gemini-3.5-flash": {"recent": []}} and kept["iteration_log.md"]


def agrees_with_the_folder(root):
    """PRAGMA integrity_check passes, and each landed snapshot and each landed row go together."""
    db = database(root)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    rows = db.execute("SELECT number, kind, snapshot_after FROM iterations").fetchall()
    index = json.loads((root / "backups" / "index.json").read_text())
    ids = {e["id"] for e in index["snapshots"]}
    landed_rows = {r["number"]: r["snapshot_after"] for r in rows if r["kind"] == "landed"}
    assert all(after in ids for after in landed_rows.values()), (landed_rows, ids)
    for entry in index["snapshots"]:
        if entry["kind"] == "landed":
            assert landed_rows.get(entry["iteration"]) == entry["id"], (entry, landed_rows)
    logged = {int(n) for n in re.findall(r"^## Iteration (\d+) ", (root / "iteration_log.md").read_text(), re.M)}
    assert {r["number"] for r in rows} <= logged


def kill_at_random_moments(root, env, gemini, kills, seed=19):
    """Start the keeper, kill -9 it at a random moment, check the record, again `kills` times."""
    rng = random.Random(seed)
    for n in range(kills):
        for k in range(4):
            gemini.reply(api.answer(good_change(f"m{n}_{k}")), delay=rng.uniform(0, 0.3))
        keeper = subprocess.Popen([sys.executable, "fallback.py", "--delay", "0"], cwd=root, env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: (root / "backups" / "record.sqlite").exists())  # a machine under load starts it late
        time.sleep(rng.uniform(0.2, 3.2))
        keeper.send_signal(signal.SIGKILL)
        keeper.wait()
        assert database(root).execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        gemini.replies.clear()
    gemini.reply(api.answer(good_change("last")))
    done = run_fallback(root, env, "--iterations", "1")  # its start finishes what the last kill cut short
    assert done.returncode == 0, done.stderr
    agrees_with_the_folder(root)


def test_kill_9_at_random_moments_leaves_the_record_whole_and_agreeing(workspace, env, gemini):
    kill_at_random_moments(workspace, env, gemini, kills=3)


def test_a_keeper_killed_after_a_landing_began_and_before_its_run_was_over_keeps_the_landing_and_its_row(
        workspace, env, gemini):
    """Killed in the landing, both markers are there: the landing's (settling.json) and the run's (iteration.json).
    The next start finishes the landing and writes its row; the run's marker must not then write a row saying the
    iteration was stopped in its place (it did: under load, 3 runs in some 60 of the test above lost a landed row)."""
    gemini.reply(api.answer(good_change("first")))
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    [landed] = [e for e in json.loads((workspace / "backups" / "index.json").read_text())["snapshots"]
                if e["kind"] == "landed"]
    with database(workspace) as db:  # as the kill left it: the landing done, its row not yet written
        db.execute("DELETE FROM iterations WHERE number = 1")
    db.close()
    for marker in ("settling.json", "iteration.json"):
        (workspace / "backups" / marker).write_text(json.dumps({"iteration": 1, "start": "0001"}))
    gemini.reply(api.answer(good_change("second")))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0, done.stderr
    rows = database(workspace).execute("SELECT number, kind, snapshot_after FROM iterations").fetchall()
    assert [tuple(row) for row in rows][:1] == [(1, "landed", landed["id"])] and rows[1]["kind"] == "landed"
    agrees_with_the_folder(workspace)


def test_the_model_cannot_write_the_evaluator(workspace, env, gemini):
    gemini.reply(api.answer(good_change("notes") + [("evaluate.py", "print('{\"score\": 100}')\n")]))
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    assert not (workspace / "evaluate.py").exists()
    [row] = record.iterations(workspace)
    assert "evaluate.py: protected" in row["refused"] and row["kind"] == "landed"  # the seed is told
    (workspace / "seed.py").write_text(CHEATING_SEED)  # a seed that writes it anyway: the keeper does not land it
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    assert not (workspace / "evaluate.py").exists()
    assert record.iterations(workspace)[-1]["not_landed"] == ["evaluate.py"]


CHEATING_SEED = """import json, pathlib
pathlib.Path('evaluate.py').write_text('print(json.dumps({"score": 100}))')
pathlib.Path('cheat.py').write_text('x = 1')
pathlib.Path('.seed').mkdir(exist_ok=True)
pathlib.Path('.seed/record.json').write_text(json.dumps({'outcome': 'applied'}))
"""


EVALUATOR = """import json, pathlib
here = pathlib.Path('.')
print('scoring')
print(json.dumps({"score": len(list(here.glob('f*.py'))) - 5 * (here / 'bad.py').exists(), "files": 1}))
"""


def test_the_score_is_recorded_charted_and_with_the_ratchet_a_fall_is_rolled_back(workspace, env, gemini):
    (workspace / "evaluate.py").write_text(EVALUATOR)
    env["SEED_RATCHET"] = "score"
    gemini.reply(api.answer(good_change("f1"))).reply(api.answer(good_change("f2") + [("bad.py", "x = 1\n")]))
    done = run_fallback(workspace, env, "--iterations", "2")
    assert done.returncode == 0, done.stderr
    first, second = record.iterations(workspace)
    assert first["score"] == 1 and first["scores"] == {"score": 1, "files": 1} and ("Score", "1 (files 1)") in \
        journal.facts_of(first)
    assert second["kind"] == "rolled back" and second["outcome"] == "rolled back: score fell from 1 to -3"
    assert not (workspace / "bad.py").exists()
    assert "score fell from 1 to -3" in (workspace / "pending_tasks.md").read_text()
    assert "#1 landed: " in done.stdout and "score 1)" in done.stdout and "- Score: 1 (files 1)" in \
        (workspace / "iteration_log.md").read_text()
    assert "Score (evaluate.py): <b>1</b>" in (workspace / "report.html").read_text()
    (workspace / "evaluate.py").write_text("raise SystemExit(3)\n")  # the person's evaluator breaks
    gemini.reply(api.answer(good_change("f3")))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert "evaluate.py failed (exit 3) at the last known-good state too" in done.stdout
    assert record.iterations(workspace)[-1]["kind"] == "landed" and "evaluate.py" not in \
        (workspace / "pending_tasks.md").read_text()


def oracle(db, start, width):
    """The summary counted the slow way, straight from the rows, in runs of `width` iterations from `start`."""
    rows = db.execute("SELECT number, kind, score FROM iterations ORDER BY number").fetchall()
    ranks = {kind.value: n for n, kind in enumerate(Outcome)}
    runs = {}
    for number, kind, score in rows:
        run = runs.setdefault((number - start) // width, {"best": len(Outcome) - 1, "landed": None, "rolled": None, "scored": None})
        run["best"] = min(run["best"], ranks[kind])
        if kind == "landed" and run["landed"] is None:
            run["landed"] = number
        if kind == "rolled back" and run["rolled"] is None:
            run["rolled"] = number
        if kind == "landed" and score is not None:
            run["scored"] = (number, score)
    ordered = [runs[key] for key in sorted(runs)]
    kinds = {}
    for _, kind, _ in rows:
        kinds[kind] = kinds.get(kind, 0) + 1
    return {"total": len(rows), "kinds": kinds, "low": rows[0][0], "high": rows[-1][0],
            "strip": [run["best"] for run in ordered],
            "marks": {"landed": [run["landed"] for run in ordered if run["landed"] is not None],
                      "rolled back": [run["rolled"] for run in ordered if run["rolled"] is not None]},
            "scores": [run["scored"] for run in ordered if run["scored"]]}


def test_the_summary_and_ledger_count_what_the_rows_say_however_they_were_written(tmp_path):
    """The page's figures of the whole history must agree with the rows, a rewritten row and gaps in the numbers
    included, and a record written by the keeper that kept running counts beside the rows must read the same."""
    rng, book = random.Random(7), record.Writer(record.path_of(tmp_path))
    numbers = sorted(rng.sample(range(1, 5_000), 2_500))
    kinds = [kind.value for kind in Outcome]

    def write(number):
        kind = rng.choice(kinds)
        score = rng.random() if kind == "landed" and rng.random() < .5 else None
        calls = [{"day": f"2026-11-{rng.randint(1, 3):02}", "model": rng.choice(["a", "b"]), "kind": "answer",
                  "tokens": {"prompt": 10, "output": 1, "thinking": 0}}]
        book.write({"number": number, "kind": kind, "outcome": kind, "score": score}, calls, rng.choice([None, "x"]))
    for number in numbers + rng.sample(numbers, 300):  # 300 written again, as another outcome
        write(number)
    db = sqlite3.connect(record.path_of(tmp_path))
    summaries = {cells: record.summary(tmp_path, cells) for cells in (7, 60, 2_000, 10_000)}
    for cells, found in summaries.items():
        assert len(found["strip"]) <= cells and found["width"] >= (found["high"] - found["low"] + 1) / cells
        assert {key: found[key] for key in oracle(db, 0, 1)} == oracle(db, found["start"], found["width"]), cells
    requests = db.execute("SELECT day, model, count(*), sum(prompt_tokens) FROM requests GROUP BY 1, 2").fetchall()
    wasted = db.execute("SELECT day, model, count(*) FROM requests WHERE wasted = 'x' GROUP BY 1, 2").fetchall()
    ledger = record.ledger(tmp_path)
    assert sorted((d, m, u["requests"], u["prompt"]) for d, models in ledger.items() for m, u in models.items()) \
        == sorted(requests)
    assert sorted((d, m, u["wasted"]["x"]) for d, models in ledger.items() for m, u in models.items()) == sorted(wasted)
    db.executescript(PREVIOUS_COUNTS)  # as the keeper before 2026-12-06 left a record: its counts, gone stale
    db.close()
    assert {cells: record.summary(tmp_path, cells) for cells in summaries} == summaries  # read from the rows
    assert record.ledger(tmp_path) == ledger and record.count(tmp_path) == summaries[7]["total"]
    record.Writer(record.path_of(tmp_path)).write({"number": 9_999, "kind": "landed", "outcome": "landed"})
    db = sqlite3.connect(record.path_of(tmp_path))
    assert db.execute("SELECT name FROM sqlite_master WHERE name IN ('tallies', 'daily', 'cells0')").fetchall() == []
    assert db.execute("PRAGMA user_version").fetchone()[0] == 0  # dropped once, at the start
    db.close()
    again = record.summary(tmp_path, 10_000)  # and the writer goes on
    assert again["total"] == summaries[10_000]["total"] + 1 and again["high"] == 9_999


PREVIOUS_COUNTS = """
CREATE TABLE tallies (level INTEGER, cell INTEGER, best INTEGER, landed INTEGER, rolled INTEGER, scored INTEGER,
  k0 INTEGER, lo INTEGER, hi INTEGER, PRIMARY KEY (level, cell)) WITHOUT ROWID;
CREATE TABLE daily (day TEXT NOT NULL, model TEXT NOT NULL, kind TEXT NOT NULL, wasted TEXT NOT NULL,
  requests INTEGER, prompt INTEGER, output INTEGER, thinking INTEGER, PRIMARY KEY (day, model, kind, wasted))
  WITHOUT ROWID;
CREATE VIEW cells0 AS SELECT number AS cell FROM iterations;
INSERT INTO tallies VALUES (21, 0, 0, 1, NULL, NULL, 3, 1, 3);
INSERT INTO daily VALUES ('2026-11-01', 'a', 'answer', '', 5, 50, 5, 0);
PRAGMA user_version = 2;
"""


def test_a_long_log_is_set_aside_and_begun_again_and_a_kill_in_between_costs_nothing(workspace, env, gemini):
    old = "".join(f"\n## Iteration {n} — 2026-01-01 00:00:00 UTC — no change\n\n- Files: none changed\n"
                  for n in range(1, 16_001))  # over 1 MB: an old workspace's log, brought into the record at start
    (workspace / "iteration_log.md").write_text("# Iteration log\n" + old)
    gemini.reply(api.answer(good_change("one"))).reply(api.answer(good_change("two")))
    done = run_fallback(workspace, {**env, "SEED_LOG_MB": "1"}, "--iterations", "2")
    assert done.returncode == 0, done.stderr
    aside = workspace / "backups" / "logs" / "iteration_log-1-16000.md"
    assert aside.read_text() == "# Iteration log\n" + old  # every byte, set aside whole
    log = (workspace / "iteration_log.md").read_text()
    assert log.startswith("# Iteration log") and "Iterations up to 16000 are in backups/logs/" in log
    assert re.findall(r"^## Iteration (\d+) ", log, re.M) == ["16001", "16002"] and len(log) < 10_000
    shown = run_fallback(workspace, env, "--show", "5")
    assert shown.returncode == 0 and "Iteration 5 — " in shown.stdout  # the record holds what was set aside
    (workspace / "iteration_log.md").write_text(log.split("\n## Iteration")[0] + "\n")  # killed just after setting
    gemini.reply(api.answer(good_change("three")))                                      # aside: no section yet
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    again = (workspace / "iteration_log.md").read_text()
    assert re.findall(r"^## Iteration (\d+) ", again, re.M) == ["16001", "16002", "16003"]  # caught up, no more
    assert len(list(aside.parent.iterdir())) == 1


def brute_force_agrees(root):
    """The summary, count and ledger the record gives, against the rows counted the slow way."""
    db = sqlite3.connect(record.path_of(root))
    found = record.summary(root, 7)
    assert {key: found[key] for key in oracle(db, 0, 1)} == oracle(db, found["start"], found["width"])
    assert record.count(root) == db.execute("SELECT count(*) FROM iterations").fetchone()[0]
    booked = sum(use["requests"] for models in record.ledger(root).values() for use in models.values())
    assert booked == db.execute("SELECT (SELECT count(*) FROM requests) + (SELECT coalesce(sum(requests), 0) "
                                "FROM carried)").fetchone()[0]  # usage.json's counts from before the record too
    db.close()


def test_huge_gapped_and_zero_numbers_are_counted_as_the_rows_say(tmp_path):
    book = record.Writer(record.path_of(tmp_path))
    numbers = [0, 1, 7, 8, 9, 2**21 - 1, 2**21, 2**24 + 3, 10**12, 10**12 + 1, 2**62, 2**63 - 1]
    for n, number in enumerate(numbers):
        kind = [kind.value for kind in Outcome][n % len(Outcome)]
        book.write({"number": number, "kind": kind, "outcome": kind, "score": n if kind == "landed" else None})
    for cells in (1, 3, 40, 2_000):
        db = sqlite3.connect(record.path_of(tmp_path))
        found = record.summary(tmp_path, cells)
        assert len(found["strip"]) <= cells
        assert {key: found[key] for key in oracle(db, 0, 1)} == oracle(db, found["start"], found["width"]), cells
        db.close()
    assert record.count(tmp_path) == len(numbers)


def old_log(sections, output=""):
    """An old workspace's iteration_log.md of `sections` sections, the last with `output` as its last output."""
    text = "# Iteration log\n" + "".join(f"\n## Iteration {n} — 2026-01-01 00:00:00 UTC — no change\n\n"
                                         "- Files: none changed\n" for n in range(1, sections + 1))
    return text + (f"- Last output:\n\n      {output}\n" if output else "")


def headings(path):
    return [int(n) for n in re.findall(r"^## Iteration (\d+) ", path.read_text(), re.M)]


def test_a_last_section_longer_than_the_tail_read_is_not_logged_again(workspace, env, gemini):
    """A seed that prints one long line (up to OUTPUT_TAIL bytes are kept) makes a section past 64 KB: the catch-up at
    the next start must still find the last section logged, and not write the whole history again."""
    (workspace / "iteration_log.md").write_text(old_log(3, "x" * 70_000))
    gemini.reply(api.answer(good_change("one")))
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    assert headings(workspace / "iteration_log.md") == [1, 2, 3, 4]


def test_a_kill_between_the_two_moves_of_a_set_aside_loses_no_section(workspace, env, gemini):
    """Killed after the log was moved into backups/logs/ and before the one begun again took its place: the next start
    puts it in place, with its line saying where the rest is, and logs the iteration the kill cut off."""
    (workspace / "iteration_log.md").write_text(old_log(5))
    gemini.reply(api.answer(good_change("one"))).reply(api.answer(good_change("two")))
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    log, aside = workspace / "iteration_log.md", workspace / "backups" / "logs"
    aside.mkdir()
    (aside / "iteration_log-1-5.md").write_text(old_log(5))  # the state set_aside_log leaves at a kill between
    (aside / "next.md").write_text(journal.LOG_HEAD + "\nIterations up to 5 are in backups/logs/ (iteration_log-1-5.md"
                                   " and up to 3 before it); any iteration in full: python fallback.py --show N\n")
    log.unlink()
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    assert "Iterations up to 5 are in backups/logs/" in log.read_text() and headings(log) == [6, 7]  # not all again


def test_a_reader_counts_what_is_committed_while_the_keeper_holds_a_write(tmp_path):
    """--status and the page while the keeper is in the middle of a write: what is committed is counted, and nothing
    waits or fails."""
    book = record.Writer(record.path_of(tmp_path))
    for number in range(1, 30):
        book.write({"number": number, "kind": "landed", "outcome": "landed", "score": number},
                   [{"day": "2026-11-01", "model": "a", "kind": "answer", "tokens": {"prompt": 1}}])
    book.db.execute("BEGIN IMMEDIATE")  # the keeper's write under way, not yet committed
    book.db.execute("INSERT INTO iterations (number, kind, outcome) VALUES (30, 'stopped', 'stopped')")
    started = time.monotonic()
    assert record.count(tmp_path) == 29 and record.summary(tmp_path)["high"] == 29
    assert record.ledger(tmp_path)["2026-11-01"]["a"]["requests"] == 29
    assert time.monotonic() - started < 5
    book.db.execute("COMMIT")
    brute_force_agrees(tmp_path)


def test_a_record_made_anew_after_the_log_was_set_aside_brings_in_the_logs_set_aside(workspace, env, gemini):
    """A damaged record is moved aside, as the keeper's message says, and "made anew from iteration_log.md": once the
    log has been set aside, the iterations in backups/logs/ must come back too, and not only the log's last few."""
    (workspace / "iteration_log.md").write_text(old_log(16_000))
    gemini.reply(api.answer(good_change("one"))).reply(api.answer(good_change("two")))
    assert run_fallback(workspace, {**env, "SEED_LOG_MB": "1"}, "--iterations", "1").returncode == 0
    assert (workspace / "backups" / "logs" / "iteration_log-1-16000.md").exists()
    for path in (workspace / "backups").glob("record.sqlite*"):  # moved aside
        path.unlink()
    assert run_fallback(workspace, env, "--iterations", "1").returncode == 0
    assert record.count(workspace) == 16_002 and record.has_row(workspace, 5)
    brute_force_agrees(workspace)


def test_token_counts_past_what_sqlite_sums_do_not_stop_the_keeper(tmp_path):
    """A model server of one's own that reports absurd token counts (any int is taken): the requests are recorded,
    and summing them for the ledger must not fail with SQLite's 'integer overflow', which would stop the keeper
    (its start reads the ledger) and --status on that record for good."""
    book = record.Writer(record.path_of(tmp_path))
    huge = {"prompt": 2**62, "output": 2**62, "thinking": 1}
    book.write({"number": 1, "kind": "landed", "outcome": "landed"},
               [{"day": "2026-11-01", "model": "a", "kind": "answer", "tokens": huge}] * 3)
    assert record.ledger(tmp_path)["2026-11-01"]["a"]["prompt"] >= 2**63 - 1
    record.Writer(record.path_of(tmp_path)).db.close()  # the next start
    use = record.ledger(tmp_path)["2026-11-01"]["a"]
    assert use["requests"] == 3 and use["prompt"] >= 2**63 - 1 and use["thinking"] == 3 and record.count(tmp_path) == 1


def test_a_log_heading_with_a_number_past_any_iteration_is_not_taken_for_one(workspace, env, gemini):
    (workspace / "iteration_log.md").write_text("# Iteration log\n\n## Iteration 123456789012345678901 — 2026-01-01 "
                                                "00:00:00 UTC — no change\n")  # past SQLite's integers: typed by hand
    gemini.reply(api.answer(good_change("one")))
    done = run_fallback(workspace, env, "--iterations", "1")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert re.findall(r"^## Iteration (\d+) ", (workspace / "iteration_log.md").read_text(), re.M)[-1] == "1"


def test_each_prompt_kept_as_a_change_from_the_one_before_comes_back_byte_for_byte():
    """pack/unpack with diff, over prompts edited at random (lines added, cut, changed, at the start, middle and
    end; empty ones; a line break JSON-escaped): what is read back is what was written."""
    rnd = random.Random(7)
    lines = [f"line {n}\n".encode() for n in range(40)] + [b"", b"x", b'"a\\nb"\\n', "é\n".encode()]
    for _ in range(2000):
        base = b"".join(rnd.choice(lines) for _ in range(rnd.randint(0, 30)))
        data = bytearray(base)
        for _ in range(rnd.randint(0, 4)):
            at = rnd.choice([0, len(data), rnd.randint(0, len(data))])
            data[at:at + rnd.randint(0, 20)] = rnd.choice(lines)
        assert record.unpack(record.pack(bytes(data), base, diff=True), base) == bytes(data)
