"""tallies: the record's running counts, kept with each write, so that what the page, --status and the ledger
show of the whole history costs the same to read at 100,000 iterations as at 100.

    build(db)                      # made whole from the rows, in the writer's transaction (or, for a record
                                   #   made before the tallies, in memory for one reader)
    after_iteration(db, number)    # the cells holding an iteration, counted again (a row rewritten included)
    after_request(db, request)     # a request added to its day's counts
    top(db); strip(db, cells); daily(db)   # what readers get: record.py's count(), summary() and ledger()
    whole(db)                      # whether they still count the rows (checked at the writer's start)

Tables: `tallies`, the iterations counted in cells of 8, 64, 512 ... of them (each cell from the eight below it:
the best outcome's rank, the first landing and rollback, the last scored landing, the count of each outcome,
the lowest and highest number); `daily`, the requests counted per Pacific day, model, kind and waste.
A reader picks the coarsest level whose cells are no wider than a cell of the strip it draws, and reads at most
eight times as many cells as it draws.
"""
import sqlite3

from .kinds import Outcome

VERSION = 2   # PRAGMA user_version of a record whose tallies are kept (0: made before them; 1: before `tampered`)
FAN = 3       # a cell holds 2**FAN cells of the level below
LEVELS = tuple(range(FAN, 8 * FAN, FAN))  # cells of 8 ... 2**21 iterations: the coarsest has one cell for years
KINDS = tuple(kind.value for kind in Outcome if kind is not Outcome.OTHER)  # their rank: the best first; "other"
# ranks after them
RANK = f"CASE kind {' '.join(f'WHEN {k!r} THEN {n}' for n, k in enumerate(KINDS))} ELSE {len(KINDS)} END"
COUNTS = [f"k{n}" for n in range(len(KINDS) + 1)]  # how many iterations of each rank
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {{space}}tallies (level INTEGER, cell INTEGER, best INTEGER, landed INTEGER,
  rolled INTEGER, scored INTEGER, {', '.join(f'{k} INTEGER' for k in COUNTS)}, lo INTEGER, hi INTEGER,
  PRIMARY KEY (level, cell)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS {{space}}daily (day TEXT NOT NULL, model TEXT NOT NULL, kind TEXT NOT NULL,
  wasted TEXT NOT NULL, requests INTEGER, prompt INTEGER, output INTEGER, thinking INTEGER,
  PRIMARY KEY (day, model, kind, wasted)) WITHOUT ROWID;
CREATE VIEW IF NOT EXISTS {{space}}cells0 AS SELECT number AS cell, {RANK} AS best,
  CASE kind WHEN 'landed' THEN number END AS landed, CASE kind WHEN 'rolled back' THEN number END AS rolled,
  CASE WHEN kind = 'landed' AND score IS NOT NULL THEN number END AS scored,
  {', '.join(f'({RANK}) = {n} AS {k}' for n, k in enumerate(COUNTS))}, number AS lo, number AS hi FROM iterations;
"""
MERGED = f"min(best), min(landed), min(rolled), max(scored), {', '.join(f'sum({k})' for k in COUNTS)}, min(lo), max(hi)"
TOKENS = ", ".join(f"CAST(total({k}_tokens) AS INTEGER)" for k in ("prompt", "output", "thinking"))  # not sum(): it
# fails with "integer overflow" past 2**63 (a server's absurd token counts), stopping the keeper's start and every
# reader; total() counts in floating point, exact below 2**53, and the cast saturates
DAILY = ("INSERT INTO daily SELECT coalesce(day, ''), coalesce(model, ''), coalesce(kind, ''), coalesce(wasted, ''), "
         f"count(*), {TOKENS} FROM requests WHERE {{where}} GROUP BY 1, 2, 3, 4 "
         "ON CONFLICT DO UPDATE SET requests = requests + excluded.requests, prompt = prompt + excluded.prompt, "
         "output = output + excluded.output, thinking = thinking + excluded.thinking")


def level_cells(level):
    """The cells of a level, as a table to select from (level 0: each iteration a cell of its own)."""
    return "cells0" if level == 0 else f"(SELECT * FROM tallies WHERE level = {int(level)})"


def count_level(db, level, where="", args=()):
    """(Re)count a level's cells from the level below: all of them, or those `where` picks among the cells below."""
    below = level - FAN
    db.execute(f"INSERT OR REPLACE INTO tallies SELECT {level}, cell >> {FAN}, {MERGED} FROM {level_cells(below)} "
               f"{where} GROUP BY cell >> {FAN}", args)


def build(db, space=""):
    """Every tally counted from the rows. `space` "temp.": in memory, for a reader of a record made before them."""
    db.execute(f"DROP VIEW IF EXISTS {space}cells0")  # counted with an older rank of the outcomes, or none
    db.execute(f"DROP TABLE IF EXISTS {space}tallies")
    for statement in SCHEMA.format(space=space).split(";")[:-1]:  # not executescript: it would end the transaction
        db.execute(statement)
    db.execute("DELETE FROM daily")
    for level in LEVELS:
        count_level(db, level)
    db.execute(DAILY.format(where="true"))


def after_iteration(db, number):
    """Count again each cell holding the iteration (from the eight below it: a rewritten row is counted as it is)."""
    for level in LEVELS:
        cell = number >> level
        db.execute("DELETE FROM tallies WHERE level = ? AND cell = ?", (level, cell))
        first = cell << FAN
        count_level(db, level, "WHERE cell BETWEEN ? AND ?", (first, first + (1 << FAN) - 1))


def after_request(db, request):
    db.execute(DAILY.format(where="id = ?"), (request,))


def whole(db):
    """Whether the tallies count the rows as they are: a keeper from before them run again on the record, or a person
    with sqlite3, writes rows and leaves the counts (and user_version) as they were."""
    try:
        counts, low, high = top(db)
        booked = db.execute("SELECT coalesce(sum(requests), 0) FROM daily").fetchone()[0]
    except sqlite3.Error:  # a table lost
        return False
    rows = db.execute("SELECT count(*), min(number), max(number) FROM iterations").fetchone()
    return rows == (sum(counts), low, high) and booked == db.execute("SELECT count(*) FROM requests").fetchone()[0]


def ready(db):
    """The tallies to read: the record's own, or (a record from before them) counted now in memory."""
    if db.execute("PRAGMA user_version").fetchone()[0] < VERSION:
        build(db, "temp.")


def top(db):
    """([iterations of each rank], the lowest number, the highest): the coarsest level's few cells summed."""
    ready(db)
    found = db.execute(f"SELECT {', '.join(f'sum({k})' for k in COUNTS)}, min(lo), max(hi) FROM tallies "
                       f"WHERE level = {LEVELS[-1]}").fetchone()
    return [n or 0 for n in found[:len(COUNTS)]], found[-2], found[-1]


EMPTY = {"total": 0, "kinds": {}, "low": 0, "high": 0, "start": 0, "width": 1, "strip": [],
         "marks": {"landed": [], "rolled back": []}, "scores": []}


def strip(db, cells):
    """{total, kinds, low, high, start, width, strip, marks, scores}: every iteration, in at most `cells` runs of
    `width` iterations each, the first run starting at number `start` (runs without an iteration left out)."""
    counts, low, high = top(db)
    if low is None:
        return dict(EMPTY)
    wide = max(1, (high - low + 1) // cells)  # iterations a strip cell stands for, at least
    level = max(level for level in (0, *LEVELS) if 1 << level <= wide)
    first = low >> level
    per = max(1, -(-((high >> level) - first + 1) // cells))  # the level's cells in a strip cell
    runs = db.execute(f"SELECT runs.*, score FROM (SELECT (cell - {first}) / {per} AS run, min(best), min(landed), "
                      f"min(rolled), max(scored) AS scored FROM {level_cells(level)} GROUP BY run) AS runs "
                      "LEFT JOIN iterations ON number = scored ORDER BY run").fetchall()
    return {"total": sum(counts), "kinds": {kind: n for kind, n in zip((*KINDS, "other"), counts) if n},
            "low": low, "high": high, "start": first << level, "width": per << level, "strip": [run[1] for run in runs],
            "marks": {"landed": [run[2] for run in runs if run[2] is not None],
                      "rolled back": [run[3] for run in runs if run[3] is not None]},
            "scores": [(run[4], run[5]) for run in runs if run[4] is not None]}


def daily(db):
    """[(day, model, kind, wasted, requests, prompt, output, thinking)] of every request."""
    ready(db)
    return db.execute("SELECT * FROM daily").fetchall()
