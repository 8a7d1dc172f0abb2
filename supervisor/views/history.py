"""history: a workspace's run as the views read it: its iterations, the states its snapshots hold, what each state
measures (files, lines, tests), each landing's diff. The page, the export and a comparison render from it.

    history = read(root, whole, newest, cells)   # History: sections, snapshots, counts, pairs, diffs, ...

It reads what the keeper already keeps, and nothing else: the record (backups/record.sqlite) and the snapshots
(through snapshots.Reader, read only). Counting and diffing are the costly parts: each is done once (a folder
listing's files, lines and tests; the diff of two snapshots; objects never change) and kept in
backups/report-cache.json, which holds only what the last reading used.
"""
import difflib
import functools
import json
import os
import re
from bisect import bisect_left
from dataclasses import dataclass
from pathlib import Path

from ..store import record
from ..store.journal import facts_of
from ..store.snapshots import Reader
from ..scrub import redact
from ..settings import read_stamp, write_atomically

OUTCOMES = record.OUTCOMES  # the best first, as the record's summary ranks them ("other" after them)
DIFF_LINES = 300   # lines of one landing's diff shown; the snapshots hold the rest
CONTEXT = 2        # lines of context around each change in a diff
DIFF_MARGIN = 20   # lines kept on either side of a change when the rest of a long file is set aside before
                   # difflib, so that it pairs lines as it would on the whole file
DIFF_MOST = 5_000  # lines of a change difflib is given (its time grows with their square: 200,000 lines a model
                   # chose took it a minute); a longer change is said in one line, and the snapshots hold it
STATE_KINDS = {"genesis": 1, "before": 1, "landed": 0, "by hand": 0}  # snapshots holding a state the codebase
# was in, and how far before their iteration it stands (a before snapshot is the state the one before left)
TEST_FILE = re.compile(r"(?:^|/)(?:test_[^/]*|[^/]*_test)\.py$")  # the files pytest collects by default
TEST_DEF = re.compile(rb"^[ \t]*(?:async[ \t]+)?def[ \t]+test", re.M)  # a test function or method
CACHE_VERSION = 1  # bump when the counting or the diffs change: the cache then starts over


@dataclass
class History:
    """What the views read of a run: `sections` (the iterations, the newest `whole` with their facts), `snapshots`
    (the index's), `counts` ({state snapshot id: (files, lines, tests)}), `pairs` ({landed iteration: (snapshot
    before, after)}), `diffs` ({iteration: (before, after, diff lines)} of the newest landings), `overall` (the
    record's summary of every iteration), `ledger` (the record's requests per day and model)."""
    root: Path
    sections: list
    snapshots: list
    counts: dict
    pairs: dict
    diffs: dict
    overall: dict
    ledger: dict

    def now(self):
        """The snapshot that holds the codebase as the last iteration left it, or a person restored it since."""
        return now_state(self.sections, self.snapshots, self.pairs, self.counts)


def read(root, whole, newest, cells, diffs=200):
    """The History of the workspace in root: its newest `newest` iterations (the newest `whole` in full), the
    record's summary in at most `cells` cells, the diffs of landings among the newest `diffs` iterations."""
    root, store = Path(root), Reader(root)
    sections, snapshots = read_iterations(root, whole, newest), store.snapshots()
    known, used = load_cache(root), {"folders": {}, "diffs": {}}
    counts = measure_states(store, snapshots, known["folders"], used["folders"])
    pairs = pair_landings(sections, snapshots)
    found = diff_landings(store, sections[-diffs:], pairs, known["diffs"], used["diffs"])
    if used != known:
        save_cache(root, used)
    return History(root, sections, snapshots, counts, pairs, found, record.summary(root, cells), record.ledger(root))


# --- the iterations ---------------------------------------------------------------------------
def read_iterations(root, whole=None, newest=None):
    """The iterations of the record in order (only the `newest` few, when asked), each {number, time, heading_time,
    outcome, kind, tasks, facts, output, restored, files, model, score, scores}; with `whole`, only the newest
    `whole` have their tasks, facts and output (the others are shown as one row)."""
    rows = [section_of(row, light=whole is not None) for row in record.iterations(root, last=newest,
                                                                                  light=whole is not None)]
    if whole:
        rows[-whole:] = map(section_of, record.iterations(root, last=whole))
    return [{**row, "root": root} for row in rows]


def section_of(row, light=False):
    """What the page and the export read of an iteration's row (`light`: a row of the LIGHT columns, without facts)."""
    return {"number": row["number"], "time": read_stamp(row["ended"] or ""), "heading_time": row["ended"] or "",
            "outcome": row["outcome"], "kind": row["kind"] if row["kind"] in OUTCOMES else "other",
            "tasks": row["tasks"], "facts": [] if light else facts_of(row),
            "output": row["output"].splitlines() if row["output"] else [], "restored": row["restored"],
            "files": row["files"], "model": row["model"] or "", "score": row["score"], "scores": row["scores"]}


def files_changed(section, most=20):
    """([(name, "new" | "deleted" | "", added, removed)], how many more), as the log's Files line names them."""
    changed = [(name, "" if kind == "changed" else kind, added, removed) for name, kind, added, removed
               in section["files"]]
    return changed[:most], max(0, len(changed) - most)


def state_snapshots(snapshots):
    """[(iteration after which the state stood, snapshot)] of the snapshots that hold a state, in that order."""
    states = [(e["iteration"] - STATE_KINDS[e["kind"]], e) for e in snapshots if e["kind"] in STATE_KINDS]
    return sorted(states, key=lambda pair: pair[0])


def pair_landings(sections, snapshots):
    """{landed iteration: (snapshot before it, snapshot after it)}, None where no snapshot kept holds it.
    Before: the iteration's own start snapshot, else where the log says the codebase was. After: the
    landing's own snapshot, else the first state kept from before the next landing."""
    states, starts, pairs, current = state_snapshots(snapshots), {}, {}, None
    for entry in snapshots:
        if entry["kind"] in ("before", "genesis"):
            starts.setdefault(entry["iteration"], entry)
    by_id = {e["id"]: e for e in snapshots}
    landed = [s["number"] for s in sections if s["kind"] == "landed"]
    following = dict(zip(landed, landed[1:] + [float("inf")]))
    for section in sections:
        start = starts.get(section["number"]) or current
        if section["kind"] == "landed":
            current = state_after(states, section["number"], following[section["number"]])
            pairs[section["number"]] = (start, current)
        else:
            current = by_id.get(section["restored"]) or start
    return pairs


def state_after(states, number, next_landing):
    """The first state kept that stands after iteration `number` and before the next landing."""
    at = bisect_left(states, number, key=lambda pair: pair[0])
    return states[at][1] if at < len(states) and states[at][0] < next_landing else None


# --- counting: files, lines and tests of a state, once per folder listing ----------------------
def load_cache(root):
    """{"folders": {listing sha: [files, lines, tests]}, "diffs": {digest>digest: lines}} of the last page."""
    try:
        cache = json.loads((root / "backups" / "report-cache.json").read_text())
        if cache.get("version") == CACHE_VERSION:
            return {"folders": dict(cache["folders"]), "diffs": dict(cache["diffs"])}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    return {"folders": {}, "diffs": {}}


def save_cache(root, cache):
    write_atomically(root / "backups" / "report-cache.json",
                     redact(json.dumps({"version": CACHE_VERSION, **cache}, separators=(",", ":"))))


def measure(store, entry, known, used):
    """(files, lines, tests) of a snapshot, or None if it is gone. `known` holds the counts of folder
    listings from the last page; `used` gathers those of this one."""
    folders = store.folders_of(entry)
    if not folders:
        return None
    counts = [measure_folder(store, sha, known, used) for sha in folders.values()]
    return tuple(sum(column) for column in zip(*counts))


def measure_folder(store, sha, known, used):
    if sha not in used:
        used[sha] = known.get(sha) or [0, 0, 0]
        if sha not in known:
            for name, content in store.listing(sha).items():
                lines, tests = measure_file(store.backups, content)
                used[sha] = [used[sha][0] + 1, used[sha][1] + lines,
                             used[sha][2] + (tests if TEST_FILE.search(name) else 0)]
    return used[sha]


@functools.lru_cache(maxsize=4096)  # contents never change; a folder counted again reads only what is new
def measure_file(backups, sha):
    """(lines, test functions) of a content object; (0, 0) if it is gone."""
    try:
        data = (backups / "objects" / sha[:2] / sha[2:]).read_bytes()
    except OSError:
        return 0, 0
    return data.count(b"\n"), len(TEST_DEF.findall(data))


def measure_states(store, snapshots, known, used):
    """{snapshot id: (files, lines, tests)} of every state kept."""
    counts = {e["id"]: measure(store, e, known, used) for _, e in state_snapshots(snapshots)}
    return {sid: found for sid, found in counts.items() if found}


# --- diffs --------------------------------------------------------------------------------------
def diff_landings(store, sections, pairs, known, used):
    """{iteration: (before, after, diff lines)} of the landings among these iterations
    whose snapshots are kept; a diff of two snapshots never changes, so it is cached by their digests."""
    diffs = {}
    for section in sections:
        before, after = pairs.get(section["number"], (None, None))
        if before and after and before["id"] != after["id"]:
            key = f"{before.get('digest') or before['id']}>{after.get('digest') or after['id']}"
            used[key] = known.get(key) or used.get(key) or diff_snapshots(store, before, after)
            diffs[section["number"]] = (before, after, used[key])
    return diffs


def diff_snapshots(store, before, after):
    """Unified diff lines from one snapshot to the next (at most DIFF_LINES, then a line saying so)."""
    old, new = store.folders_of(before), store.folders_of(after)
    lines = []
    for folder in sorted(old.keys() | new.keys()):
        if old.get(folder) != new.get(folder):
            was = store.listing(old[folder]) if folder in old else {}
            now = store.listing(new[folder]) if folder in new else {}
            for name in sorted(was.keys() | now.keys()):
                if was.get(name) != now.get(name):
                    lines += diff_file(store, folder + name, was.get(name), now.get(name))
    cut = len(lines) - DIFF_LINES
    return lines[:DIFF_LINES] + ([f"… {cut} more line(s): see snapshots {before['id']} and {after['id']}"]
                                 if cut > 0 else [])


def diff_file(store, path, old, new):
    """The unified diff of one file. The lines both versions begin and end with are set aside first
    (difflib is slow on a long file, and most changes touch a small part of it)."""
    a, b = text_of(store, old), text_of(store, new)
    if a is None or b is None:
        return [f"Binary file {path} differs"]
    same = len(os.path.commonprefix([a, b]))
    start = max(0, same - DIFF_MARGIN)
    end = max(0, len(os.path.commonprefix([a[same:][::-1], b[same:][::-1]])) - DIFF_MARGIN)
    if max(len(a), len(b)) - start - end > DIFF_MOST:
        return [f"{path}: a change of more than {DIFF_MOST:,} lines, too long to show here"]
    lines = difflib.unified_diff(a[start:len(a) - end], b[start:len(b) - end], f"a/{path}" if old else "/dev/null",
                                 f"b/{path}" if new else "/dev/null", n=CONTEXT, lineterm="")
    return [re.sub(r"(?<=[-+])\d+", lambda m: str(int(m[0]) + start), line, count=2) if line.startswith("@@")
            else line for line in lines]


def text_of(store, sha):
    """The lines of a content object; [] for none, None if it is not text."""
    try:
        return store.object_path(sha).read_bytes().decode("utf-8").splitlines() if sha else []
    except (OSError, UnicodeDecodeError):
        return None


def now_state(sections, snapshots, pairs, counts):
    """The snapshot that holds the codebase as the last iteration left it, or a person restored it since (or the
    newest state kept)."""
    last = sections[-1] if sections else None
    by_id = {e["id"]: e for e in snapshots}
    found = by_id.get(last["restored"]) if last else None
    if last and last["kind"] == "landed":
        found = pairs.get(last["number"], (None, None))[1]
    chosen = max((e for e in snapshots if isinstance(e.get("chosen"), str)), key=lambda e: e["chosen"], default=None)
    if chosen and (not last or chosen["chosen"] >= last["heading_time"]):  # --restore ID, --reset: after the last
        found = chosen
    states = [e for _, e in state_snapshots(snapshots) if e["id"] in counts]
    return found if found and found["id"] in counts else states[-1] if states else None


