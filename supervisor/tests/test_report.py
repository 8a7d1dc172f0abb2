"""The report page and the git export, on synthetic workspaces written in the documented formats.

The page is checked for its structure and its figures (it parses, it holds the scripted run, it refers to
nothing outside, it escapes what the model wrote, it is replaced atomically); the export with git itself
(commits, dates, messages and trees against the snapshots; an incremental export; refusals).
bench/report.py builds its large workspace with `Workspace` and `grow` from here.
"""
import hashlib
import json
import random
import re
import subprocess
from collections import Counter
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from html.parser import HTMLParser

import pytest

from conftest import load_keeper

START = datetime(2026, 11, 20, 9, 0, 0, tzinfo=timezone.utc)  # the synthetic runs' first iteration
HOSTILE = "<script>alert(1)</script>"


report, export, record, chart = (load_keeper(name) for name in ("report", "export", "record", "chart"))
history, Reader = load_keeper("history"), load_keeper("snapshots").Reader
Account, Outcome, Result = load_keeper("kinds").Account, load_keeper("kinds").Outcome, load_keeper("kinds").Result


class Workspace:
    """A workspace as fallback.py leaves it: snapshots, objects, index, the record (unless `old`: a workspace
    from before it), and the log and ledger of today's version, tasks, goal."""

    def __init__(self, root, landed_snapshots=True, every=7, old=False):
        self.root, self.files, self.snapshots, self.stored = root, {}, [], set()
        self.every = every  # minutes from one iteration to the next
        self.ledger, self.landed_snapshots, self.number, self.taken = {}, landed_snapshots, 0, 0
        (root / "backups" / "objects").mkdir(parents=True)
        (root / "goal.md").write_text("# Goal\n\nGrow a note keeper.\n")
        (root / "iteration_log.md").write_text("# Iteration log\n")
        self.book = None if old else record.Writer(record.path_of(root))

    def store(self, data):
        sha = hashlib.sha256(data).hexdigest()
        if sha not in self.stored:
            path = self.root / "backups" / "objects" / sha[:2] / sha[2:]
            path.parent.mkdir(exist_ok=True)
            path.write_bytes(data)
            self.stored.add(sha)
        return sha

    def snapshot(self, kind, files, time):
        """The index entry of `files` ({path: text}); a new snapshot only if none has this state, as fallback does."""
        folders = {}
        for rel, text in files.items():
            folders.setdefault(rel[:rel.rfind("/") + 1], {})[rel[rel.rfind("/") + 1:]] = self.store(text.encode())
        listing = json.dumps({f: self.store(json.dumps(names, sort_keys=True).encode())
                              for f, names in folders.items()}, sort_keys=True, indent=0).encode()
        digest = hashlib.sha256(listing).hexdigest()
        known = [e for e in self.snapshots if e["digest"] == digest]
        if known:
            return known[-1]
        self.taken += 1
        entry = {"id": f"{self.taken:04d}", "time": f"{time:%Y-%m-%d %H:%M:%S} UTC",
                 "iteration": self.number, "kind": kind, "good": kind == "genesis", "digest": digest,
                 "count": len(files)}
        (self.root / "backups" / f"{entry['id']}.json").write_bytes(listing)
        self.snapshots.append(entry)
        return entry

    def iterate(self, outcome, tasks=(), changes=None, reason="", model="gemini-3.5-flash", requests=1, done=()):
        """One iteration: its start snapshot, the change landed or rolled back, its log section and ledger."""
        self.number += 1
        time = START + timedelta(minutes=self.every * self.number)
        start = self.snapshot("before" if self.snapshots else "genesis", self.files, time)
        changed = {rel: text for rel, text in {**self.files, **(changes or {})}.items() if text is not None}
        lines = [f"## Iteration {self.number} — {time:%Y-%m-%d %H:%M:%S} UTC — {outcome}", ""]
        lines += ["- Tasks:"] + [f"  {n}. {task}" for n, task in enumerate(tasks, 1)] if tasks else []
        lines += ["- Done from pending_tasks.md: " + "; ".join(done)] if done else []
        lines.append(f"- Files: {describe(changes_between(self.files, changed)) or 'none changed'}")
        kind = next(kind for kind in Outcome if outcome.startswith(kind.value))
        result = Result(kind, changes=changes_between(self.files, changed), start=start["id"],
                        said=Account(model=model, requests=requests, tasks=tuple(tasks), done=tuple(done),
                                     tokens={"prompt": 1000, "output": 200, "thinking": 0}))
        if kind is Outcome.ROLLED_BACK:
            kept = self.snapshot("failed", changed, time)
            lines += [f"- Reason: {reason}", f"- Restored snapshot {start['id']}; the failing state is kept as "
                                             f"snapshot {kept['id']}"]
            result = replace(result, reason=reason, restored=start["id"], kept=kept["id"])
        elif kind is Outcome.LANDED:
            self.files = changed
            if self.landed_snapshots:
                result = replace(result, after=self.snapshot("landed", changed, time)["id"])
        lines.append(f"- Model: {model}, {requests} request(s), tokens 1,000 prompt + 200 output + 0 thinking; 1.0 s")
        with (self.root / "iteration_log.md").open("a") as log:
            log.write("\n" + "\n".join(lines) + "\n")
        self.spend(time, model, requests, result, outcome)

    def spend(self, time, model, requests, result, outcome):
        """Add the iteration's requests to the ledger, on its Pacific day (standard time is near enough), and the
        iteration with its requests to the record, as the keeper does."""
        day = f"{time - timedelta(hours=8):%Y-%m-%d}"
        use = self.ledger.setdefault(day, {}).setdefault(model, {"requests": 0, "prompt": 0, "output": 0, "thinking": 0,
                                                                 "kinds": {}, "wasted": {}})
        use.update(requests=use["requests"] + requests, prompt=use["prompt"] + 1000, output=use["output"] + 200)
        use["kinds"]["answer"] = use["kinds"].get("answer", 0) + requests
        self.save()
        if self.book:
            row = record.row_of(self.number, result, 1.0)
            row["ended"], row["outcome"] = f"{time:%Y-%m-%d %H:%M:%S} UTC", outcome
            calls = [{"model": model, "kind": "answer", "day": day, "tokens": result.said.tokens if n == 0 else
                      {"prompt": 0, "output": 0, "thinking": 0}} for n in range(requests)]
            self.book.write(row, calls)

    def save(self):
        backups = self.root / "backups"
        (backups / "index.json").write_text(json.dumps({"iteration": self.number, "snapshots": self.snapshots}))
        (backups / "usage.json").write_text(json.dumps(self.ledger))

    def prune(self, keep):
        """Forget the snapshots whose ids are not in `keep`, as pruning does (their objects may stay)."""
        for entry in [e for e in self.snapshots if e["id"] not in keep]:
            (self.root / "backups" / f"{entry['id']}.json").unlink()
        self.snapshots = [e for e in self.snapshots if e["id"] in keep]
        self.save()


def changes_between(old, new):
    """[(path, "new" | "changed" | "deleted", added, removed)], as fallback.py finds them."""
    found = []
    for rel in sorted({rel for rel, _ in old.items() ^ new.items()}):
        a, b = Counter(old.get(rel, "").splitlines()), Counter(new.get(rel, "").splitlines())
        kind = "new" if rel not in old else "deleted" if rel not in new else "changed"
        found.append((rel, kind, sum((b - a).values()), sum((a - b).values())))
    return found


def describe(changes):
    """The Files line of a log section, as fallback.py writes it."""
    return ", ".join(f"{rel}{'' if kind == 'changed' else f' ({kind})'} +{added} −{removed}"
                     for rel, kind, added, removed in changes)


NOTES = "import json\n\n\ndef add(text):\n    return text\n"
NOTES_TEST = "import notes\n\n\ndef test_add():\n    assert notes.add('a') == 'a'\n"
FIND = NOTES + "\n\ndef find(word, notes):\n    return [n for n in notes if word.lower() in n.lower()]\n"
FIND_TEST = NOTES_TEST + "\n\ndef test_find_ignores_case():\n    assert notes.find('milk', ['Buy Milk'])\n"


def scripted_run(root, landed_snapshots=True):
    """The demo's story: a change lands, a broken one is rolled back and becomes a task, the fix lands."""
    run = Workspace(root, landed_snapshots)
    run.files = {"seed.py": "print('seed')\n" * 40}
    run.iterate("landed: 2 file(s) changed", ["Create notes.py with add", "Test that added notes are kept",
                                              "Keep notes in notes.json"],
                {"notes.py": NOTES, "tests/test_notes.py": NOTES_TEST})
    run.iterate("rolled back: tests failed", ["Add a find command", "Test that find ignores case"],
                {"notes.py": NOTES + "\ndef find(:\n", "tests/test_notes.py": FIND_TEST}, reason="tests failed")
    run.iterate("landed: 2 file(s) changed", ["Fix find"], {"notes.py": FIND, "tests/test_notes.py": FIND_TEST},
                done=["Iteration 2 was rolled back: tests failed. Find and fix the cause."])
    (root / "pending_tasks.md").write_text(
        "# Pending tasks\n\n- [ ] Make list show the newest first\n"
        "- [x] Iteration 2 was rolled back: tests failed. Find and fix the cause. [failure 1a2b3c4d: 1 time "
        "since 2026-11-20 09:14:00 UTC, first after snapshot 0002]\n"
        "- [ ] Iteration 9 was rolled back: seed.py crashed (exit 1). Find and fix the cause. [failure 9f8e7d6c: 3 "
        "times since 2026-11-20 10:00:00 UTC, first after snapshot 0004] This keeps happening: fix it before "
        "anything else.\n      Traceback (most recent call last):\n      ValueError: boom\n")
    return run


def grow(root, iterations, files=300, keep=100, every=7, rng=None):
    """A long synthetic run: a codebase of `files` modules growing and failing at random, an iteration every
    `every` minutes, and the snapshots pruned as the keeper does (genesis, the newest of each day and the
    newest `keep` are kept)."""
    rng, run = rng or random.Random(1), Workspace(root, every=every)
    run.files = {f"pkg{n % 12}/mod{n}.py": module(n, rng) for n in range(files)}
    run.files.update({f"tests/test_mod{n}.py": make_tests(n, rng) for n in range(0, files, 10)})
    models = ["gemini-3.5-flash", "gemini-3.5-flash-lite"]
    for n in range(iterations):
        picked = rng.sample(sorted(run.files), 2) + [f"pkg{n % 12}/new{n}.py" if rng.random() < .3 else
                                                      f"tests/test_new{n}.py" if rng.random() < .1 else "app.py"]
        changes = {rel: run.files.get(rel, make_tests(n, rng) if "test" in rel else "") + module(n, rng)
                   for rel in picked}
        outcome = rng.choices(["landed: 3 file(s) changed", "rolled back: tests failed", "no change", "waiting "
                               "until 2026-11-21 08:00 UTC"], [5, 2, 2, 1])[0]
        run.iterate(outcome, [f"Improve {rel}" for rel in picked], changes if outcome[0] in "lr" else None,
                    reason="tests failed", model=models[n % 2])
        if len(run.snapshots) > keep * 1.1:
            daily = {e["time"][:10]: e["id"] for e in run.snapshots}.values()
            run.prune({run.snapshots[0]["id"], *daily} | {e["id"] for e in run.snapshots[-keep:]})
    return run


def module(n, rng):
    return "".join(f"def f{n}_{k}(x):\n    return x * {rng.randint(1, 99)}\n\n\n" for k in range(rng.randint(2, 12)))


def make_tests(n, rng):
    return f"import pkg{n % 12}\n\n\n" + "".join(f"def test_{n}_{k}():\n    assert True\n\n\n"
                                                  for k in range(rng.randint(1, 6)))


class Tags(HTMLParser):
    """The tags of a page, checked to nest and close; the attributes and text seen."""
    VOID = {"meta", "br", "hr", "img", "input", "link", "path", "rect", "line", "circle"}

    def __init__(self):
        super().__init__()
        self.open, self.seen, self.attributes, self.text, self.errors = [], Counter(), [], [], []

    def handle_starttag(self, tag, attrs):
        self.seen[tag] += 1
        self.attributes += attrs
        if tag not in self.VOID:
            self.open.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.seen[tag] += 1
        self.attributes += attrs

    def handle_endtag(self, tag):
        if not self.open or self.open.pop() != tag:
            self.errors.append(tag)

    def handle_data(self, data):
        self.text.append(data)


def parse(page):
    tags = Tags()
    tags.feed(page)
    tags.close()
    return tags


@pytest.fixture
def demo(tmp_path):
    root = tmp_path / "workspace"
    root.mkdir()
    return scripted_run(root)


def test_page_parses_with_every_tag_closed_in_order(demo):
    tags = parse(report.write_report(demo.root).read_text())
    assert tags.errors == [] and tags.open == []
    assert tags.seen["html"] == 1 and tags.seen["svg"] >= 4 and tags.seen["details"] >= 3


def test_page_holds_the_figures_of_the_scripted_run(demo):
    page = report.write_report(demo.root, {"gemini-3.5-flash": 20}).read_text()
    text = "".join(parse(page).text)
    lines_now = sum(t.count("\n") for t in demo.files.values())
    for tile in ("3iterations", "2landed", "1rolled back", "3requests", "3,600tokens", "3files now",
                 f"{lines_now}lines now", "2tests now"):
        assert tile in text
    assert "gemini-3.5-flash: 3 request(s), quota 20 a day" in text
    assert "Test that find ignores case" in text and "tests/test_notes.py" in text
    assert "+def find(word, notes):" in text and "Reason: tests failed" in text
    assert "Make list show the newest first" in text and "×3" in text and "ValueError: boom" in text
    assert "Grow a note keeper." in text and text.count("Goal") == 1  # goal.md's own "# Goal" is not said twice


def test_quotas_are_by_default_what_models_py_knows(demo, monkeypatch):
    monkeypatch.delenv("GEMINI_LIMITS", raising=False)
    text = "".join(parse(report.write_report(demo.root).read_text()).text)
    assert f"gemini-3.5-flash: 3 request(s), quota {report.Models(demo.root).get('gemini-3.5-flash')['rpd']} a day" \
        in text


def test_page_refers_to_nothing_outside(demo):
    page = report.write_report(demo.root).read_text()
    links = [value for name, value in parse(page).attributes if name in ("src", "href", "xlink:href", "action")]
    assert links and all(value.startswith("#") for value in links)
    assert "@import" not in page and "url(" not in page and "<script" not in page


def test_what_the_model_wrote_is_shown_as_text(demo):
    demo.iterate("landed: 1 file(s) changed", [f"Add {HOSTILE}"], {f"{HOSTILE}.py": f"# {HOSTILE}\n"})
    page = report.write_report(demo.root).read_text()
    tags = parse(page)
    assert tags.seen["script"] == 0 and "<script>" not in page
    assert f"Add {HOSTILE}" in tags.text and f"{HOSTILE}.py" in tags.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_page_is_replaced_whole_never_rewritten_in_place(demo):
    page = demo.root / "report.html"
    page.write_text("the page before")
    (demo.root / "seen-before.html").hardlink_to(page)
    report.write_report(demo.root)
    assert (demo.root / "seen-before.html").read_text() == "the page before"
    assert page.read_text().startswith("<!doctype html>")
    assert sorted(p.name for p in demo.root.iterdir() if "report" in p.name) == ["report.html"]


def test_counts_are_kept_per_folder_listing_and_only_for_the_states_kept(demo):
    report.write_report(demo.root)
    cache = json.loads((demo.root / "backups" / "report-cache.json").read_text())
    states = [e for e in demo.snapshots if e["kind"] != "failed"]
    listings = {sha for e in states for sha in Reader(demo.root).folders_of(e).values()}
    assert set(cache["folders"]) == listings
    assert sum(cache["folders"][sha][2] for sha in Reader(demo.root).folders_of(demo.snapshots[-1]).values()) == 2
    demo.prune({demo.snapshots[-1]["id"]})
    report.write_report(demo.root)
    cache = json.loads((demo.root / "backups" / "report-cache.json").read_text())
    assert set(cache["folders"]) == set(Reader(demo.root).folders_of(demo.snapshots[-1]).values())


def test_thousands_of_iterations_fold_into_rows_and_old_ones_keep_no_diff(tmp_path):
    run = grow(tmp_path, 260, files=30, keep=40)
    tags = parse(report.write_report(run.root).read_text())
    assert tags.errors == [] and tags.open == []
    cards = [value for name, value in tags.attributes if name == "class" and value.startswith("it ")]
    assert len(cards) == report.FULL_CARDS and tags.seen["tr"] >= 60
    assert "No diff: no snapshot kept holds the codebase both before and after this landing." in tags.text


def test_a_landing_without_its_own_snapshot_shows_the_next_state_kept(tmp_path):
    root = tmp_path / "workspace"
    root.mkdir()
    run = scripted_run(root, landed_snapshots=False)
    run.iterate("no change")
    text = " ".join(parse(report.write_report(root).read_text()).text)
    assert "+def find(word, notes):" in text and "+def add(text):" in text


def test_a_log_a_person_edited_changes_nothing_on_the_page(demo):
    before = "".join(parse(report.write_report(demo.root).read_text()).text)
    log = demo.root / "iteration_log.md"
    log.write_text(log.read_text().replace("- Tasks:", "- Tasks: (edited)\n  not a task", 1)
                   + "\n## Iteration 4 — yesterday — landed: by hand\n- Files: a note +x −y, and then\n- :\n-\n"
                   + "## Iteration five — what\n  stray line\n")
    tags = parse(report.write_report(demo.root).read_text())
    text = "".join(tags.text)
    assert tags.errors == [] and "3iterations" in text and "#3" in text and "a note +x −y, and then" not in text
    assert text.split("Made ")[1].split("UTC")[1:] == before.split("Made ")[1].split("UTC")[1:]


# --- the export ------------------------------------------------------------------------------------
def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def landed_states(run):
    """[(iteration, snapshot)] of each landing's own snapshot, as the export should commit them."""
    return [(e["iteration"], e) for e in run.snapshots if e["kind"] == "landed"]


def test_export_commits_genesis_then_each_landing_with_its_time_tasks_and_tree(demo, tmp_path):
    dest = tmp_path / "history"
    summary = export.export_git(demo.root, dest)
    assert "3 commit(s)" in summary and "\n" not in summary
    log = git(dest, "log", "--reverse", "--format=%H|%aI|%cI|%s", "refs/seed/landed").splitlines()
    expected = [(0, demo.snapshots[0])] + landed_states(demo)
    assert len(log) == len(expected) == 3
    for line, (number, entry) in zip(log, expected):
        commit, authored, committed, subject = line.split("|")
        when = (START + timedelta(minutes=7 * max(number, 1))).isoformat()
        assert authored == committed == when
        assert subject == {0: "Genesis: the codebase before iteration 1", 1: "Iteration 1: Create notes.py with add",
                           3: "Iteration 3: Fix find"}[number]
        assert tree_of(dest, commit) == snapshot_contents(demo.root, entry)
    message = git(dest, "log", "-1", "--format=%B", "refs/seed/landed")
    assert "Iteration 3 — landed: 2 file(s) changed\nTasks:\n1. Fix find" in message and "Iteration: 3" in message
    assert "Before it, iterations that landed nothing: 2 rolled back: tests failed" in message
    assert git(dest, "rev-parse", "HEAD") == git(dest, "rev-parse", "refs/seed/landed")
    assert (dest / "notes.py").read_text() == FIND


def tree_of(repo, commit):
    """{path: bytes} of a commit, read back with git itself."""
    files = {}
    for line in git(repo, "ls-tree", "-r", "-z", commit).split("\0")[:-1]:
        meta, path = line.split("\t", 1)
        files[path] = subprocess.run(["git", "-C", str(repo), "cat-file", "blob", meta.split()[2]],
                                     capture_output=True, check=True).stdout
    return files


def snapshot_contents(root, entry):
    return {rel: Reader(root).object_path(sha).read_bytes() for rel, sha in Reader(root).files_of(entry).items()}


def test_export_again_adds_only_the_new_landings(demo, tmp_path):
    dest = tmp_path / "history"
    export.export_git(demo.root, dest)
    before = git(dest, "log", "--format=%H", "refs/seed/landed").split()
    demo.iterate("rolled back: seed.py crashed (exit 1)", ["Break it"], {"notes.py": "oops("}, reason="crashed")
    demo.iterate("landed: 2 file(s) changed", ["Add a README"], {"README.txt": "notes\n", f'wé"ird\\{HOSTILE}': "x"})
    summary = export.export_git(demo.root, dest)
    after = git(dest, "log", "--format=%H", "refs/seed/landed").split()
    assert after[1:] == before and len(after) == 4 and "added 1 commit(s)" in summary
    kept = snapshot_contents(demo.root, demo.snapshots[-1])  # a name off the allow-list (an older keeper's) left out
    assert tree_of(dest, after[0]) == {rel: data for rel, data in kept.items() if not load_keeper("names").refusal(rel)}
    assert "up to date" in export.export_git(demo.root, dest)


def test_pruned_landings_are_folded_into_the_next_one_kept(demo, tmp_path):
    demo.prune({demo.snapshots[0]["id"], demo.snapshots[-1]["id"]})
    dest = tmp_path / "history"
    export.export_git(demo.root, dest)
    subjects = git(dest, "log", "--reverse", "--format=%s", "refs/seed/landed").splitlines()
    assert subjects == ["Genesis: the codebase before iteration 1", "Iterations 1 and 3 — landed"]


def test_export_refuses_the_export_of_another_workspace(demo, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    scripted_run(other)
    export.export_git(other, tmp_path / "history")
    with pytest.raises(ValueError, match="holds the export of another workspace"):
        export.export_git(demo.root, tmp_path / "history")


@pytest.mark.parametrize("where", ["workspace", "inside", "foreign repository", "a folder with files"])
def test_export_refuses_a_destination_it_should_not_write(demo, tmp_path, where):
    dest = {"workspace": demo.root, "inside": demo.root / "history"}.get(where, tmp_path / "elsewhere")
    if where == "foreign repository":
        subprocess.run(["git", "init", "-q", str(dest)], check=True)
    elif where == "a folder with files":
        dest.mkdir()
        (dest / "notes.txt").write_text("mine")
    with pytest.raises(ValueError) as refused:
        export.export_git(demo.root, dest)
    assert "\n" not in str(refused.value)
    assert not (demo.root / "history").exists() and not (demo.root / ".git").exists()


def test_the_page_stays_a_size_a_browser_opens_however_long_the_run(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "OLDER_ROWS", 20)  # the bounds, made small: the run below stands for 100,000
    monkeypatch.setattr(report, "STRIP_MOST", 50)
    run = grow(tmp_path, 260, files=30, keep=40)
    page = report.write_report(run.root).read_text()
    tags = parse(page)
    assert tags.errors == [] and tags.open == []
    older = page.split("older iteration(s)</b>")[1].split("</details>")[0]
    assert older.count("<tr") == 20 + 1 and "and 40 older still: <code>python fallback.py --show N</code>" in page
    strip = re.search(r'<svg class="strip" viewBox="0 0 (\d+) 1"', page)
    each = re.search(r"oldest first, a cell for each (\d+)", page)
    assert strip and int(strip.group(1)) <= 50 and each and int(each[1]) * 50 >= 260  # a cell for several iterations


def test_the_iteration_axis_is_labelled_at_round_steps_with_room_between_labels():
    for last, labels in ((1, [0, 1]), (4, [0, 1, 2, 3, 4]), (5, [0, 2, 5]), (37, [0, 10, 20, 30, 37]),
                         (1_234, [0, 500, 1_234]), (100_000, [0, 50_000, 100_000])):
        assert [n for n, _ in chart.x_ticks(last)] == labels
