"""report: the page that shows the codebase growing, report.html, made from the keeper's record alone.

    write_report(root)    writes root/report.html atomically and returns its path

It reads what the keeper already keeps, and nothing else, so the page cannot disagree with it:
the record (backups/record.sqlite: the iterations, and the ledger summed from its requests), backups/index.json
and the snapshots it lists (each state's files, lines and tests; each landing's diff), pending_tasks.md and
goal.md. Counting and diffing are the costly parts: each is done once (a folder listing's files, lines and
tests; the diff of two snapshots; objects never change) and kept in backups/report-cache.json, which
holds only what the last page used. The page is one file that needs no network: inline CSS (light and
dark, phone and desktop), charts drawn here as inline SVG, <details> to fold, no script. Everything that
came from the model or a person is escaped.
It also reads that record for export.py (the landed history as a git repository).
"""
import difflib
import functools
import html
import json
import math
import os
import re
from bisect import bisect_left, bisect_right
from datetime import datetime, timezone
from pathlib import Path

from . import record
from .ledger import reached
from .models import Models
from .scrub import redact
from .settings import NAMED, write_atomically

# --- settings ---------------------------------------------------------------------------------
FULL_CARDS = 200   # newest iterations shown in full (tasks, files, reason, output, diff); older ones as one row each
OPEN_CARDS = 20    # of those, the newest shown unfolded
EXCHANGE_CARDS = 20  # of those, the newest with a table of their requests
DIFF_LINES = 300   # lines of one landing's diff shown; the snapshots hold the rest
DIFF_OPEN = 40     # a diff of up to this many lines is shown unfolded
CONTEXT = 2        # lines of context around each change in a diff
DIFF_MARGIN = 20   # lines kept on either side of a change when the rest of a long file is set aside before
                   # difflib, so that it pairs lines as it would on the whole file
CHART_DAYS = 60    # the newest days in the requests chart
STRIP_CELLS = 40   # the outcome strip is this many iterations wide at least (fewer leave room on the right)
STRIP_MOST = 2_000  # and at most this many cells: past that, a cell stands for several iterations
OLDER_ROWS = 500   # older iterations listed one row each; those before are reached with --show N
OUTCOMES = tuple(kind.value for kind in record.Kind if kind is not record.Kind.OTHER)  # as an outcome's text begins
STATE_KINDS = {"genesis": 1, "before": 1, "landed": 0, "by hand": 0}  # snapshots holding a state the codebase
# was in, and how far before their iteration it stands (a before snapshot is the state the one before left)
TEST_FILE = re.compile(r"(?:^|/)(?:test_[^/]*|[^/]*_test)\.py$")  # the files pytest collects by default
TEST_DEF = re.compile(rb"^[ \t]*(?:async[ \t]+)?def[ \t]+test", re.M)  # a test function or method
CACHE_VERSION = 1  # bump when the counting or the diffs change: the cache then starts over
TASK = re.compile(r"^\s*[-*] \[([ xX])\] (.*)$")
FAILURE = re.compile(r"\s*\[failure (\w+): (\d+) times? since ([^,\]]+), first after snapshot (\w*)\](.*)$")


# --- reading the record -----------------------------------------------------------------------
def read_iterations(root, whole=None, newest=None):
    """The iterations of the record in order (only the `newest` few, when asked), each {number, time, heading_time,
    outcome, kind, tasks, facts, output, restored, files, model, score, scores}; with `whole`, only the newest
    `whole` have their tasks, facts and output (the others are shown as one row)."""
    rows = record.iterations(root, last=newest, light=whole is not None)
    if whole:
        rows[-whole:] = record.iterations(root, last=whole)
    return [{**section_of(row), "root": root} for row in rows]


def section_of(row):
    """What the page and the export read of an iteration's row."""
    return {"number": row["number"], "time": record.heading_time(row), "heading_time": row["ended"] or "",
            "outcome": row["outcome"], "kind": row["kind"] if row["kind"] in OUTCOMES else "other",
            "tasks": row["tasks"], "facts": [tuple(fact) for fact in row["facts"]],
            "output": row["output"].splitlines() if row["output"] else [], "restored": row["restored"],
            "files": row["files"], "model": row["model"] or "", "score": row["score"], "scores": row["scores"]}


def parse_time(text):
    try:
        return datetime.strptime(text.strip(), "%Y-%m-%d %H:%M:%S UTC").replace(tzinfo=timezone.utc)
    except ValueError:
        return None


def fact(section, label):
    """The value of a `- Label: value` line of a section, or ''."""
    return next((value for name, value in section["facts"] if name == label), "")


def files_changed(section, most=20):
    """([(name, "new" | "deleted" | "", added, removed)], how many more), as the log's Files line names them."""
    changed = [(name, "" if kind == "changed" else kind, added, removed) for name, kind, added, removed
               in section["files"]]
    return changed[:most], max(0, len(changed) - most)


def model_of(section):
    return section["model"]


def read_index(root):
    """The snapshots backups/index.json lists, oldest first (an unreadable index lists none)."""
    try:
        index = json.loads((root / "backups" / "index.json").read_text())
        snapshots = index.get("snapshots", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [e for e in snapshots if isinstance(e, dict) and isinstance(e.get("id"), str)
            and isinstance(e.get("iteration"), int) and "kind" in e and "time" in e
            and (root / "backups" / f"{e['id']}.json").exists()]


def object_path(root, sha):
    return root / "backups" / "objects" / sha[:2] / sha[2:]


def folders_of(root, entry):
    """{folder: sha256 of its listing} of a snapshot; {} if it is gone."""
    try:
        return json.loads((root / "backups" / f"{entry['id']}.json").read_bytes())
    except (OSError, ValueError):
        return {}


@functools.lru_cache(maxsize=2048)  # listings never change; this spares reading them for every page
def read_listing(root, sha):
    """A folder's listing, {name: sha256} (not to be changed)."""
    try:
        return json.loads(object_path(root, sha).read_bytes())
    except (OSError, ValueError):
        return {}


def files_of(root, entry):
    """{path: sha256} of a snapshot; {} if it is gone."""
    return {folder + name: sha for folder, listing in folders_of(root, entry).items()
            for name, sha in read_listing(root, listing).items()}


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


def read_tasks(root):
    """The tasks of pending_tasks.md in order, each {done, text, failure (a match or None), detail}."""
    path = root / "pending_tasks.md"
    tasks = []
    for line in path.read_text("utf-8", "replace").splitlines() if path.exists() else []:
        if found := TASK.match(line):
            text, failure = found[2], FAILURE.search(found[2])
            tasks.append({"done": found[1] != " ", "text": text[:failure.start()] if failure else text,
                          "failure": failure, "detail": []})
        elif tasks and line[:1].isspace() and line.strip():
            tasks[-1]["detail"].append(line.strip())
    return tasks


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


def measure(root, entry, known, used):
    """(files, lines, tests) of a snapshot, or None if it is gone. `known` holds the counts of folder
    listings from the last page; `used` gathers those of this one."""
    folders = folders_of(root, entry)
    if not folders:
        return None
    counts = [measure_folder(root, sha, known, used) for sha in folders.values()]
    return tuple(sum(column) for column in zip(*counts))


def measure_folder(root, sha, known, used):
    if sha not in used:
        used[sha] = known.get(sha) or [0, 0, 0]
        if sha not in known:
            for name, content in read_listing(root, sha).items():
                lines, tests = measure_file(root, content)
                used[sha] = [used[sha][0] + 1, used[sha][1] + lines,
                             used[sha][2] + (tests if TEST_FILE.search(name) else 0)]
    return used[sha]


@functools.lru_cache(maxsize=4096)  # contents never change; a folder counted again reads only what is new
def measure_file(root, sha):
    """(lines, test functions) of a content object; (0, 0) if it is gone."""
    try:
        data = object_path(root, sha).read_bytes()
    except OSError:
        return 0, 0
    return data.count(b"\n"), len(TEST_DEF.findall(data))


def measure_states(root, snapshots, known, used):
    """{snapshot id: (files, lines, tests)} of every state kept."""
    counts = {e["id"]: measure(root, e, known, used) for _, e in state_snapshots(snapshots)}
    return {sid: found for sid, found in counts.items() if found}


# --- diffs --------------------------------------------------------------------------------------
def diff_landings(root, sections, pairs, known, used):
    """{iteration: (before, after, diff lines)} of the landings among the newest FULL_CARDS iterations
    whose snapshots are kept; a diff of two snapshots never changes, so it is cached by their digests."""
    diffs = {}
    for section in sections[-FULL_CARDS:]:
        before, after = pairs.get(section["number"], (None, None))
        if before and after and before["id"] != after["id"]:
            key = f"{before.get('digest') or before['id']}>{after.get('digest') or after['id']}"
            used[key] = known.get(key) or used.get(key) or diff_snapshots(root, before, after)
            diffs[section["number"]] = (before, after, used[key])
    return diffs


def diff_snapshots(root, before, after):
    """Unified diff lines from one snapshot to the next (at most DIFF_LINES, then a line saying so)."""
    old, new = folders_of(root, before), folders_of(root, after)
    lines = []
    for folder in sorted(old.keys() | new.keys()):
        if old.get(folder) != new.get(folder):
            was = read_listing(root, old[folder]) if folder in old else {}
            now = read_listing(root, new[folder]) if folder in new else {}
            for name in sorted(was.keys() | now.keys()):
                if was.get(name) != now.get(name):
                    lines += diff_file(root, folder + name, was.get(name), now.get(name))
    cut = len(lines) - DIFF_LINES
    return lines[:DIFF_LINES] + ([f"… {cut} more line(s): see snapshots {before['id']} and {after['id']}"]
                                 if cut > 0 else [])


def diff_file(root, path, old, new):
    """The unified diff of one file. The lines both versions begin and end with are set aside first
    (difflib is slow on a long file, and most changes touch a small part of it)."""
    a, b = text_of(root, old), text_of(root, new)
    if a is None or b is None:
        return [f"Binary file {path} differs"]
    same = len(os.path.commonprefix([a, b]))
    start = max(0, same - DIFF_MARGIN)
    end = max(0, len(os.path.commonprefix([a[same:][::-1], b[same:][::-1]])) - DIFF_MARGIN)
    lines = difflib.unified_diff(a[start:len(a) - end], b[start:len(b) - end], f"a/{path}" if old else "/dev/null",
                                 f"b/{path}" if new else "/dev/null", n=CONTEXT, lineterm="")
    return [re.sub(r"(?<=[-+])\d+", lambda m: str(int(m[0]) + start), line, count=2) if line.startswith("@@")
            else line for line in lines]


def text_of(root, sha):
    """The lines of a content object; [] for none, None if it is not text."""
    try:
        return object_path(root, sha).read_bytes().decode("utf-8").splitlines() if sha else []
    except (OSError, UnicodeDecodeError):
        return None


# --- the page -----------------------------------------------------------------------------------
def write_report(root, quotas=None):
    """Write root/report.html from the record (atomically); its path. `quotas`: {model: requests a day},
    by default as models.py knows them."""
    root = Path(root)
    sections, snapshots, ledger = read_iterations(root, FULL_CARDS, FULL_CARDS + OLDER_ROWS), read_index(root), \
        record.ledger(root)
    overall = record.summary(root, STRIP_MOST)  # every iteration, counted by the record: flat whatever the history
    known, used = load_cache(root), {"folders": {}, "diffs": {}}
    counts = measure_states(root, snapshots, known["folders"], used["folders"])
    pairs = pair_landings(sections, snapshots)
    diffs = diff_landings(root, sections, pairs, known["diffs"], used["diffs"])
    if used != known:
        save_cache(root, used)
    quotas = daily_quotas(root, {model for models in ledger.values() for model in models}) if quotas is None else quotas
    write_atomically(root / "report.html", redact(render_page(root, sections, overall, snapshots, counts, pairs, diffs,
                                                              ledger, quotas)))
    return root / "report.html"


def daily_quotas(root, names):
    """{model: requests a day} as models.py knows them: its table, GEMINI_LIMITS, what the API said; none for a
    model it does not know (a mistyped name): an assumed quota would be a figure the page made up."""
    memory, local = root / "backups" / "models.json", bool(os.environ.get("OPENAI_BASE_URL"))
    try:
        known = Models(memory, os.environ.get("GEMINI_LIMITS", ""), local=local)
    except ValueError:  # a GEMINI_LIMITS the keeper refuses anyway: the table's figures
        known = Models(memory, local=local)
    said = lambda name: name in known.table or name in known.settings or name in known.learned
    return {name: known.get(name)["rpd"] for name in names if said(name) and known.get(name)["rpd"] < float("inf")}


def render_page(root, sections, overall, snapshots, counts, pairs, diffs, ledger, quotas):
    now, goal = now_state(sections, snapshots, pairs, counts), NAMED.get("goal.md", root / "goal.md")  # --goal's
    body = [render_goal(goal.read_text("utf-8", "replace") if goal.exists() else ""),
            render_glance(overall, ledger, counts.get(now["id"]) if now else None, now),
            render_growth(overall, snapshots, counts),
            render_requests(ledger, quotas),
            render_tasks(read_tasks(root)),
            render_timeline(sections, diffs, overall["total"])]
    made = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return PAGE.format(style=STYLE, made=made, body="\n".join(body))


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


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><meta name="color-scheme" content="light dark">
<title>seed: watch it grow</title><style>{style}</style></head>
<body><header><h1>seed: watch it grow</h1>
<nav><a href="#glance">At a glance</a> <a href="#growth">Growth</a> <a href="#requests">Requests</a>
<a href="#tasks">Tasks</a> <a href="#timeline">Iterations</a></nav>
<p class="muted">Made {made} from the record (backups/record.sqlite) and the snapshots in backups/; rewritten
after every iteration.</p></header>
{body}
</body></html>
"""

STYLE = """
:root{--bg:#fff;--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;--card:#f6f8fa;--landed:#1a7f37;--rolled:#cf222e;
--waiting:#9a6700;--nochange:#6e7781;--stopped:#8250df;--other:#6e7781;--accent:#0969da;--add:#dafbe1;--del:#ffebe9}
@media (prefers-color-scheme:dark){:root{--bg:#0d1117;--fg:#e6edf3;--muted:#9198a1;--line:#3d444d;--card:#151b23;
--landed:#3fb950;--rolled:#f85149;--waiting:#d29922;--nochange:#9198a1;--stopped:#ab7df8;--other:#9198a1;
--accent:#4493f8;--add:#12361f;--del:#4a1d20}}
*{box-sizing:border-box}
body{margin:0 auto;max-width:1120px;padding:12px 16px 40px;background:var(--bg);color:var(--fg);
font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;overflow-wrap:anywhere}
h1{font-size:1.5em;margin:.3em 0}h2{font-size:1.2em;margin:1.6em 0 .5em;border-bottom:1px solid var(--line)}
h3{font-size:1em;margin:1em 0 .3em}
a{color:var(--accent)}nav a{margin-right:.8em;white-space:nowrap}.muted{color:var(--muted);font-size:.9em}
code,pre{font:12.5px/1.45 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre{background:var(--card);border:1px solid var(--line);border-radius:6px;padding:8px;overflow-x:auto;margin:.4em 0;
overflow-wrap:normal}
.goal{background:var(--card);border-radius:6px;padding:2px 12px}.goal pre{background:var(--bg)}
.tiles{display:grid;grid-template-columns:repeat(auto-fill,minmax(105px,1fr));gap:6px}
.tile{background:var(--card);border:1px solid var(--line);border-radius:6px;padding:6px 10px}
.tile b{display:block;font-size:1.25em}.tile span{color:var(--muted);font-size:.85em}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(300px,1fr));gap:12px}
figure{margin:0;background:var(--card);border:1px solid var(--line);border-radius:6px;padding:6px 8px}
figcaption{font-size:.9em}svg{width:100%;height:auto;display:block}
svg text{fill:var(--muted);font:11px system-ui,sans-serif}svg .grid{stroke:var(--line);stroke-width:1}
svg .line{fill:none;stroke:var(--accent);stroke-width:2}svg .area{fill:var(--accent);opacity:.12}
svg .landed{stroke:var(--landed);stroke-width:2}svg .rolled{stroke:var(--rolled);stroke-width:2}
svg .bars{fill:var(--accent)}svg .quota{stroke:var(--rolled);stroke-dasharray:4 3;stroke-width:1.5}
.key{font-size:.85em;color:var(--muted)}.key span{white-space:nowrap}
.key i{display:inline-block;width:10px;height:10px;margin:0 4px 0 10px}
svg.strip{height:16px;margin-top:10px}svg .cell{fill:var(--c);stroke:none}
table{border-collapse:collapse;font-size:.9em;width:100%;overflow-wrap:normal}
td,th{text-align:left;padding:3px 8px 3px 0;border-bottom:1px solid var(--line);vertical-align:top}
td.num,th.num{text-align:right}
td:nth-child(-n+2),.when{white-space:nowrap}
.scroll{overflow-x:auto}
details.it{border:1px solid var(--line);border-left:5px solid var(--other);border-radius:6px;margin:6px 0;
background:var(--bg)}details.it>summary{padding:6px 10px;cursor:pointer}details.it>div{padding:0 12px 8px}
.landed{--c:var(--landed)}.rolled{--c:var(--rolled)}.waiting{--c:var(--waiting)}.nochange{--c:var(--nochange)}
.stopped{--c:var(--stopped)}.other{--c:var(--other)}details.it{border-left-color:var(--c)}
.badge{color:var(--c);font-weight:600}.n{font-weight:600}
ins{color:var(--landed);text-decoration:none}del{color:var(--rolled);text-decoration:none}
.d-add,.d-del{display:inline-block;min-width:100%}.d-add{background:var(--add)}.d-del{background:var(--del)}
.d-hunk{color:var(--accent)}.d-file{font-weight:700}
ul.files,ol.tasks{margin:.3em 0;padding-left:1.4em}.fact{margin:.2em 0}
.count{display:inline-block;min-width:2.2em;text-align:center;border-radius:10px;background:var(--rolled);color:#fff;
font-weight:700;font-size:.85em;margin-right:.4em}
"""


def esc(value):
    return html.escape(str(value), quote=True)


def outcome_class(kind):
    return {"rolled back": "rolled", "no change": "nochange"}.get(kind, kind)


def render_goal(goal):
    """goal.md as a person wrote it, its Markdown rendered: headings, lists, code, emphasis, links; all escaped."""
    goal = re.sub(r"\A\s*#\s*Goal\s*\n", "", goal, flags=re.I)  # its own "# Goal" heading: the section has one
    html_ = markdown(goal) if goal.strip() else "<p>(goal.md is empty)</p>"
    return f'<section id="goal"><h2>Goal</h2><div class="goal">{html_}</div></section>'


def markdown(text):
    """The common part of Markdown as HTML: # headings, - and 1. lists, ``` fences, paragraphs, and inline code,
    **strong**, *emphasis* and http(s) links. Everything else is text, escaped: a goal cannot add a tag."""
    blocks, lines = [], iter(text.splitlines())  # [tag, [its lines]]; tag "" for HTML made here
    for line in lines:
        item = re.match(r"\s*(?:([-*+])|\d+[.)])\s+(.*)", line)
        heading = re.match(r"(#{1,6})\s+(.*?)[\s#]*$", line)
        if line.startswith("```"):
            code = list(iter(lambda: next(lines, "```").rstrip(), "```"))
            blocks.append(["", [f"<pre><code>{esc(chr(10).join(code))}</code></pre>"]])
        elif heading:
            level = min(len(heading[1]) + 2, 6)  # the page's own h1 and h2 stay above the goal's
            blocks.append(["", [f"<h{level}>{inline(heading[2])}</h{level}>"]])
        elif item or line.strip():
            tag = ("ul" if item[1] else "ol") if item else "p"
            if not blocks or blocks[-1][0] != tag:
                blocks.append([tag, []])
            blocks[-1][1].append(inline(item[2] if item else line.strip()))
        else:
            blocks.append(["", []])
    return "\n".join("".join(lines) if not tag else f"<p>{' '.join(lines)}</p>" if tag == "p" else
                     f"<{tag}>" + "".join(f"<li>{line}</li>" for line in lines) + f"</{tag}>"
                     for tag, lines in blocks if lines)


def inline(text):
    """One line's `code`, **strong**, *emphasis* and [links](http...), the rest escaped."""
    parts = re.split(r"(`[^`]+`)", text)
    return "".join(f"<code>{esc(part[1:-1])}</code>" if part.startswith("`") and len(part) > 1 else emphasis(part)
                   for part in parts)


def emphasis(text):
    text = esc(text)
    text = re.sub(r"\*\*(\S(?:.*?\S)?)\*\*|__(\S(?:.*?\S)?)__", lambda m: f"<strong>{m[1] or m[2]}</strong>", text)
    text = re.sub(r"(?<![\w*])\*(\S(?:.*?\S)?)\*(?!\w)|(?<!\w)_(\S(?:.*?\S)?)_(?!\w)",
                  lambda m: f"<em>{m[1] or m[2]}</em>", text)
    return re.sub(r"\[([^\]]+)\]\((https?://[^\s()\"<>]+)\)", r'<a href="\2">\1</a>', text)


def render_glance(overall, ledger, now, state):
    """The run at a glance: iterations by outcome, days running, requests and tokens, the codebase now."""
    kinds = {kind: overall["kinds"].get(kind, 0) for kind in OUTCOMES}
    uses = [use for models in ledger.values() for use in models.values()]
    tokens = sum(use.get(k, 0) for use in uses for k in ("prompt", "output", "thinking"))
    tiles = [(f"{overall['total']:,}", "iterations")] + [(f"{kinds[k]:,}", k) for k in OUTCOMES if kinds[k]]
    tiles += [(running_for(overall), "running"), (f"{sum(u.get('requests', 0) for u in uses):,}", "requests"),
              (f"{tokens / 1e6:.1f} M" if tokens >= 1e6 else f"{tokens:,}", "tokens")]
    if now:
        tiles += [(f"{now[0]:,}", "files now"), (f"{now[1]:,}", "lines now"), (f"{now[2]:,}", "tests now")]
    where = f" The codebase now is snapshot {esc(state['id'])}." if state and now else ""
    return ('<section id="glance"><h2>At a glance</h2><div class="tiles">'
            + "".join(f'<div class="tile"><b>{value}</b><span>{esc(label)}</span></div>' for value, label in tiles)
            + f'</div>{draw_outcomes(overall)}<p class="muted">Requests and tokens are from the ledger '
              f'(the requests in the record).{where}</p></section>')


def draw_outcomes(overall):
    """Every iteration as a cell coloured by its outcome, oldest first, with the key to the colours; past
    STRIP_MOST iterations, a cell stands for several and shows the best that happened in them."""
    if not overall["total"]:
        return ""
    kinds = [(*OUTCOMES, "other")[rank] for rank in overall["strip"]]  # ranked in record.Kind's order
    width, gap = max(len(kinds), STRIP_CELLS), 0.2 if len(kinds) <= STRIP_CELLS else 0
    cells = {}
    for n, kind in enumerate(kinds):
        cells.setdefault(outcome_class(kind), []).append(f"M{n} 0h{1 - gap:g}v1h-{1 - gap:g}z")
    key = "".join(f'<span><i style="background:var(--{outcome_class(kind)})"></i>{kind}</span>' for kind in OUTCOMES)
    each = f", a cell for each {overall['width']:,}" if overall["width"] > 1 else ""
    return (f'<svg class="strip" viewBox="0 0 {width} 1" preserveAspectRatio="none" role="img">'
            + "".join(f'<path class="cell {kind}" d="{"".join(d)}"/>' for kind, d in cells.items())
            + f'</svg><p class="key">Iterations {overall["low"]:,} to {overall["high"]:,}, oldest first{each}: '
              f'{key}</p>')


def running_for(overall):
    """How long the recorded iterations span: minutes, hours or days."""
    times = [record.heading_time({"ended": overall[end]}) for end in ("first", "last") if overall[end]]
    seconds = (times[-1] - times[0]).total_seconds() if len(times) == 2 and all(times) else 0
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:.0f} days"
    return f"{seconds / 3600:.0f} hours" if seconds >= 2 * 3600 else f"{seconds / 60:.0f} min"


# --- charts, drawn as inline SVG -----------------------------------------------------------------
W, H, LEFT, RIGHT, TOP, BOTTOM = 360, 190, 44, 352, 10, 140  # a chart's frame and its plot area


def nice_top(value):
    """The top of a chart's scale: twice the smallest 1, 2 or 5 times a power of ten at or above half
    the value, so that the line halfway is a round number too."""
    if value <= 0:
        return 1
    step = 10.0 ** math.floor(math.log10(value / 2))  # a score of 0 to 1 gets a scale of 0 to 1, not 2
    return 2 * next(half for half in (step, step * 2, step * 5, step * 10) if half >= value / 2)


def y_axis(top):
    """Grid lines and labels at 0, half and the top of a chart whose scale ends at `top`."""
    parts = []
    for value in (0, top / 2, top):
        y = BOTTOM - (BOTTOM - TOP) * value / top
        parts.append(f'<path class="grid" d="M{LEFT} {y:.1f}H{RIGHT}"/>'
                     f'<text x="{LEFT - 4}" y="{y + 4:.1f}" text-anchor="end">{short(value)}</text>')
    return "".join(parts)


def short(value):
    if value >= 10_000:
        return f"{value / 1000:.0f}k"
    return f"{value / 1000:.1f}k" if value >= 1000 else f"{value:g}"


def draw_growth(points, marks, last):
    """A line through (iteration, value), up to `last`, landings and rollbacks marked beneath. The codebase
    changes only when a change lands: a step there, or a straight line across landings whose snapshots
    are pruned (nothing is known between)."""
    top = nice_top(max((v for _, v in points), default=1))
    x = lambda n: LEFT + (RIGHT - LEFT) * n / (last + 1)  # a slot after `last`: its state, and its step, show
    y = lambda v: BOTTOM - (BOTTOM - TOP) * v / top
    landed = sorted(marks["landed"])
    unknown = lambda a, b: bisect_left(landed, b) > bisect_right(landed, a)  # a landing not kept between
    line = f"M{x(points[0][0]):.1f} {y(points[0][1]):.1f}" + "".join(
        f"L{x(n):.1f} {y(v):.1f}" if unknown(before, n) else f"H{x(n):.1f}V{y(v):.1f}"
        for (before, _), (n, v) in zip(points, points[1:])) + f"H{RIGHT}"
    ticks = {kind: "".join(f"M{at:.1f} {row}v9" for at in sorted({round(x(n), 1) for n in numbers}))  # one a place
             for (kind, numbers), row in zip(marks.items(), (BOTTOM + 5, BOTTOM + 16))}
    return (f'<svg viewBox="0 0 {W} {H}" role="img">{y_axis(top)}'
            f'<path class="area" d="{line}V{BOTTOM}H{x(points[0][0]):.1f}Z"/><path class="line" d="{line}"/>'
            + "".join(f'<path class="{kind}" d="{d}"/>' for kind, d in ticks.items() if d)
            + f'<text x="{LEFT}" y="{H - 8}">0</text><text x="{x(last):.1f}" y="{H - 8}" text-anchor="end">{last:,}'
              f'</text>'
              f'<text x="{(LEFT + x(last)) / 2:.1f}" y="{H - 8}" text-anchor="middle">iteration</text></svg>')


def render_growth(overall, snapshots, counts):
    """Files, lines and tests of each state kept, over the iterations, with landings and rollbacks marked."""
    points = [(at, counts[e["id"]]) for at, e in state_snapshots(snapshots) if e["id"] in counts]
    if not points:
        return '<section id="growth"><h2>Growth</h2><p>No snapshot is kept yet.</p></section>'
    marks = {"landed": overall["marks"]["landed"], "rolled": overall["marks"]["rolled back"]}
    last = max([overall["high"]] + [at for at, _ in points] + [1])
    charts = [f'<figure><figcaption>{title}: <b>{points[-1][1][column]:,}</b></figcaption>'
              f'{draw_growth([(at, c[column]) for at, c in points], marks, last)}</figure>'
              for column, title in enumerate(("Files", "Lines", "Tests"))]
    scores = overall["scores"]
    if scores:  # the person's evaluate.py: the score of each state that landed
        charts.append(f'<figure><figcaption>Score (evaluate.py): <b>{scores[-1][1]:g}</b></figcaption>'
                      f'{draw_growth(scores, marks, last)}</figure>')
    return ('<section id="growth"><h2>Growth</h2><div class="charts">' + "".join(charts) + '</div>'
            '<p class="key"><span><i style="background:var(--landed)"></i>landed</span> <span><i style="background:'
            f'var(--rolled)"></i>rolled back</span> — from the {len(points)} snapshot(s) kept; older ones are '
            'pruned, the record keeps every iteration.</p></section>')


def draw_bars(days, values, quota):
    """Requests per day as bars, with the model's daily quota as a dashed line (or a note, when it is so
    far above them that the bars would not show)."""
    shown = quota if quota and quota <= 8 * max(values + [1]) else 0
    top = nice_top(max(values + [shown, 1]))
    slot = (RIGHT - LEFT) / len(days)
    y = lambda v: BOTTOM - (BOTTOM - TOP) * v / top
    bars = "".join(f"M{LEFT + slot * n + slot * .15:.1f} {BOTTOM}V{y(v):.1f}h{slot * .7:.1f}V{BOTTOM}Z"
                   for n, v in enumerate(values) if v)
    line = f'<path class="quota" d="M{LEFT} {y(shown):.1f}H{RIGHT}"/>' if shown else ""
    if quota:
        line += (f'<text x="{RIGHT}" y="{y(shown) + 13 if shown else TOP + 4:.1f}" text-anchor="end">quota {quota} '
                 f'a day{"" if shown else ", far above"}</text>')
    ends = (f'<text x="{LEFT}" y="{H - 30}">{esc(days[0][5:])}</text>'
            f'<text x="{RIGHT}" y="{H - 30}" text-anchor="end">{esc(days[-1][5:])}</text>') if len(days) > 1 else \
        f'<text x="{(LEFT + RIGHT) / 2}" y="{H - 30}" text-anchor="middle">{esc(days[0][5:])}</text>'  # one day: once
    return f'<svg viewBox="0 0 {W} {H - 20}" role="img">{y_axis(top)}<path class="bars" d="{bars}"/>{line}{ends}</svg>'


def render_requests(ledger, quotas):
    """Per model: requests per Pacific day against its daily quota; a table of what each model cost."""
    days = sorted(ledger)[-CHART_DAYS:]
    models = sorted({m for day in days for m in ledger[day]})
    if not days or not models:
        return '<section id="requests"><h2>Requests per day</h2><p>No request is in the ledger yet.</p></section>'
    counted = lambda day, model: reached(ledger[day].get(model, {}))  # as the quota counts them
    unreached = lambda model: sum(ledger[d].get(model, {}).get("requests", 0) - counted(d, model) for d in days)
    charts = [f'<figure><figcaption><code>{esc(m)}</code>: {sum(counted(d, m) for d in days):,} request(s)'
              f'{f" (and {unreached(m):,} that never reached it)" if unreached(m) else ""}'
              f'{f", quota {quotas[m]} a day" if m in quotas else ""}</figcaption>'
              f'{draw_bars(days, [counted(d, m) for d in days], quotas.get(m))}</figure>' for m in models]
    return (f'<section id="requests"><h2>Requests per day</h2><p class="muted">Pacific days, {esc(days[0])} to '
            f'{esc(days[-1])}; the requests that may have reached the model, as its daily quota counts them.</p>'
            '<div class="charts">' + "".join(charts) + "</div>"
            + render_costs(ledger, models) + "</section>")


def render_costs(ledger, models):
    """A table of what each model cost over the whole ledger: requests, tokens, requests wasted."""
    total = lambda model, keys: sum(ledger[day].get(model, {}).get(key, 0) for day in ledger for key in keys)
    wasted = lambda model: sum(sum(ledger[day].get(model, {}).get("wasted", {}).values()) for day in ledger)
    rows = "".join(f'<tr><td><code>{esc(m)}</code></td><td class="num">{total(m, ["requests"]):,}</td>'
                   f'<td class="num">{total(m, ["prompt", "output", "thinking"]):,}</td>'
                   f'<td class="num">{wasted(m):,}</td></tr>' for m in models)
    return ('<div class="scroll"><table><tr><th>model</th><th class="num">requests</th><th class="num">tokens</th>'
            f'<th class="num">wasted</th></tr>{rows}</table></div><p class="muted"><b>requests</b>: calls made to the '
            'model, answered or not; <b>tokens</b>: prompt, answer and thinking together; <b>wasted</b>: requests '
            'that brought nothing that landed: refused (a per-minute or daily limit, an error) or answered with a '
            'change that did not land (it failed the gate, or had nothing to apply). Each reason is counted in '
            'the record (backups/record.sqlite).</p>')


# --- tasks and the timeline ------------------------------------------------------------------------
def render_tasks(tasks):
    """A person's open tasks, the failure memory with its counts, and the tasks done (newest first)."""
    mine = [t for t in tasks if not t["done"] and not t["failure"]]
    failures = [t for t in tasks if not t["done"] and t["failure"]]
    done = [t for t in reversed(tasks) if t["done"]]
    parts = ['<section id="tasks"><h2>Tasks</h2>',
             f'<h3>Open ({len(mine)})</h3>' + task_list(mine, "No open task: add one to pending_tasks.md as "
                                                                "<code>- [ ] what to do</code>."),
             f'<h3>Failures remembered ({len(failures)})</h3>'
             + ("".join(render_failure(t) for t in failures) or "<p>None open.</p>"),
             f'<details{" open" if len(done) <= 10 else ""}><summary><b>Done ({len(done)})</b></summary>'
             + task_list(done, "None yet.") + "</details></section>"]
    return "".join(parts)


def task_list(tasks, empty):
    if not tasks:
        return f"<p>{empty}</p>"
    return "<ul>" + "".join(f"<li>{esc(t['text'])}{render_detail(t['detail'])}</li>" for t in tasks) + "</ul>"


def render_detail(lines, label="details"):
    return f"<details><summary>{label}</summary><pre>{esc(chr(10).join(lines))}</pre></details>" if lines else ""


def render_failure(task):
    _, times, since, after, rest = task["failure"].groups()
    return (f'<div class="fact"><span class="count" title="times">×{esc(times)}</span>{esc(task["text"])}'
            f'<span class="muted"> — since {esc(since)}, first after snapshot {esc(after)}{esc(rest)}</span>'
            f'{render_detail(task["detail"], "its output")}</div>')


def render_timeline(sections, diffs, total):
    """The newest FULL_CARDS iterations in full (OPEN_CARDS unfolded), the older ones one row each."""
    newest = list(reversed(sections))
    cards = [render_card(s, diffs.get(s["number"]), n < OPEN_CARDS, n < EXCHANGE_CARDS)
             for n, s in enumerate(newest[:FULL_CARDS])]
    older = newest[FULL_CARDS:]
    rows = "".join(render_row(s) for s in older[:OLDER_ROWS])
    rest = (f'<p class="muted">and {total - len(sections):,} older still: <code>python fallback.py --show N</code> '
            'shows any of them, and the record holds them all (docs/files.md)</p>') if total > len(sections) else ""
    table = (f'<details><summary><b>{total - len(newest[:FULL_CARDS]):,} older iteration(s)</b>, one row each'
             f'</summary><div class="scroll">'
             f'<table><tr><th>#</th><th>time (UTC)</th><th>outcome</th><th>files</th></tr>{rows}</table>{rest}'
             '</div></details>') if older else ""
    return (f'<section id="timeline"><h2>Iterations, newest first ({total:,})</h2>'
            + ("".join(cards) or "<p>No iteration is logged yet.</p>") + table + "</section>")


def render_row(section):
    changed, more = files_changed(section)
    files = ", ".join(name for name, *_ in changed[:4]) + (" …" if len(changed) > 4 or more else "")
    return (f'<tr class="{outcome_class(section["kind"])}"><td>{section["number"]}</td>'
            f'<td>{esc(section["heading_time"][:16])}</td><td class="badge">{esc(section["outcome"])}</td>'
            f'<td>{esc(files)}</td></tr>')


def render_card(section, diff, unfolded, exchanges=False):
    """One iteration: outcome, tasks, files with +/-, what the log says, its output, a landing's diff, and its
    requests (for the newest; else the command that shows them)."""
    changed, more = files_changed(section)
    summary = (f'<summary><span class="n">#{section["number"]}</span> <span class="badge">{esc(section["outcome"])}'
               f'</span> <span class="muted when">{esc(section["heading_time"])}</span></summary>')
    tasks = "<ol class=\"tasks\">" + "".join(f"<li>{esc(t)}</li>" for t in section["tasks"]) + "</ol>"
    files = "".join(f'<li><code>{esc(name)}</code>{f" ({kind})" if kind else ""} <ins>+{added}</ins> '
                    f'<del>−{removed}</del></li>' for name, kind, added, removed in changed)
    files = f'<ul class="files">{files}{f"<li>and {more} more</li>" if more else ""}</ul>' if changed else ""
    facts = "".join(f'<p class="fact"><b>{esc(label)}</b>{": " if label else ""}{esc(value)}</p>'
                    for label, value in section["facts"] if not (label == "Files" and changed) and (label or value))
    body = (tasks if section["tasks"] else "") + files + facts + render_detail(section["output"], "last output")
    if section["kind"] == "landed":
        body += render_diff(diff)
    body += render_exchanges(section) if exchanges else \
        f'<p class="muted">What it was asked and answered: <code>python fallback.py --show {section["number"]}</code>' \
        '</p>'
    return (f'<details class="it {outcome_class(section["kind"])}" id="i{section["number"]}"'
            f'{" open" if unfolded else ""}>{summary}<div>{body}</div></details>')


def render_exchanges(section):
    """The iteration's requests (model, kind, tokens, latency, waste) and the command that shows each prompt as sent
    and answer as received: the page holds none of the model's text that did not land."""
    rows = "".join(f'<tr><td>{request}</td><td><code>{esc(model)}</code></td><td>{esc(kind)}</td>'
                   f'<td class="num">{prompt + output + thinking:,}</td><td class="num">{latency or 0:.1f} s</td>'
                   f'<td>{esc(wasted or "")}</td></tr>'
                   for request, model, kind, prompt, output, thinking, latency, wasted
                   in record.requests_of(section["root"], section["number"]))
    table = ('<div class="scroll"><table><tr><th>request</th><th>model</th><th>came back as</th><th class="num">tokens'
             f'</th><th class="num">took</th><th>wasted</th></tr>{rows}</table></div>') if rows else ""
    return table + (f'<p class="muted">What it was asked and what it answered, byte for byte: <code>python '
                    f'fallback.py --show {section["number"]}</code></p>')


def render_diff(diff):
    if not diff:
        return '<p class="muted">No diff: no snapshot kept holds the codebase both before and after this landing.</p>'
    before, after, lines = diff
    shown = "\n".join(f'<span class="{diff_class(line)}">{esc(line)}</span>' if diff_class(line) else esc(line)
                      for line in lines)
    return (f'<details{" open" if len(lines) <= DIFF_OPEN else ""}><summary>diff, snapshot {esc(before["id"])} → '
            f'{esc(after["id"])} ({len(lines)} line(s))</summary><pre>{shown}</pre></details>')


def diff_class(line):
    if line.startswith(("+++", "---")):
        return "d-file"
    return {"+": "d-add", "-": "d-del", "@": "d-hunk"}.get(line[:1], "")
