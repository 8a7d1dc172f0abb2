"""report: the page that shows the codebase growing, report.html, made from the keeper's record alone.

    write_report(root)    writes root/report.html atomically and returns its path

It renders the run as history.py reads it (the record, the snapshots, what each state measures, each landing's
diff) with pending_tasks.md and goal.md, and nothing else, so the page cannot disagree with the keeper. The page
is one file that needs no network: inline CSS (light and dark, phone and desktop), charts drawn as inline SVG
(their frame, scales and axes: chart.py), <details> to fold, no script. Everything that came from the model or a
person is escaped.
"""
import os
import re
from bisect import bisect_left, bisect_right
from datetime import datetime, timezone
from pathlib import Path

from . import history
from .chart import BOTTOM, H, LEFT, RIGHT, STYLE, TOP, W, esc, nice_top, x_ticks, y_axis
from ..store import journal, record
from .history import OUTCOMES
from ..store.ledger import reached
from ..gateway.models import Models
from ..scrub import redact
from ..settings import NAMED, write_atomically

# --- settings ---------------------------------------------------------------------------------
REFRESH_SECONDS = 60  # while the keeper runs, the page reloads itself this often (not once it has stopped)
FULL_CARDS = 200   # newest iterations shown in full (tasks, files, reason, output, diff); older ones as one row each
OPEN_CARDS = 20    # of those, the newest shown unfolded
EXCHANGE_CARDS = 20  # of those, the newest with a table of their requests
DIFF_OPEN = 40     # a diff of up to this many lines is shown unfolded
CHART_DAYS = 60    # the newest days in the requests chart
STRIP_CELLS = 40   # the outcome strip is this many iterations wide at least (fewer leave room on the right)
STRIP_MOST = 2_000  # and at most this many cells: past that, a cell stands for several iterations
OLDER_ROWS = 500   # older iterations listed one row each; those before are reached with --show N


# --- the page -----------------------------------------------------------------------------------
def write_report(root, quotas=None, live=False):
    """Write root/report.html from the record (atomically); its path. `quotas`: {model: requests a day},
    by default as models.py knows them; `live`: the keeper is running, and the page reloads itself."""
    root = Path(root)
    run = history.read(root, FULL_CARDS, FULL_CARDS + OLDER_ROWS, STRIP_MOST, diffs=FULL_CARDS)
    quotas = daily_quotas(root, {model for models in run.ledger.values() for model in models}) if quotas is None \
        else quotas
    write_atomically(root / "report.html", redact(render_page(run, quotas, live)))
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


def render_page(run, quotas, live=False):
    now, goal = run.now(), NAMED.get("goal.md", run.root / "goal.md")  # --goal's
    body = [render_goal(goal.read_text("utf-8", "replace") if goal.exists() else ""),
            render_glance(run.overall, run.ledger, run.counts.get(now["id"]) if now else None, now),
            render_growth(run.overall, run.snapshots, run.counts),
            render_requests(run.ledger, quotas),
            render_tasks(journal.parse_tasks(journal.read_tasks(run.root / "pending_tasks.md"))),
            render_timeline(run.sections, run.diffs, run.overall["total"])]
    made = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    refresh = f'<meta http-equiv="refresh" content="{REFRESH_SECONDS}">' if live else ""
    when = f"; this page reloads itself every {REFRESH_SECONDS} s while the keeper runs" if live else ""
    return PAGE.format(style=STYLE, made=made, body="\n".join(body), refresh=refresh, when=when,
                       run=render_identity(run.root, record.identity(run.root)))


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><meta name="color-scheme" content="light dark">
{refresh}<title>seed: watch it grow</title><style>{style}</style></head>
<body><header><h1>seed: watch it grow</h1>
<nav><a href="#glance">At a glance</a> <a href="#growth">Growth</a> <a href="#requests">Requests</a>
<a href="#tasks">Tasks</a> <a href="#timeline">Iterations</a></nav>
<p class="muted">Made {made} from the record (backups/record.sqlite) and the snapshots in backups/; rewritten
after every iteration{when}.</p>
{run}</header>
{body}
</body></html>
"""



def render_identity(root, identity):
    """The run's identity: its id, the keeper's versions, its models, and the run it was forked from, linked."""
    if not identity:
        return ""
    parent, models = identity["parent"], ", ".join(identity["models"]) or "none yet"
    line = (f'Run <code>{esc(identity["id"])}</code> · keeper {esc(", ".join(identity["versions"]))} · models '
            f'{esc(models)}')
    if parent:
        link = Path(os.path.relpath(Path(parent["folder"]) / "report.html", root)).as_posix()
        line += (f' · forked from <a href="{esc(link)}">{esc(parent["folder"])}</a> (run '
                 f'<code>{esc(parent["run"] or "?")}</code>) after iteration {esc(parent["iteration"])}')
    return f'<p class="muted" id="run">{line}</p>'


def outcome_class(kind):
    return {"rolled back": "rolled", "no change": "nochange"}.get(kind, kind)


def render_goal(goal):
    """goal.md as a person wrote it, its Markdown rendered: headings, lists, code, emphasis, links; all escaped."""
    goal = re.sub(r"\A\s*#\s*Goal\s*\n", "", goal, flags=re.I)  # its own "# Goal" heading: the section has one
    html_ = markdown(goal) if goal.strip() else "<p>(goal.md is empty)</p>"
    return f'<section id="goal"><h2>Goal</h2><div class="goal" dir="auto">{html_}</div></section>'


def markdown(text):
    """The common part of Markdown as HTML: # headings, - and 1. lists, ``` fences, paragraphs, and inline code,
    **strong**, *emphasis* and http(s) links. Everything else is text, escaped: a goal cannot add a tag."""
    blocks, lines = [], iter(text.splitlines())  # [tag, [its lines]]; tag "" for HTML made here
    for line in lines:
        item = re.match(r"\s*(?:([-*+])|\d+[.)])\s+(.*)", line)
        heading = re.match(r"(#{1,6})\s+(.*)", line)
        if line.startswith("```"):
            code = list(iter(lambda: next(lines, "```").rstrip(), "```"))
            blocks.append(["", [f"<pre><code>{esc(chr(10).join(code))}</code></pre>"]])
        elif heading:
            level = min(len(heading[1]) + 2, 6)  # the page's own h1 and h2 stay above the goal's
            title = inline(heading[2].rstrip(" \t#"))  # its closing #s, if it has any
            blocks.append(["", [f"<h{level}>{title}</h{level}>"]])
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
    """**strong**, *emphasis* and [links](http...) of escaped text. Each pattern reads from an opening no further
    than the next mark of its kind (no * inside *...*, no bracket inside [...]): linear in the line, where reading on
    to the line's end from every opening that never closes took its square (minutes on 100 KB of "[")."""
    text = esc(text)
    text = re.sub(r"\*\*([^*\s](?:[^*]*?[^*\s])?)\*\*|__([^_\s](?:[^_]*?[^_\s])?)__",
                  lambda m: f"<strong>{m[1] or m[2]}</strong>", text)
    text = re.sub(r"(?<![\w*])\*([^*\s](?:[^*]*?[^*\s])?)\*(?!\w)|(?<!\w)_([^_\s](?:[^_]*?[^_\s])?)_(?!\w)",
                  lambda m: f"<em>{m[1] or m[2]}</em>", text)
    return re.sub(r"\[([^\]\[]+)\]\((https?://[^\s()\"<>]+)\)", r'<a href="\2">\1</a>', text)


def render_glance(overall, ledger, now, state):
    """The run at a glance: iterations by outcome, days running, requests and tokens, the codebase now."""
    kinds = {kind: overall["kinds"].get(kind, 0) for kind in OUTCOMES}
    uses = [use for models in ledger.values() for use in models.values()]
    tokens = sum(use.get(k, 0) for use in uses for k in ("prompt", "output", "thinking"))
    tiles = [(f"{overall['total']:,}", "iterations")] + [(f"{kinds[k]:,}", k) for k in OUTCOMES if kinds[k]]
    tiles += [(running_for(overall), "from first to last"), (f"{sum(map(reached, uses)):,}", "requests"),
              (f"{tokens / 1e6:.1f} M" if tokens >= 1e6 else f"{tokens:,}", "tokens")]
    if now:
        tiles += [(f"{now[0]:,}", "files now"), (f"{now[1]:,}", "lines now"), (f"{now[2]:,}", "tests now")]
    where = f" The codebase now is snapshot {esc(state['id'])}." if state and now else ""
    return ('<section id="glance"><h2>At a glance</h2><div class="tiles">'
            + "".join(f'<div class="tile"><b>{value}</b><span>{esc(label)}</span></div>' for value, label in tiles)
            + f'</div>{draw_outcomes(overall)}<p class="muted">Requests and tokens are from the ledger '
              f'(the requests in the record that may have reached a model: as its quota counts them).{where}</p>'
              '</section>')


def draw_outcomes(overall):
    """Every iteration as a cell coloured by its outcome, oldest first, with the key to the colours; past
    STRIP_MOST iterations, a cell stands for several and shows the best that happened in them."""
    if not overall["total"]:
        return ""
    kinds = [(*OUTCOMES, "other")[rank] for rank in overall["strip"]]  # ranked in Outcome's order
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
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.0f} hours"
    return f"{seconds / 60:.0f} min" if seconds >= 60 else "under a minute"


# --- charts, drawn as inline SVG -----------------------------------------------------------------
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
    ticks = {kind: "".join(f"M{at:.1f} {row}v6" for at in sorted({round(x(n), 1) for n in numbers}))  # one a place
             for (kind, numbers), row in zip(marks.items(), (BOTTOM + 4, BOTTOM + 11))}  # both above the labels
    return (f'<svg viewBox="0 0 {W} {H}" role="img">{y_axis(top)}'
            f'<path class="area" d="{line}V{BOTTOM}H{x(points[0][0]):.1f}Z"/><path class="line" d="{line}"/>'
            + "".join(f'<path class="{kind}" d="{d}"/>' for kind, d in ticks.items() if d)
            + "".join(f'<text x="{x(n):.1f}" y="{H - 22}" text-anchor="{anchor}">{n:,}</text>'
                      for n, anchor in x_ticks(last))
            + f'<text x="{(LEFT + x(last)) / 2:.1f}" y="{H - 6}" text-anchor="middle">iteration</text></svg>')


def render_growth(overall, snapshots, counts):
    """Files, lines and tests of each state kept, over the iterations, with landings and rollbacks marked."""
    points = [(at, counts[e["id"]]) for at, e in history.state_snapshots(snapshots) if e["id"] in counts]
    if not points:
        return '<section id="growth"><h2>Growth</h2><p>No snapshot is kept yet.</p></section>'
    marks = {"landed": overall["marks"]["landed"], "rolled": overall["marks"]["rolled back"]}
    pruned = len(points) < overall["kinds"].get("landed", 0) + 1  # genesis and each landing, when all are kept
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
            f'var(--rolled)"></i>rolled back</span> — from the {len(points)} snapshot(s) kept'
            + ('; older ones are pruned, the record keeps every iteration' if pruned else '') + '.</p></section>')


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
        line += (f'<text x="{RIGHT}" y="{y(shown) + 13 if shown else TOP + 4:.1f}" text-anchor="end">quota {quota:,} '
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
              f'{f", quota {quotas[m]:,} a day" if m in quotas else ""}</figcaption>'
              f'{draw_bars(days, [counted(d, m) for d in days], quotas.get(m))}</figure>' for m in models]
    return (f'<section id="requests"><h2>Requests per day</h2><p class="muted">Pacific days, {esc(days[0])} to '
            f'{esc(days[-1])}; the requests that may have reached the model, as its daily quota counts them.</p>'
            '<div class="charts">' + "".join(charts) + "</div>"
            + render_costs(ledger, models) + "</section>")


def render_costs(ledger, models):
    """A table of what each model cost over the whole ledger: requests, tokens, requests wasted."""
    uses = lambda model: [ledger[day].get(model, {}) for day in ledger]
    total = lambda model, keys: sum(use.get(key, 0) for use in uses(model) for key in keys)
    sent = lambda model: sum(map(reached, uses(model)))
    unreached = lambda model: total(model, ["requests"]) - sent(model)
    wasted = lambda model: sum(sum(use.get("wasted", {}).values()) for use in uses(model)) - unreached(model)
    rows = "".join(f'<tr><td><code>{esc(m)}</code></td><td class="num">{sent(m):,}</td>'
                   f'<td class="num">{total(m, ["prompt", "output", "thinking"]):,}</td>'
                   f'<td class="num">{wasted(m):,}</td><td class="num">{unreached(m):,}</td></tr>' for m in models)
    return ('<div class="scroll"><table><tr><th>model</th><th class="num">requests</th><th class="num">tokens</th>'
            f'<th class="num">wasted</th><th class="num">never reached it</th></tr>{rows}</table></div><p '
            'class="muted"><b>requests</b>: calls that may have reached the model (as its quota counts them), '
            'answered or not; <b>tokens</b>: prompt, answer and thinking together; <b>wasted</b>: of those, requests '
            'that brought nothing that landed: refused (a per-minute or daily limit, an error) or answered with a '
            'change that did not land (it failed the gate, or had nothing to apply); <b>never reached it</b>: '
            'requests the network kept from the model, beside the quota. Each reason is counted in the record '
            '(backups/record.sqlite).</p>')


# --- tasks and the timeline ------------------------------------------------------------------------
def render_tasks(tasks):
    """A person's open tasks, the failure memory with its counts, and the tasks done (newest first)."""
    mine = [t for t in tasks if not t.done and not t.failure]
    failures = [t for t in tasks if not t.done and t.failure]
    done = [t for t in reversed(tasks) if t.done]
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
    return "<ul>" + "".join(f"<li>{esc(said_of(t))}{render_detail(t.detail)}</li>" for t in tasks) + "</ul>"


def said_of(task):
    """What a task says, without the keeper's failure bracket."""
    return " ".join(task.failure.string[:task.failure.start()].split()) if task.failure else task.text


def render_detail(lines, label="details"):
    return f"<details><summary>{label}</summary><pre>{esc(chr(10).join(lines))}</pre></details>" if lines else ""


def render_failure(task):
    failure = task.failure
    return (f'<div class="fact"><span class="count" title="times">×{esc(failure[2])}</span>{esc(said_of(task))}'
            f'<span class="muted"> — since {esc(failure[3])}, {esc(failure[4])}{esc(failure.string[failure.end():])}'
            '</span>'
            f'{render_detail(task.detail, "its output")}</div>')


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
    changed, more = history.files_changed(section)
    files = ", ".join(name for name, *_ in changed[:4]) + (" …" if len(changed) > 4 or more else "")
    return (f'<tr class="{outcome_class(section["kind"])}"><td>{section["number"]}</td>'
            f'<td>{esc(section["heading_time"][:16])}</td><td class="badge">{esc(section["outcome"])}</td>'
            f'<td>{esc(files)}</td></tr>')


def render_card(section, diff, unfolded, exchanges=False):
    """One iteration: outcome, tasks, files with +/-, what the log says, its output, a landing's diff, and its
    requests (for the newest; else the command that shows them)."""
    changed, more = history.files_changed(section)
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


def took(latency):
    """How long a request took, as the page says it: milliseconds under a second; a dash for one cut short."""
    if latency is None:
        return "—"
    return f"{latency:.1f} s" if latency >= 1 else f"{latency * 1000:.0f} ms"


def render_exchanges(section):
    """The iteration's requests (model, kind, tokens, latency, waste) and the command that shows each prompt as sent
    and answer as received: the page holds none of the model's text that did not land."""
    rows = "".join(f'<tr><td>{request}</td><td><code>{esc(model)}</code></td><td>{esc(kind)}</td>'
                   f'<td class="num">{prompt + output + thinking:,}</td><td class="num">{took(latency)}</td>'
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
            f'{esc(after["id"])} ({len(lines)} line(s))</summary><pre class="diff">{shown}</pre></details>')


def diff_class(line):
    if line.startswith(("+++", "---")):
        return "d-file"
    return {"+": "d-add", "-": "d-del", "@": "d-hunk"}.get(line[:1], "")
