"""The experiment: a run replayed offline from its record, forked at an iteration, compared with its forks.

Each runs `python fallback.py` in copies of the workspace against the fake Gemini server. One run of six
iterations is recorded once for the module (a landing, a rollback, its fix, a no-change, two landings) and only
read by the tests that say it stays as it was; a test that alters it works on a copy.
"""
import contextlib
import hashlib
import json
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

import fake_gemini as api
from conftest import fresh_workspace, keeper, load_keeper, user_env

pytestmark = pytest.mark.xdist_group("test_experiment")  # its shared runs are made once: all its tests in one worker

DEMO = json.loads((Path(__file__).resolve().parents[1] / "demo.json").read_text())  # the demo's goal and answers
FIND = "def find(notes, word):\n    return [n for n in notes if word in n]\n"
FIND_ANY_CASE = "def find(notes, word):\n    return [n for n in notes if word.lower() in n.lower()]\n"
SIX = DEMO["answers"] + [{"tasks": ["Rest"], "files": []},                                    # 4 no change
                         {"tasks": ["Search"], "files": [{"path": "search.py", "content": FIND}]},  # 5 lands
                         {"tasks": ["Any case"], "files": [{"path": "search.py", "content": FIND_ANY_CASE}]}]  # 6
OUTCOMES = ["landed: 2 file(s) changed", "rolled back: tests failed", "landed: 2 file(s) changed",
            "no change: no file to write: the answer held 1 task(s) and 0 file(s)",
            "landed: 1 file(s) changed", "landed: 1 file(s) changed"]  # the demo's three, then three more
FIXED = next(f["content"] for f in DEMO["answers"][2]["files"] if f["path"] == "notes.py")  # the demo's fix


def fallback(root, env, *args, timeout=180):
    """`python fallback.py ARGS`, in this process (conftest.keeper)."""
    return keeper(root, env, *args, timeout=timeout)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """The demo's run and three iterations more, recorded once: (its folder, the fake server it asked, which stays
    up, and report.html as it was while the keeper ran)."""
    root = fresh_workspace(tmp_path_factory.mktemp("recorded") / "workspace")
    (root / "goal.md").write_text(DEMO["goal"])
    fake, seen = api.FakeGemini(), {}
    for n, answer in enumerate(SIX):
        hook = (lambda request: seen.update(page=(root / "report.html").read_text())) if n == 1 else None
        fake.reply(api.text_answer(json.dumps(answer)), hook=hook)
    done = fallback(root, user_env(fake), "--iterations", "6", "--delay", "0")
    assert done.returncode == 0, done.stderr
    assert re.findall(r"^## Iteration \d+ — .* — (.*)$", (root / "iteration_log.md").read_text(), re.M) == OUTCOMES
    yield root, fake, seen["page"]
    fake.close()


def tree(root):
    """{path: sha256} of every file under root, and the folders, as a listing shows them."""
    return {path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file()
            else "folder" for path in sorted(root.rglob("*"))}


def iteration_lines(output):
    return [line for line in output.splitlines() if line.startswith("iteration ")]


def alter_answer(root, number, old, new):
    """Change the bytes of the answer the record holds for an iteration, as someone editing the record would."""
    record = load_keeper("record")
    db = sqlite3.connect(root / "backups" / "record.sqlite")
    (request,) = db.execute("SELECT id FROM requests WHERE iteration = ?", (number,)).fetchone()
    found = record.exchange_from(db, request)
    answer = found["answer"].replace(old.encode(), new.encode())
    assert answer != found["answer"]
    db.execute("UPDATE exchanges SET answer = ?, cleaned = ? WHERE request = ?",
               (record.pack(answer, found["prompt"]), record.pack(found["cleaned"], answer), request))
    db.commit()
    db.close()


def test_a_recorded_run_replays_the_same_offline_and_leaves_its_folder_as_it_was(recorded):
    root, fake = recorded[:2]
    before, asked = tree(root), len(fake.requests)
    done = fallback(root, user_env(fake), "--replay")
    assert done.returncode == 0, done.stdout + done.stderr
    assert iteration_lines(done.stdout) == [f"iteration {n}: the same ({outcome})"
                                            for n, outcome in enumerate(OUTCOMES, 1)]
    assert done.stdout.splitlines()[-1].startswith("all 6 iteration(s) replayed the same (0 skipped)")
    assert len(done.stdout.splitlines()) == 7
    assert tree(root) == before  # not a byte changed, and no file added (not even SQLite's -wal and -shm)
    assert len(fake.requests) == asked  # every answer came from the record


def test_a_stored_answer_altered_replays_with_exit_1_naming_its_iteration(recorded, tmp_path):
    copy = tmp_path / "workspace"
    shutil.copytree(recorded[0], copy, symlinks=True)
    alter_answer(copy, 5, "word in n", "word not in n")
    db = sqlite3.connect(copy / "backups" / "record.sqlite")  # and a record that would loosen the confinement
    db.execute("UPDATE runs SET settings = ?", (json.dumps({"--timeout": 900, "SEED_NAMESPACES": "0"}),))
    db.commit()
    db.close()
    done = fallback(copy, user_env(recorded[1]), "--replay")
    assert done.returncode == 1, done.stdout + done.stderr
    lines = iteration_lines(done.stdout)
    assert lines[:4] == [f"iteration {n}: the same ({outcome})" for n, outcome in enumerate(OUTCOMES[:4], 1)]
    assert lines[4].startswith("iteration 5: differs: the state it left (search.py)")
    assert re.search(r"iteration\(s\) differ, iteration 5 first; the replay is in (\S+)", done.stdout.splitlines()[-1])
    kept = Path(re.search(r"the replay is in (\S+)", done.stdout)[1])
    with contextlib.closing(sqlite3.connect(kept / "backups" / "record.sqlite")) as db:  # closed before the rmtree
        settings = [json.loads(row[0]) for row in db.execute("SELECT settings FROM runs")]
    assert settings and all("SEED_NAMESPACES" not in found for found in settings)  # confinement is never a record's
    shutil.rmtree(kept.parent)


def test_a_replay_refuses_a_store_that_names_a_path_outside_a_codebase(recorded, tmp_path):
    copy = tmp_path / "workspace"
    shutil.copytree(recorded[0], copy, symlinks=True)
    for forged in ("../escaped.py", "fallback.py"):
        listing = json.dumps({"notes.py": "0" * 64, forged: "0" * 64}, sort_keys=True).encode()
        sha = hashlib.sha256(listing).hexdigest()
        (copy / "backups" / "objects" / sha[:2]).mkdir(exist_ok=True)
        (copy / "backups" / "objects" / sha[:2] / sha[2:]).write_bytes(listing)
        (copy / "backups" / "0001.json").write_text(json.dumps({"": sha}))
        done = fallback(copy, user_env(recorded[1]), "--replay")
        assert done.returncode == 78 and done.stdout == ""
        assert done.stderr.count("\n") == 1 and f"lists {forged!r}, which is no file of a codebase" in done.stderr
    assert not (tmp_path / "escaped.py").exists()


@pytest.fixture(scope="module")
def forked(recorded, tmp_path_factory):
    """The recorded run forked after iteration 3 and run on one iteration with another model: (its folder, the
    output of the fork, of its run, and the recorded folder's tree before the fork)."""
    root, fake = recorded[:2]
    target, before = tmp_path_factory.mktemp("forks") / "fork", tree(root)
    made = fallback(root, user_env(fake), "--fork", "3", str(target))
    assert made.returncode == 0, made.stderr
    after = tree(root)
    fake.reply(api.answer([("tags.py", "def tags(text):\n    return [w for w in text.split() if w[:1] == '#']\n")],
                          model="gemini-2.5-flash-lite"))
    ran = fallback(target, user_env(fake), "--iterations", "1", "--delay", "0", "--model", "gemini-2.5-flash-lite")
    return target, made, ran, before, after


def codebase(root):
    snapshots = load_keeper("snapshots")
    return {rel: (root / rel).read_bytes() for rel, _ in snapshots.codebase_files(root)}


def state(root, sid):
    """{path: bytes} of a snapshot of root's store."""
    store = load_keeper("snapshots").Reader(root)
    return {rel: store.object_path(sha).read_bytes() for rel, sha in store.files_of({"id": sid}).items()}


def test_a_fork_holds_the_state_after_its_iteration_and_names_its_parent(recorded, forked, tmp_path):
    root, target, (made, _, before, after) = recorded[0], forked[0], forked[1:]
    assert made.returncode == 0, made.stderr
    assert after == before  # the folder is not changed by a fork
    landed = next(e for e in json.loads((root / "backups" / "index.json").read_text())["snapshots"]
                  if e["kind"] == "landed" and e["iteration"] == 3)
    third = state(root, landed["id"])
    assert third["notes.py"].decode() == FIXED and "search.py" not in third
    assert state(target, "0001") == third
    status = fallback(target, user_env(recorded[1]), "--status").stdout
    identity = load_keeper("record").identity(root)
    assert f"forked from {root} (run {identity['id']}) after iteration 3" in status
    by_id = tmp_path / "by-id"
    assert fallback(root, user_env(recorded[1]), "--fork", landed["id"], str(by_id)).returncode == 0
    assert state(by_id, "0001") == third and codebase(by_id) == third
    shared = [(root / "backups" / "objects" / p.relative_to(by_id / "backups" / "objects")).stat().st_ino
              == p.stat().st_ino for p in (by_id / "backups" / "objects").rglob("*") if p.is_file()]
    assert shared and all(shared)  # the store's objects are the folder's own, linked: no byte stored twice


def test_a_fork_runs_on_from_its_iteration_with_another_model_and_lands(forked):
    target, ran = forked[0], forked[2]
    assert ran.returncode == 0, ran.stderr
    assert re.search(r"#4 landed: 1 file\(s\) changed — tags\.py \(new\)", ran.stdout)
    assert (target / "tags.py").exists() and (target / "notes.py").read_text() == FIXED
    log = (target / "iteration_log.md").read_text()
    assert "## Iteration 3 — " in log and "gemini-2.5-flash-lite, 1 request(s)" in log  # the prompt saw its history


def test_compare_draws_both_runs_and_the_fork_on_a_page_that_fetches_nothing(recorded, forked):
    root, target = recorded[0], forked[0]
    done = fallback(target, user_env(recorded[1]), "--compare", str(root))
    assert done.returncode == 0, done.stderr
    page = (target / "compare.html").read_text()
    record = load_keeper("record")
    for run in (record.identity(root), record.identity(target)):
        assert f"<code>{run['id']}</code>" in page
    assert "forked from B after iteration 3" in page.replace("<b>", "").replace("</b>", "")
    assert page.count('class="fork r0"') >= 5  # the fork marked on each chart, over iterations and over requests
    assert not re.search(r"<script|<link|<img|<iframe|\bsrc=|@import|url\(", page, re.I)
    assert '<meta name="viewport" content="width=device-width' in page and "prefers-color-scheme:dark" in page


def test_compare_refuses_a_folder_that_holds_no_run_with_one_line(recorded, tmp_path):
    root = recorded[0]
    before = tree(root)
    done = fallback(root, user_env(recorded[1]), "--compare", str(tmp_path))
    assert done.returncode == 78 and done.stdout == "" and done.stderr.count("\n") == 1
    assert f"{tmp_path} holds no record" in done.stderr and tree(root) == before  # no compare.html either


@pytest.mark.parametrize("how, says", [
    ("not empty", "is not an empty folder: fork into a new or an empty one"),
    ("inside", "is inside this folder, whose codebase it would join"),
    ("too far", "the record holds iterations 1 to 6: there is no iteration 9 to fork after"),
])
def test_a_fork_it_cannot_make_is_refused_with_one_line_and_makes_nothing(recorded, tmp_path, how, says):
    root = recorded[0]
    target = {"not empty": tmp_path / "full", "inside": root / "fork", "too far": tmp_path / "new"}[how]
    if how == "not empty":
        target.mkdir()
        (target / "mine.txt").write_text("mine")
    before, around = tree(root), tree(tmp_path)
    done = fallback(root, user_env(recorded[1]), "--fork", "9" if how == "too far" else "3", str(target))
    assert done.returncode == 78 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and says in done.stderr
    assert tree(root) == before and tree(tmp_path) == around


def test_the_page_refreshes_itself_while_the_keeper_runs_and_shows_the_runs_identity(recorded):
    root, fake, while_running = recorded
    refresh = '<meta http-equiv="refresh" content="60">'
    assert refresh in while_running  # written after iteration 1, while the keeper ran on
    page = (root / "report.html").read_text()
    assert refresh not in page  # the keeper has stopped: the page no longer reloads
    identity = load_keeper("record").identity(root)
    assert re.fullmatch(r"[0-9a-f]{12}", identity["id"]) and identity["models"] == ["gemini-3.5-flash"]
    assert f"Run <code>{identity['id']}</code> · keeper {identity['versions'][0]} · models gemini-3.5-flash" in page
    status = fallback(root, user_env(fake), "--status").stdout
    assert f"run: {identity['id']} (keeper {identity['versions'][0]}; models gemini-3.5-flash)" in status


def test_a_record_from_an_older_keeper_is_read_as_it_is_and_refused_a_replay_in_one_line(workspace, env):
    """A record made before runs were kept: every view reads it, and a replay (which needs the goal and tasks as
    they were) says why not, changing nothing."""
    record = load_keeper("record")
    (workspace / "backups").mkdir()
    old = sqlite3.connect(workspace / "backups" / "record.sqlite")
    runs = record.SCHEMA[record.SCHEMA.index("CREATE TABLE IF NOT EXISTS runs"):record.SCHEMA.index("CREATE INDEX")]
    old.executescript(record.SCHEMA.replace(runs, ""))  # no runs
    old.execute("INSERT INTO iterations (number, kind, outcome) VALUES (1, 'no change', 'no change')")
    old.commit()
    old.close()
    assert [row["outcome"] for row in record.iterations(workspace)] == ["no change"]
    assert record.identity(workspace) is None
    before = tree(workspace)
    done = fallback(workspace, env, "--replay")
    assert done.returncode == 78 and done.stdout == "" and done.stderr.count("\n") == 1
    assert "was made by an older keeper, which kept no runs" in done.stderr and tree(workspace) == before


def test_an_iteration_the_world_left_unanswered_is_skipped_and_the_next_replays_the_same(workspace, env, gemini):
    """Requests the world refused are not the run's: an iteration that got no answer is replayed as a wait of no
    length, said skipped, and the iterations after it replay the same."""
    for _ in range(3):  # a per-minute limit, met three times: the iteration waits, unanswered
        gemini.reply(api.per_minute("0.2s"))
    gemini.reply(api.answer([("a.py", "a = 1\n")]))
    done = fallback(workspace, env, "--iterations", "2", "--delay", "0")
    assert done.returncode == 0, done.stdout + done.stderr
    asked = len(gemini.requests)
    replayed = fallback(workspace, env, "--replay")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    lines = iteration_lines(replayed.stdout)
    assert lines[0].startswith("iteration 1: skipped: the record holds no answer to serve (waiting until ")
    assert lines[1] == "iteration 2: the same (landed: 1 file(s) changed)" and len(lines) == 2
    assert "all 1 iteration(s) replayed the same (1 skipped)" in replayed.stdout and len(gemini.requests) == asked
