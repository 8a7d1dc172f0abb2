"""compare: runs side by side, compare.html, made from each run's record and snapshots alone.

    write_compare(root, folders)    python fallback.py --compare DIR [DIR ...]: the exit code

The runs are this folder's and those of the folders named (each a folder the keeper has run in), read only.
For each: its identity (record.py's runs), its iterations (outcome, model, requests, tokens, score) and the
files, lines and tests of each state its snapshots keep (counted as report.py counts them). The page draws
them over the iterations and over the requests spent: growth, the score and the share that landed, one line a
run; a run forked from another is drawn from its parent's line at the fork, marked there. Tables give each run's
totals and, by model, its requests and tokens per landing. Like report.html, one file that needs no network:
inline CSS (light and dark, phone and desktop), inline SVG, no script. What came from a model or a person is
escaped.
"""
import math
import os
from datetime import datetime, timezone
from pathlib import Path

from ..store import record
from ..experiments.experiment import refuse
from .history import load_cache, measure_states, state_snapshots
from .chart import BOTTOM, H, LEFT, RIGHT, STYLE, TOP, W, esc, nice_top, short, x_ticks, y_axis
from ..settings import write_atomically
from ..store.snapshots import Reader

POINTS = 400  # the most points a run's line is drawn through (a long run is sampled evenly, its last kept)
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
METRICS = (("files", "Files"), ("lines", "Lines"), ("tests", "Tests"), ("score", "Score (evaluate.py)"),
           ("share", "Share landed"))


def write_compare(root, folders):
    """Write root/compare.html comparing this folder's run with those in `folders`; the exit code (78 with one line
    for a folder that holds no run)."""
    chosen = list(dict.fromkeys(Path(folder).resolve() for folder in [root, *folders]))
    empty = next((folder for folder in chosen if not record.path_of(folder).is_file()), None)
    if empty:
        return refuse(f"{empty} holds no record (backups/record.sqlite): compare folders the keeper has run in")
    runs = [read_run(folder, LETTERS[n % 26] + str(n // 26 or "")) for n, folder in enumerate(chosen)]
    join_forks(runs)
    try:
        write_atomically(root / "compare.html", render_page(root, runs))
    except OSError as error:
        return refuse(f"cannot write compare.html ({error.strerror or error}): make the folder writable")
    print(f"the comparison of {len(runs)} run(s) is in {root / 'compare.html'}: open it in a browser")
    return 0


# --- reading each run -----------------------------------------------------------------------------
def read_run(root, letter):
    """A run as the page draws it: {root, letter, identity, rows, spent (requests after each iteration), growth
    [(iteration, files, lines, tests)], by_model}."""
    rows = record.series(root)
    spent, total = {}, 0
    for row in rows:
        total += row["requests"]
        spent[row["number"]] = total
    store = Reader(root)
    snapshots = store.snapshots()
    counts = measure_states(store, snapshots, load_cache(root)["folders"], {})
    growth = [(at, *counts[e["id"]]) for at, e in state_snapshots(snapshots) if e["id"] in counts]
    return {"root": root, "letter": letter, "identity": record.identity(root), "rows": rows, "spent": spent,
            "growth": growth, "by_model": by_model(rows), "offset": 0}


def by_model(rows):
    """{model: {iterations, landed, asked, requests, tokens}} of a run's iterations."""
    found = {}
    for row in rows:
        use = found.setdefault(row["model"] or "none", dict.fromkeys(("iterations", "landed", "asked", "requests",
                                                                      "tokens"), 0))
        use["iterations"] += 1
        use["landed"] += row["kind"] == "landed"
        use["asked"] += row["requests"] > 0
        use["requests"] += row["requests"]
        use["tokens"] += row["tokens"]
    return found


def join_forks(runs):
    """Give each fork whose parent is compared its parent (`source`), the iteration it forked after (`at`) and the
    requests its parent had spent then (`offset`), so that its lines start where its parent's were."""
    by_id = {run["identity"]["id"]: run for run in runs if run["identity"]}
    by_folder = {str(run["root"]): run for run in runs}
    for run in runs:
        parent = (run["identity"] or {}).get("parent")
        source = parent and (by_id.get(parent["run"]) or by_folder.get(str(Path(parent["folder"]).resolve())))
        if source and run not in lineage(source):
            run.update(source=source, at=parent["iteration"], offset=source["spent"].get(parent["iteration"], 0))


def lineage(run):
    """The run and the runs it was forked from, as joined so far."""
    found = [run]
    while found[-1].get("source") and found[-1]["source"] not in found:
        found.append(found[-1]["source"])
    return found


# --- the series a chart draws ----------------------------------------------------------------------
def series(run, metric, by_requests):
    """[(x, y)] of a run for a metric, over iterations or over the requests spent; a fork's begins with its parent's
    up to the fork."""
    x = (lambda n: run["offset"] + run["spent"].get(n, 0)) if by_requests else (lambda n: n)
    own = [(x(n), y) for n, y in own_points(run, metric)]
    if not run.get("source"):
        return own
    cut = run["offset"] if by_requests else run["at"]
    return [point for point in series(run["source"], metric, by_requests) if point[0] <= cut] + own


def own_points(run, metric):
    """[(iteration, value)] of the run's own iterations for a metric."""
    if metric == "score":
        return held(run, [(row["number"], row["score"]) for row in run["rows"] if row["kind"] == "landed"
                          and row["score"] is not None])
    if metric == "share":  # a fork's goes on from its parent's counts at the fork
        before = [row for row in run["source"]["rows"] if row["number"] <= run["at"]] if run.get("source") else []
        points, landed, asked = [], sum(row["kind"] == "landed" for row in before), sum(row["requests"] > 0
                                                                                        for row in before)
        for row in run["rows"]:
            landed, asked = landed + (row["kind"] == "landed"), asked + (row["requests"] > 0)
            points.append((row["number"], landed / asked if asked else 0))
        return points
    column = {"files": 1, "lines": 2, "tests": 3}[metric]
    return held(run, [(point[0], point[column]) for point in run["growth"]])


def held(run, points):
    """The points, the last value held to the run's last iteration: a state stands until another lands."""
    last = run["rows"][-1]["number"] if run["rows"] else 0
    return points + [(last, points[-1][1])] if points and last > points[-1][0] else points


def sampled(points):
    """At most POINTS of them, evenly, the last kept."""
    step = max(1, -(-len(points) // POINTS))
    return points[::step] + ([points[-1]] if points and (len(points) - 1) % step else [])


# --- the page ------------------------------------------------------------------------------------------
def render_page(root, runs):
    made = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    charts = [render_charts(runs, by_requests) for by_requests in (False, True)]
    return PAGE.format(style=STYLE + EXTRA, made=made, runs=render_runs(root, runs), totals=render_totals(runs),
                       models=render_models(runs), iterations=charts[0], requests=charts[1])


def render_runs(root, runs):
    """Each run: its letter and colour, folder (linked to its page), id, keeper, models, and where it forked."""
    items = []
    for run in runs:
        identity, link = run["identity"] or {}, Path(os.path.relpath(run["root"] / "report.html", root)).as_posix()
        parent = identity.get("parent")
        fork = (f' · forked from {esc(run["source"]["letter"]) if run.get("source") else esc(parent["folder"])} after '
                f'iteration {esc(parent["iteration"])}') if parent else ""
        items.append(f'<li class="r{runs.index(run) % 6}"><span class="swatch"></span><b>{esc(run["letter"])}</b> '
                     f'<a href="{esc(link)}">{esc(run["root"])}</a> · run <code>{esc(identity.get("id", "?"))}</code>'
                     f' · keeper {esc(", ".join(identity.get("versions", [])) or "?")} · models '
                     f'{esc(", ".join(identity.get("models", [])) or "none yet")}{fork}</li>')
    return '<ul class="runs">' + "".join(items) + "</ul>"


def render_totals(runs):
    """A row a run: iterations, outcomes, the share landed, requests and tokens in all and per landing, and where
    the codebase stands."""
    rows = []
    for run in runs:
        use = {key: sum(model[key] for model in run["by_model"].values())
               for key in ("iterations", "landed", "asked", "requests", "tokens")}
        rolled = sum(row["kind"] == "rolled back" for row in run["rows"])
        now = run["growth"][-1][1:] if run["growth"] else ("–",) * 3
        score = next((row["score"] for row in reversed(run["rows"]) if row["score"] is not None), None)
        rows.append(f'<tr><td><b>{esc(run["letter"])}</b></td>{cells(use)}<td class="num">{rolled:,}</td>'
                    + "".join(f'<td class="num">{value:,}</td>' if isinstance(value, int) else f"<td>{value}</td>"
                              for value in now)
                    + f'<td class="num">{"–" if score is None else f"{score:g}"}</td></tr>')
    return ('<div class="scroll"><table><tr><th>run</th>' + HEADS + '<th class="num">rolled back</th>'
            '<th class="num">files</th><th class="num">lines</th><th class="num">tests</th><th class="num">score</th>'
            f'</tr>{"".join(rows)}</table></div>')


HEADS = ('<th class="num">iterations</th><th class="num">landed</th><th class="num">share landed</th>'
         '<th class="num">requests</th><th class="num">tokens</th><th class="num">requests a landing</th>'
         '<th class="num">tokens a landing</th>')


def cells(use):
    """The cells HEADS names, from {iterations, landed, asked, requests, tokens}."""
    share = f"{use['landed'] / use['asked']:.0%}" if use["asked"] else "–"
    each = lambda key: f"{use[key] / use['landed']:,.1f}" if use["landed"] else "–"  # noqa: E731
    values = [f"{use['iterations']:,}", f"{use['landed']:,}", share, f"{use['requests']:,}", f"{use['tokens']:,}",
              each("requests"), each("tokens")]
    return "".join(f'<td class="num">{value}</td>' for value in values)


def render_models(runs):
    """A row a run and model: its iterations, landings, share landed, requests and tokens, and per landing."""
    rows = "".join(f'<tr><td><b>{esc(run["letter"])}</b></td><td><code>{esc(model)}</code></td>{cells(use)}</tr>'
                   for run in runs for model, use in run["by_model"].items())
    return f'<div class="scroll"><table><tr><th>run</th><th>model</th>{HEADS}</tr>{rows}</table></div>'


def render_charts(runs, by_requests):
    """One chart a metric, each run a line (the score only where a run has one)."""
    figures = []
    for metric, title in METRICS:
        lines = [(n, sampled(series(run, metric, by_requests))) for n, run in enumerate(runs)]
        if any(points for _, points in lines):
            forks = [(n, fork_point(run, metric, by_requests)) for n, run in enumerate(runs) if run.get("source")]
            figures.append(f'<figure><figcaption>{title}</figcaption>'
                           f'{draw(lines, forks, "requests spent" if by_requests else "iteration", metric)}</figure>')
    return '<div class="charts">' + "".join(figures) + "</div>"


def fork_point(run, metric, by_requests):
    """(x, y) where a fork leaves its parent's line: the parent's last point at or before the fork, else None."""
    x = run["offset"] if by_requests else run["at"]
    before = [point for point in series(run["source"], metric, by_requests) if point[0] <= x]
    return (x, before[-1][1]) if before else None


def draw(lines, forks, label, metric):
    """An SVG of one line a run ([(run number, [(x, y)])]), steps where a value holds until the next (growth), with
    a circle and the fork's letter where a run forks from another."""
    shown = [point for _, points in lines for point in points]
    right = max([x for x, _ in shown] + [1])
    top = 1 if metric == "share" else nice_top(max([y for _, y in shown] + [1]))
    x = lambda v: LEFT + (RIGHT - LEFT) * v / right  # noqa: E731
    y = lambda v: BOTTOM - (BOTTOM - TOP) * v / top  # noqa: E731
    paths = []
    for n, points in lines:
        if points:
            step = metric in ("files", "lines", "tests")
            d = f"M{x(points[0][0]):.1f} {y(points[0][1]):.1f}" + "".join(
                (f"H{x(a):.1f}V{y(b):.1f}" if step else f"L{x(a):.1f} {y(b):.1f}") for a, b in points[1:])
            paths.append(f'<path class="run r{n % 6}" d="{d}"/>')
    marks = "".join(f'<circle class="fork r{n % 6}" cx="{x(at[0]):.1f}" cy="{y(at[1]):.1f}" r="4"/>'
                    f'<text x="{x(at[0]) + 6:.1f}" y="{y(at[1]) + (14 if y(at[1]) < TOP + 12 else -6):.1f}">'
                    f'{LETTERS[n % 26]}</text>'
                    for n, at in forks if at)
    return (f'<svg viewBox="0 0 {W} {H}" role="img">{y_axis(top)}{"".join(paths)}{marks}'
            + "".join(f'<text x="{x(n):.1f}" y="{H - 22}" text-anchor="{anchor}">{short(n)}</text>'
                      for n, anchor in x_ticks(math.ceil(right)))
            + f'<text x="{(LEFT + RIGHT) / 2:.1f}" y="{H - 6}" text-anchor="middle">{label}</text></svg>')


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><meta name="color-scheme" content="light dark">
<title>seed: runs compared</title><style>{style}</style></head>
<body><header><h1>seed: runs compared</h1>
<nav><a href="#runs">Runs</a> <a href="#totals">At a glance</a> <a href="#iterations">Over iterations</a>
<a href="#requests">Over requests</a> <a href="#models">By model</a></nav>
<p class="muted">Made {made} from each run's record (backups/record.sqlite) and snapshots, by
<code>python fallback.py --compare DIR ...</code> (run it again to see them now).</p></header>
<section id="runs"><h2>Runs</h2>{runs}<p class="key">A fork is drawn from its parent's line at the iteration it
forked after, marked with its letter; its own figures below count its own iterations.</p></section>
<section id="totals"><h2>At a glance</h2>{totals}<p class="key"><b>share landed</b>: of the iterations that asked
the model, those whose change landed; <b>files, lines, tests</b>: of the newest state its snapshots keep.</p>
</section>
<section id="iterations"><h2>Over iterations</h2>{iterations}</section>
<section id="requests"><h2>Over requests spent</h2>{requests}</section>
<section id="models"><h2>By model</h2>{models}</section>
</body></html>
"""

EXTRA = """
:root{--r0:#0969da;--r1:#bf3989;--r2:#1a7f37;--r3:#9a6700;--r4:#8250df;--r5:#cf222e}
@media (prefers-color-scheme:dark){:root{--r0:#4493f8;--r1:#f778ba;--r2:#3fb950;--r3:#d29922;--r4:#ab7df8;
--r5:#f85149}}
.r0{--c:var(--r0)}.r1{--c:var(--r1)}.r2{--c:var(--r2)}.r3{--c:var(--r3)}.r4{--c:var(--r4)}.r5{--c:var(--r5)}
svg .run{fill:none;stroke:var(--c);stroke-width:2}svg .r1{stroke-dasharray:6 3}svg .r2{stroke-dasharray:2 3}
svg .r3{stroke-dasharray:8 3 2 3}svg circle.fork{fill:var(--bg);stroke:var(--c);stroke-width:2;stroke-dasharray:none}
ul.runs{list-style:none;padding:0}ul.runs li{margin:.3em 0}
.swatch{display:inline-block;width:14px;height:4px;background:var(--c);vertical-align:middle;margin-right:6px}
"""
