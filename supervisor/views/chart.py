"""chart: what the two pages share (report.html and compare.html): their style, escaping, and the charts' frame,
scales and axes, drawn as inline SVG.

    esc(value)                 any text for HTML, quotes included
    nice_top(value)            the top of a chart's scale: a round number, its half round too
    y_axis(top); x_ticks(last) the grid and labels of the value axis; where the iteration axis is labelled
    short(value)               a number as an axis label (1.5k, 20k)
"""
import html
import math

STYLE = """
:root{--bg:#fff;--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;--card:#f6f8fa;--landed:#1a7f37;--rolled:#cf222e;
--waiting:#9a6700;--nochange:#6e7781;--stopped:#8250df;--tampered:#bf3989;--other:#6e7781;--accent:#0969da;--add:#dafbe1;--del:#ffebe9}
@media (prefers-color-scheme:dark){:root{--bg:#0d1117;--fg:#e6edf3;--muted:#9198a1;--line:#3d444d;--card:#151b23;
--landed:#3fb950;--rolled:#f85149;--waiting:#d29922;--nochange:#9198a1;--stopped:#ab7df8;--tampered:#db61a2;
--other:#9198a1;
--accent:#4493f8;--add:#12361f;--del:#4a1d20}}
*{box-sizing:border-box}
body{margin:0 auto;max-width:1120px;padding:12px 16px 40px;background:var(--bg);color:var(--fg);
font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;overflow-wrap:anywhere}
h1{font-size:1.5em;margin:.3em 0}h2{font-size:1.2em;margin:1.6em 0 .5em;border-bottom:1px solid var(--line)}
h3{font-size:1em;margin:1em 0 .3em}
a{color:var(--accent)}nav a{margin-right:.8em;white-space:nowrap}.muted{color:var(--muted);font-size:.9em}
code,pre{font:12.5px/1.45 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre{background:var(--card);border:1px solid var(--line);border-radius:6px;padding:8px;overflow-x:auto;margin:.4em 0;
overflow-wrap:normal}pre.diff{white-space:pre-wrap;overflow-wrap:anywhere}
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
table{border-collapse:collapse;font-size:.9em;width:100%;overflow-wrap:normal}pre.diff{white-space:pre-wrap;overflow-wrap:anywhere}
td,th{text-align:left;padding:3px 8px 3px 0;border-bottom:1px solid var(--line);vertical-align:top}
td.num,th.num{text-align:right}
td:nth-child(-n+2),.when{white-space:nowrap}
.scroll{overflow-x:auto}
details.it{border:1px solid var(--line);border-left:5px solid var(--other);border-radius:6px;margin:6px 0;
background:var(--bg)}details.it>summary{padding:6px 10px;cursor:pointer}details.it>div{padding:0 12px 8px}
.landed{--c:var(--landed)}.rolled{--c:var(--rolled)}.waiting{--c:var(--waiting)}.nochange{--c:var(--nochange)}
.stopped{--c:var(--stopped)}.tampered{--c:var(--tampered)}.other{--c:var(--other)}details.it{border-left-color:var(--c)}
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


def x_ticks(last):
    """Where the iteration axis is labelled: its ends, and between them at a round step (at most five labels)."""
    step = next(m * 10 ** e for e in range(19) for m in (1, 2, 5) if last <= 4 * m * 10 ** e)  # 1, 2 or 5 × 10^n
    inner = [n for n in range(step, last, step) if last - n > step / 2]
    return [(0, "start"), *((n, "middle") for n in inner), (last, "end")]
