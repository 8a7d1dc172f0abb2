"""record: the run as data, in backups/record.sqlite: every iteration, every request, every exchange.

    book = writer()                      # the loop's connection, migrating an old workspace
    book.write(row, calls)               # an iteration, its requests, and those no row holds yet: one transaction
    sent = Sent(state)                   # the gateway's: each request booked as it leaves (sent.leave, sent.back)
    rows = iterations(root)              # what every view renders: iteration_log.md, the page, --status, the export
    standing(root)                       # the run's totals and where the codebase stands, for --status
    ledger(root); exchange(root, id)     # the requests per day and model, summed from their rows; a request's bytes

Tables: iterations (one row per iteration: its times, model, outcome kind and text, reason, snapshots, files with
lines added and removed, tasks, the gate's counts and time, the score), requests (the one count of requests: each
written by the gateway as it leaves, so that one cut short by Ctrl+C, kill -9 or a full disk still counts against
its day; its model, tokens, kind, latency, wasted and why; its iteration once that row is written, the next row
taking those cut short), exchanges (each request as the seed asked it and its body as sent upstream, its answer as
received and as cleaned for the seed; a prompt is stored as a zlib'd delta from the one before it, each chain of
CHAIN starting whole), carried (the counts of requests from before the record), kept (the files an old workspace
was migrated from) and runs (one row per start of the keeper on the folder: the run's identity, its parent if it
was forked, and what a replay needs that is not the code: the goal, the tasks and the person's evaluate.py as they
were, the log's tail at the first start, the settings that change what the keeper does).
SQLite in WAL mode, two connections (the loop's and the gateway's); each write is one transaction, so a kill -9
leaves it whole. Views never parse each other: the one place that reads the old log's prose is migrate(). What the
views show of the whole history (the page's strip, the counts by outcome, the ledger) is counted from the rows when
read, over indexes that hold the columns counted (the rows are the one store of each fact).
"""
import functools
import hashlib
import json
import os
import re
import secrets
import sqlite3
import stat
import zlib
from datetime import date, timedelta
from difflib import SequenceMatcher
from pathlib import Path
from urllib.request import pathname2url

from ..kinds import TOKEN_FIELDS, Outcome
from .journal import logs_set_aside, telling_lines
from .ledger import UNREACHED, pacific, pacific_day, reached
from ..scrub import redact
from ..settings import (LOG, LOG_SHOWN, LOGS_ASIDE, QUOTA, ROOT, STEERING, TEST_SUPPORT, keeper_code, read_stamp,
                        source_of, stamp, tail_of, utc_now)

NAME = "record.sqlite"
USAGE = "usage.json"  # where a keeper before 2026-12-06 booked each request first: folded in, then removed
USAGE_DAYS = 7        # the Pacific days such a usage.json kept
FOLD_MOST = 1_000     # requests folded in from it at the most
CHAIN = 50            # prompts stored as deltas one after the other before one is stored whole again
WINDOW = 32_768       # bytes of zlib's preset dictionary that it can use
PIECE = re.compile(rb"(?<=\\n)|(?<=\n)")  # where a prompt is cut to diff it: after each (JSON-escaped) line break
PIECES_MOST = 20_000  # pieces of a prompt it is diffed in, at most (a prompt of the budget's size has ~5,000)
SCHEMA = """
CREATE TABLE IF NOT EXISTS iterations (number INTEGER PRIMARY KEY, started TEXT, ended TEXT, seconds REAL,
  model TEXT, kind TEXT NOT NULL, outcome TEXT NOT NULL, reason TEXT, until TEXT, failure TEXT, snapshot_before TEXT,
  snapshot_after TEXT, restored TEXT, kept TEXT, files TEXT, lines_added INTEGER, lines_removed INTEGER, tasks TEXT,
  done TEXT, refused TEXT, not_landed TEXT, outside TEXT, refusals TEXT, requests INTEGER, prompt_tokens INTEGER,
  output_tokens INTEGER, thinking_tokens INTEGER, passing TEXT, tests_passing INTEGER, tests_ran TEXT,
  gate_seconds REAL, score REAL, scores TEXT, salvaged TEXT, stalled TEXT, confinement TEXT, output TEXT,
  budget INTEGER);
CREATE TABLE IF NOT EXISTS requests (id INTEGER PRIMARY KEY, iteration INTEGER, day TEXT, model TEXT, kind TEXT,
  prompt_tokens INTEGER, output_tokens INTEGER, thinking_tokens INTEGER, latency REAL, wasted TEXT);
CREATE TABLE IF NOT EXISTS exchanges (request INTEGER PRIMARY KEY, chain INTEGER, prompt BLOB, answer BLOB,
  cleaned BLOB, asked BLOB);
CREATE TABLE IF NOT EXISTS carried (day TEXT, model TEXT, requests INTEGER, prompt INTEGER, output INTEGER,
  thinking INTEGER, kinds TEXT, wasted TEXT, PRIMARY KEY (day, model));
CREATE TABLE IF NOT EXISTS kept (name TEXT PRIMARY KEY, content BLOB);
CREATE TABLE IF NOT EXISTS runs (started TEXT, id TEXT NOT NULL, version TEXT, backend TEXT, models TEXT,
  first INTEGER, steering TEXT, log TEXT, settings TEXT, parent TEXT);
CREATE INDEX IF NOT EXISTS requests_by_iteration ON requests (iteration);
CREATE INDEX IF NOT EXISTS iterations_by_kind ON iterations (kind, score);
CREATE INDEX IF NOT EXISTS requests_by_day ON requests (day, model, kind, wasted, prompt_tokens, output_tokens,
  thinking_tokens);
CREATE INDEX IF NOT EXISTS exchanges_by_chain ON exchanges (chain);
"""
JSON_COLUMNS = ("files", "tasks", "done", "refused", "not_landed", "outside", "refusals", "passing", "scores")
LISTS = ("files", "tasks", "done", "refused", "not_landed", "outside", "refusals")
LIGHT = ("number", "ended", "kind", "outcome", "restored", "model", "files", "score", "scores")  # an older card's


def path_of(root=ROOT):
    return root / "backups" / NAME


# --- the row of an iteration -------------------------------------------------------------------------
def row_of(number, result, seconds, started=None):
    """The iteration as the record keeps it, from the loop's Result: written once; the log, the page, --status and
    the export render from it. `outcome` is the headline as the log heads its section (for people and queries:
    no code decides anything from it; `kind` and `failure` are the values)."""
    said, verdict = result.said, result.verdict
    tokens = said.tokens
    changes = [list(change) for change in result.changes]
    passing = verdict.passing if verdict and verdict.tests_ran else None
    score = result.score or {}
    return {"number": number, "started": started, "ended": stamp(utc_now()), "seconds": round(seconds, 3),
            "model": said.model, "kind": result.outcome.value, "outcome": redact(result.headline()),
            "reason": redact(result.reason), "until": result.until and stamp(result.until),
            "failure": result.failure and result.failure.value, "snapshot_before": result.start,
            "snapshot_after": result.after or result.restored, "restored": result.restored, "kept": result.kept,
            "files": changes, "lines_added": sum(c[2] for c in changes), "lines_removed": sum(c[3] for c in changes),
            "tasks": [redact(t) for t in said.tasks],
            "done": [redact(t) for t in said.done] if result.outcome is Outcome.LANDED else [],
            "refused": [redact(t) for t in said.refused], "not_landed": result.not_landed,
            "outside": result.outside, "refusals": [redact(t) for t in result.refusals],
            "requests": reached_of(said), "prompt_tokens": tokens.get("prompt", 0),
            "output_tokens": tokens.get("output", 0), "thinking_tokens": tokens.get("thinking", 0),
            "passing": passing, "tests_passing": sum(passing.values()) if passing else None,
            "tests_ran": verdict and verdict.tests_ran, "gate_seconds": result.gate_seconds,
            "score": score.get("score"), "scores": result.score, "salvaged": said.salvaged,
            "stalled": result.stalled, "confinement": result.confinement,
            "output": redact("\n".join(telling_lines(result.output))), "budget": result.budget}


# --- writing ------------------------------------------------------------------------------------------
class Writer:
    """The loop's connection: writes iterations with their requests and exchanges, one transaction each."""

    def __init__(self, path):
        self.db = connect(path)
        if self.db.execute("PRAGMA user_version").fetchone()[0]:  # the running counts a keeper before 2026-12-06
            self.db.executescript(FORMER)                         # kept beside the rows: dropped once
        if "asked" not in columns_of(self.db, "exchanges"):  # from before the seed's own request was kept
            self.db.execute("ALTER TABLE exchanges ADD COLUMN asked BLOB")
        if self.db.execute("SELECT 1 FROM requests WHERE coalesce(day, '') = '' LIMIT 1").fetchone():
            with Transaction(self.db):  # written by a keeper that dated a request only once answered
                date_requests(self.db)
        self.chain, self.base = self.last_prompt()
        held = [self.db.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for table in ("iterations", "kept",
                                                                                             "runs")]
        usage = old_usage(path.with_name(USAGE))
        if not any(held):  # a new record (not a fork's, which names its parent first): bring in what today's kept
            migrate(self, path.parent.parent, usage)
        elif usage is not None:
            with Transaction(self.db):
                self.fold(usage[1])
        if usage is not None:  # read (or kept by the migration): the record is the one count now
            path.with_name(USAGE).unlink()

    def last_prompt(self):
        """(the chain the next prompt continues, the last prompt's bytes) or (None, None)."""
        last = self.db.execute("SELECT request, chain FROM exchanges ORDER BY request DESC LIMIT 1").fetchone()
        if not last:
            return None, None
        length = self.db.execute("SELECT count(*) FROM exchanges WHERE chain = ?", (last[1],)).fetchone()[0]
        return (last[1], exchange_from(self.db, last[0])["prompt"]) if length < CHAIN else (None, None)

    def write(self, row, calls=(), waste=None):
        """The iteration and its requests (each call as close_run reports it), in one transaction, with the requests
        no row holds (cut short before their iteration's row was written: their day and model known, their tokens
        not), which the row counts (`row` is updated)."""
        try:
            with Transaction(self.db):
                ids = [call["id"] for call in calls if "id" in call]
                cut_short = self.db.execute(f"SELECT model FROM requests WHERE iteration IS NULL AND kind != ? AND id "
                                            f"NOT IN ({', '.join('?' * len(ids))}) ORDER BY id", (UNREACHED, *ids))
                models = [model for model, in cut_short]
                counted = {**row, "requests": (row["requests"] or 0) + len(models), "model": row["model"] or
                           models[-1]} if models else row
                self.db.execute("UPDATE requests SET iteration = ? WHERE iteration IS NULL", (row["number"],))
                self.db.execute("DELETE FROM iterations WHERE number = ?", (row["number"],))
                self.insert_row(counted)
                answered = [n for n, call in enumerate(calls) if call.get("kind") == "answer"]
                for n, call in enumerate(calls):
                    wasted = call.get("kind") if call.get("kind") != "answer" else waste if n == answered[-1] else None
                    self.insert_request(row["number"], call, wasted)
        except sqlite3.Error:
            self.chain, self.base = self.last_prompt()  # the next prompt is stored against the last one kept
            raise
        row.update(counted)

    def insert_row(self, row):
        values = {key: json.dumps(row.get(key)) if key in JSON_COLUMNS else row.get(key) for key in COLUMNS}
        self.db.execute(f"INSERT INTO iterations ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})",
                        [values[key] for key in COLUMNS])

    def insert_request(self, number, call, wasted):
        """A request as close_run reports it: its row, booked as it left (`id`), made whole; else a new one."""
        tokens = call.get("tokens") or {}
        values = (number, call.get("day"), call.get("model"), call.get("kind"), tokens.get("prompt", 0),
                  tokens.get("output", 0), tokens.get("thinking", 0), call.get("latency"), wasted)
        if "id" in call:  # booked as it left: what it came back as is kept, if it came back after close_run's copy
            self.db.execute(f"UPDATE requests SET ({', '.join(REQUEST_COLUMNS)}) = ({', '.join('?' * len(values))}) "
                            "WHERE id = ? AND (kind = 'no answer' OR ? != 'no answer')",
                            (*values, call["id"], call.get("kind")))
            self.db.execute("UPDATE requests SET iteration = ?, wasted = coalesce(wasted, 'no answer') WHERE id = ? "
                            "AND ? = 'no answer'", (number, call["id"], call.get("kind")))  # the run never had it
        request = call.get("id") or self.db.execute(f"INSERT INTO requests ({', '.join(REQUEST_COLUMNS)}) VALUES "
                                                    f"({', '.join('?' * len(values))})", values).lastrowid
        if "sent" in call:
            self.insert_exchange(request, redact(call["sent"]), redact(call.get("received") or b""),
                                 redact(call.get("cleaned") or b""), redact(call.get("asked") or b""))

    def insert_exchange(self, request, prompt, answer, cleaned, asked=b""):
        chain = self.chain if self.chain is not None else request
        stored = (pack(prompt, self.base if self.chain is not None else None, diff=True), pack(answer, prompt),
                  pack(cleaned, answer), pack(asked, prompt, diff=True) if asked else None)
        self.db.execute("INSERT INTO exchanges (request, chain, prompt, answer, cleaned, asked) VALUES (?, ?, ?, ?, "
                        "?, ?)", (request, chain, *stored))
        count = self.db.execute("SELECT count(*) FROM exchanges WHERE chain = ?", (chain,)).fetchone()[0]
        self.chain, self.base = (chain, prompt) if count < CHAIN else (None, None)

    def begin_run(self, version, backend, models, timeout=None, parent=None, root=ROOT, answer_format=None):
        """A row for this start of the keeper on root: the run's id (the first row's, or a new one for a new record),
        the keeper's version, the backend and models it was given, the number of its first iteration, the goal, tasks
        and evaluate.py as they are now, the settings that change what the keeper does (and the answer format its
        backend asks of the model, which a replay reads its answers in), and `parent`, {folder, run,
        iteration, snapshot}, for a fork's first row. The run's id."""
        earlier = self.db.execute("SELECT id, first FROM runs ORDER BY rowid").fetchall()
        last = self.db.execute("SELECT max(number) FROM iterations").fetchone()[0] or 0
        begun = max([first for _, first in earlier], default=(parent or {}).get("iteration", 0) + 1)
        row = {"started": stamp(utc_now()), "id": earlier[0][0] if earlier else secrets.token_hex(6),
               "version": f"{version}+{keeper_digest(root)}", "backend": backend, "models": list(models),
               "first": max(last + 1, begun), "steering": steering_of(root),
               "settings": {**settings_of(timeout), **({"answer format": answer_format} if answer_format else {})},
               "log": None if earlier else text_of(tail_of(root / LOG.name, LOG_SHOWN)), "parent": parent}
        self.add_run(row)
        return row["id"]

    def add_run(self, row):
        """A runs row as it is ({column: value}, its JSON columns as values)."""
        values = [json.dumps(row[key]) if key in RUN_JSON and row[key] is not None else row[key] for key in RUN_COLUMNS]
        with Transaction(self.db):
            self.db.execute(f"INSERT INTO runs ({', '.join(RUN_COLUMNS)}) VALUES ({', '.join('?' * len(values))})",
                            values)

    def fold(self, usage):
        """The requests an older keeper's usage.json ({day: {model: use}}: its last USAGE_DAYS Pacific days) booked
        that the record lacks (cut short before their iteration's row), as requests no row holds yet, those that
        never reached the model as such: the next row takes them. What is not a day of those, or not a count, adds
        none, and FOLD_MOST at the most."""
        held, today = ledger_of(self.db), pacific_day()
        oldest = (date.fromisoformat(today) - timedelta(days=USAGE_DAYS - 1)).isoformat()
        lacking = []
        for day, models in usage.items():
            if not (re.fullmatch(r"\d{4}-\d\d-\d\d", day) and oldest <= day <= today and isinstance(models, dict)):
                continue
            for model, use in models.items():
                use, have = whole(use), whole(held.get(day, {}).get(model))
                missing = max(0, use["requests"] - have["requests"])
                unreached = min(missing, max(0, use["kinds"].get(UNREACHED, 0) - have["kinds"].get(UNREACHED, 0)))
                lacking += [(day, model, UNREACHED)] * unreached + [(day, model, "no answer")] * (missing - unreached)
        self.db.executemany("INSERT INTO requests (day, model, kind, prompt_tokens, output_tokens, thinking_tokens) "
                            "VALUES (?, ?, ?, 0, 0, 0)", lacking[:FOLD_MOST])

    def carry(self, ledger, files):
        """The counts of requests from before the record (an old usage.json's) and the old files, as a migration
        brings them in."""
        for day, models in ledger.items():
            for model, use in models.items():
                use = whole(use)
                self.db.execute("INSERT OR REPLACE INTO carried VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                                (day, model, use["requests"], use["prompt"], use["output"], use["thinking"],
                                 json.dumps(use["kinds"]), json.dumps(use["wasted"])))
        for name, data in files.items():
            self.db.execute("INSERT OR REPLACE INTO kept VALUES (?, ?)", (name, data))


COLUMNS = ("number", "started", "ended", "seconds", "model", "kind", "outcome", "reason", "until", "failure",
           "snapshot_before", "snapshot_after", "restored", "kept", "files", "lines_added", "lines_removed", "tasks",
           "done", "refused", "not_landed", "outside", "refusals", "requests", "prompt_tokens", "output_tokens",
           "thinking_tokens", "passing", "tests_passing", "tests_ran", "gate_seconds", "score", "scores", "salvaged",
           "stalled", "confinement", "output", "budget")
FORMER = ("DROP VIEW IF EXISTS cells0; DROP TABLE IF EXISTS tallies; DROP TABLE IF EXISTS daily; "
          "PRAGMA user_version = 0")
# (user_version 0: a reader of an older checkout counts the rows itself, as it did a record from before its counts)
OUTCOMES = tuple(kind.value for kind in Outcome if kind is not Outcome.OTHER)  # ranked: the best first, any other
RANK = f"CASE kind {' '.join(f'WHEN {k!r} THEN {n}' for n, k in enumerate(OUTCOMES))} ELSE {len(OUTCOMES)} END"
TOKENS = ", ".join(f"CAST(total({k}_tokens) AS INTEGER)" for k in ("prompt", "output", "thinking"))  # not sum(): it
# fails with "integer overflow" past 2**63 (a server's absurd token counts), stopping every reader; total() counts
# in floating point, exact below 2**53, and the cast saturates


REQUEST_COLUMNS = ("iteration", "day", "model", "kind", "prompt_tokens", "output_tokens", "thinking_tokens", "latency",
                   "wasted")
RUN_COLUMNS = ("started", "id", "version", "backend", "models", "first", "steering", "log", "settings", "parent")
RUN_JSON = ("models", "steering", "settings", "parent")


class Sent:
    """The gateway's own connection to the record (under the gateway's lock): each request booked as it leaves, so
    that one cut short still counts against its day, and what it came back as once it has."""

    def __init__(self, state, busy=5.0):
        self.path, self.db, self.closed = Path(state) / NAME, None, False
        self.busy = busy  # seconds it waits for a write another connection holds (a person's sqlite3 shell, say)

    def connection(self):
        if self.closed:
            raise sqlite3.ProgrammingError("the gateway has closed its connection to the record")
        if self.db is None:  # the gateway's threads take turns under its lock
            self.db = connect(self.path, check_same_thread=False, timeout=self.busy)
        return self.db

    def today(self, model):
        """Today's requests to the model that may have reached the server (an outage must not spend a day)."""
        day, db = pacific_day(), self.connection()
        found = db.execute("SELECT count(*) FROM requests WHERE day = ? AND model = ? AND kind != ?",
                           (day, model, UNREACHED)).fetchone()[0]
        carried = db.execute("SELECT requests, kinds FROM carried WHERE day = ? AND model = ?", (day, model)).fetchone()
        return found + (reached(whole({"requests": carried[0], "kinds": json.loads(carried[1])})) if carried else 0)

    def leave(self, model):
        """A call for a request about to be sent: its row booked first, with its day (Pacific) and model."""
        call = {"model": model, "day": pacific_day(), "kind": "no answer", "tokens": dict.fromkeys(TOKEN_FIELDS, 0)}
        call["id"] = self.connection().execute("INSERT INTO requests (day, model, kind, prompt_tokens, output_tokens, "
                                               "thinking_tokens) VALUES (?, ?, ?, 0, 0, 0)",
                                               (call["day"], model, call["kind"])).lastrowid
        return call

    def back(self, call, kind):
        """What the request came back as (its kind, its tokens, as waste unless an answer), as soon as it has; its
        iteration's row says which answer was wasted (and that one the run never had was: it came back after its
        row). After the gateway closed, or when the record cannot be written (a person's lock held past `busy`), its
        row stays as booked: counted, its answer still the seed's."""
        call["kind"] = kind
        tokens = [call["tokens"].get(name, 0) for name in TOKEN_FIELDS]
        try:
            self.connection().execute(
                "UPDATE requests SET kind = ?, wasted = CASE WHEN iteration IS NULL THEN ? ELSE coalesce(wasted, ?) "
                "END, prompt_tokens = ?, output_tokens = ?, thinking_tokens = ? WHERE id = ?",
                (kind, None if kind == "answer" else kind, kind, *tokens, call["id"]))
        except sqlite3.Error:
            pass

    def close(self):
        self.closed = True
        if self.db is not None:
            self.db.close()


def connect(path, check_same_thread=True, timeout=30):
    """A writing connection to the record at `path`, its tables made if missing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, isolation_level=None, timeout=timeout, check_same_thread=check_same_thread)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")  # in WAL mode: whole after a crash, if not after a power cut
    db.executescript(SCHEMA)
    return db


class Transaction:
    """BEGIN IMMEDIATE ... COMMIT, or ROLLBACK on any error."""

    def __init__(self, db):
        self.db = db

    def __enter__(self):
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind, error, trace):
        self.db.execute("ROLLBACK" if kind else "COMMIT")


@functools.lru_cache(maxsize=None)
def writer(root=ROOT):
    """The keeper's writer for the workspace (made, and an old workspace migrated, at its first start)."""
    return Writer(path_of(root))


def close():
    """Close the keeper's writer, if it was opened (as the keeper's run ends)."""
    if writer.cache_info().currsize:
        writer().db.close()
        writer.cache_clear()


def date_requests(db):
    """Each request without a day dated by its iteration's end (the Pacific day): a
    keeper from before requests were dated as they left wrote those Ctrl+C or --timeout cut short without one."""
    def day_of(ended):
        moment = read_stamp(ended or "")
        return moment and moment.astimezone(pacific()).date().isoformat()
    db.create_function("pacific_day", 1, day_of, deterministic=True)
    db.execute("UPDATE requests SET day = (SELECT pacific_day(ended) FROM iterations WHERE number = iteration) "
               "WHERE coalesce(day, '') = ''")


def reached_of(said):
    """The requests of an iteration that may have reached a model, as its quota and --status count them: not those
    the network kept from it."""
    return said.requests - sum(call.get("kind") == UNREACHED for call in said.calls)


def keeper_digest(root=ROOT):
    """Twelve hex digits naming the keeper's code in root (fallback.py, supervisor/'s Python files and the tests'
    support the gate runs): the same digits, the same keeper, in a clone, its demo's copy and its forks."""
    digest = hashlib.sha256()
    for path in sorted([root / "fallback.py", *keeper_code(root), *map(root.joinpath, TEST_SUPPORT)]):
        if path.is_file():
            digest.update(f"{path.relative_to(root).as_posix()}\0".encode() + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def steering_of(root=ROOT):
    """{name: text} of the goal (--goal's file, for this folder), the tasks and evaluate.py as they are in root, each
    scrubbed of anything shaped like a key; bytes that are not UTF-8 kept (as surrogates)."""
    found = {}
    for rel in (*STEERING, "evaluate.py"):
        path = source_of(rel) if root == ROOT else root / rel
        if path.is_file():
            found[rel] = text_of(path.read_bytes())
    return found


def text_of(data):
    """Bytes as text a JSON column keeps, byte for byte (surrogateescape), with the secrets scrubbed (scrub.redact)."""
    return redact(data).decode("utf-8", "surrogateescape")


def settings_of(timeout):
    """The settings of this start that change what the keeper does: --timeout and the SEED_ ones, whose values are
    short words or numbers (nothing else is kept: a value of another shape could be anything)."""
    kept = {name: value for name, value in os.environ.items() if SETTING.fullmatch(name) and VALUE.fullmatch(value)}
    return {"--timeout": timeout, **kept} if timeout else {}


SETTING, VALUE = re.compile(r"SEED_[A-Z_]{1,40}"), re.compile(r"[\w.,:/=-]{0,80}")


# --- compression: each prompt as the change from the one before it -------------------------------------
def pack(data, base, diff=False):
    """zlib of `data` with `base` as its preset dictionary; with `diff`, of `data` as a delta from `base`."""
    if not base or not data:
        return b"W" + zlib.compress(data, 9)
    return (b"D" + deflate(delta(base, data), base)) if diff else b"Z" + deflate(data, base)


def deflate(data, base):
    packer = zlib.compressobj(9, zdict=base[-WINDOW:]) if base else zlib.compressobj(9)
    return packer.compress(data) + packer.flush()


def inflate(data, base):
    unpacker = zlib.decompressobj(zdict=base[-WINDOW:]) if base else zlib.decompressobj()
    return unpacker.decompress(data) + unpacker.flush()


def delta(base, data):
    """`data` as ranges of `base`'s pieces to copy and bytes to insert: a JSON list, a NUL, the inserted bytes. Past
    PIECES_MOST pieces (a prompt the seed cut in tiny lines: difflib's time grows with their square), all inserted."""
    old, new = PIECE.split(base), PIECE.split(data)
    if max(len(old), len(new)) > PIECES_MOST:
        return json.dumps([len(data)]).encode() + b"\0" + data
    head = tail = 0  # the pieces both begin and end with, copied without difflib (most of a prompt: its time)
    shorter = min(len(old), len(new))
    while head < shorter and old[head] == new[head]:
        head += 1
    while tail < shorter - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    ops, inserted = [[0, head]] if head else [], []
    middle = SequenceMatcher(None, old[head:len(old) - tail], new[head:len(new) - tail])
    for tag, i1, i2, j1, j2 in middle.get_opcodes():
        if tag == "equal":
            ops.append([head + i1, head + i2])
        elif j2 > j1:
            inserted.append(b"".join(new[head + j1:head + j2]))
            ops.append(len(inserted[-1]))
    ops += [[len(old) - tail, len(old)]] if tail else []
    return json.dumps(ops, separators=(",", ":")).encode() + b"\0" + b"".join(inserted)


def undelta(base, data):
    head, _, inserted = data.partition(b"\0")
    old, out, at = PIECE.split(base), [], 0
    for op in json.loads(head):
        if isinstance(op, list):
            out.append(b"".join(old[op[0]:op[1]]))
        else:
            out.append(inserted[at:at + op])
            at += op
    return b"".join(out)


def unpack(data, base):
    how, body = data[:1], data[1:]
    if how == b"W":
        return zlib.decompress(body)
    return undelta(base, inflate(body, base)) if how == b"D" else inflate(body, base)


def exchange_from(db, request, decoded=None):
    """{prompt, answer, cleaned, asked} of a request, as bytes (the prompt decoded along its chain; asked, the seed's
    own request before the wire's adaptation, b"" in a record from before it was kept); None if none.
    `decoded`, {chain: (request, prompt)}, keeps the last prompt decoded in each chain, and the next is decoded on
    from it: read in order (as a replay reads them), each prompt costs one delta, not its chain's every one."""
    asked = "asked" if "asked" in columns_of(db, "exchanges") else "NULL"
    found = db.execute(f"SELECT chain, answer, cleaned, {asked} FROM exchanges WHERE request = ?", (request,)).fetchone()
    if not found:
        return None
    chain, answer, cleaned, asked = found
    since, prompt = (decoded or {}).get(chain, (-1, None))
    if since > request:
        since, prompt = -1, None
    for packed, in db.execute("SELECT prompt FROM exchanges WHERE chain = ? AND request > ? AND request <= ? "
                              "ORDER BY request", (chain, since, request)):
        prompt = unpack(packed, prompt)
    if decoded is not None:
        decoded[chain] = (request, prompt)
    answer = unpack(answer, prompt)
    return {"prompt": prompt, "answer": answer, "cleaned": unpack(cleaned, answer),
            "asked": unpack(asked, prompt) if asked else b""}


# --- reading ------------------------------------------------------------------------------------------
def reader(root=ROOT):
    """A read-only connection to the workspace's record, or None when it has none. A record no keeper has open (it
    has no -wal file beside it) is opened as immutable: reading it then writes nothing in the folder, not even
    SQLite's -wal and -shm files. None too for a record being made (its tables not yet there)."""
    path = path_of(root)
    if not path.exists():
        return None
    still = "immutable=1" if not path.with_name(f"{NAME}-wal").exists() else "mode=ro"
    db = sqlite3.connect(f"file:{pathname2url(str(path))}?{still}", uri=True, timeout=30)
    if not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'iterations'").fetchone():
        db.close()
        return None
    return db


def iterations(root=ROOT, since=0, last=None, number=None, light=False, until=2 ** 62):
    """The iterations after `since` (and up to `until`) in order (or the `last` few, or the one `number`), each a
    dict of the row (JSON columns read); `light`: only the LIGHT columns read, the others empty (a page of 100,000
    iterations shows most as one line)."""
    db = reader(root)
    if db is None:
        return []
    columns = LIGHT if light else COLUMNS
    where = ("number = ?", (number,)) if number is not None else ("number > ? AND number <= ?", (since, until))
    query = f"SELECT {', '.join(columns)} FROM iterations WHERE {where[0]} ORDER BY number DESC"
    rows = [dict(zip(columns, values)) for values in db.execute(query + (f" LIMIT {int(last)}" if last else ""),
                                                                 where[1])][::-1]
    db.close()
    for row in rows:
        for key in COLUMNS:
            value = row.get(key)
            if key in JSON_COLUMNS:
                row[key] = json.loads(value) if value else [] if key in LISTS else None
            elif key not in row:
                row[key] = "" if key == "output" else None
    return rows


def summary(root=ROOT, cells=2_000):
    """What the page shows of every iteration: {total, kinds: {kind: count} (the best first, any other kind as
    "other"), first, last (the first and last iterations' end times), low, high (their numbers), strip: the best
    outcome's rank in each of at most `cells` runs of `width` iterations from number `start` (runs without an
    iteration left out), marks: {landed, rolled back: the first number of each run that had one}, scores:
    [(number, score)] of the last landing with a score in each run}. A run is a whole number of cells of 8**k
    iterations (up to 2**21), aligned on them."""
    db = reader(root)
    low, high = db.execute("SELECT min(number), max(number) FROM iterations").fetchone() if db else (None, None)
    if low is None:
        if db:
            db.close()
        return {"total": 0, "kinds": {}, "low": 0, "high": 0, "start": 0, "width": 1, "strip": [],
                "marks": {"landed": [], "rolled back": []}, "scores": [], "first": None, "last": None}
    counts = [0] * (len(OUTCOMES) + 1)
    for rank, n in db.execute(f"SELECT {RANK}, count(*) FROM iterations GROUP BY kind"):
        counts[rank] += n
    level = min(21, (max(1, (high - low + 1) // cells).bit_length() - 1) // 3 * 3)
    first = low >> level
    per = max(1, -(-((high >> level) - first + 1) // cells))  # cells of 8**k a run holds (its width may pass 2**63)
    runs = db.execute(f"SELECT runs.*, score FROM (SELECT ((number >> ?) - ?) / ? AS run, min({RANK}), min(CASE kind WHEN "
                      "'landed' THEN number END), min(CASE kind WHEN 'rolled back' THEN number END), max(CASE WHEN "
                      "kind = 'landed' AND score IS NOT NULL THEN number END) AS scored FROM iterations GROUP BY run) "
                      "AS runs LEFT JOIN iterations ON number = scored ORDER BY run", (level, first, per)).fetchall()
    ends = [db.execute("SELECT ended FROM iterations WHERE number = ?", (n,)).fetchone()[0] for n in (low, high)]
    db.close()
    return {"total": sum(counts), "kinds": {kind: n for kind, n in zip((*OUTCOMES, "other"), counts) if n},
            "low": low, "high": high, "start": first << level, "width": per << level, "strip": [run[1] for run in runs],
            "marks": {"landed": [run[2] for run in runs if run[2] is not None],
                      "rolled back": [run[3] for run in runs if run[3] is not None]},
            "scores": [(run[4], run[5]) for run in runs if run[4] is not None], "first": ends[0], "last": ends[1]}


def runs(root=ROOT):
    """The runs rows of root's record, oldest first, their JSON read: [] for a record made before them, or none."""
    db = reader(root)
    if db is None:
        return []
    held = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'runs'").fetchone()
    cursor = db.execute("SELECT * FROM runs ORDER BY rowid") if held else None
    rows = [dict(zip([column[0] for column in cursor.description], values)) for values in cursor] if cursor else []
    db.close()
    for row in rows:
        for key in RUN_JSON:
            row[key] = json.loads(row[key]) if row[key] else None
    return rows


def identity(root=ROOT):
    """The run's identity: {id, started, versions, models, parent ({folder, run, iteration, snapshot} or None),
    starts}; None for a record made before runs were kept."""
    rows = runs(root)
    if not rows:
        return None
    return {"id": rows[0]["id"], "started": rows[0]["started"], "starts": len(rows), "parent": rows[0]["parent"],
            "versions": list(dict.fromkeys(row["version"] for row in rows)),
            "models": list(dict.fromkeys(model for row in rows for model in row["models"] or []))}


def series(root=ROOT):
    """[{number, kind, model, requests, tokens, score}] of every iteration in order: what runs compared show."""
    db = reader(root)
    if db is None:
        return []
    keys = ("number", "kind", "model", "requests", "tokens", "score")
    found = [dict(zip(keys, values)) for values in db.execute(
        "SELECT number, kind, model, coalesce(requests, 0), coalesce(prompt_tokens, 0) + coalesce(output_tokens, 0) "
        "+ coalesce(thinking_tokens, 0), score FROM iterations ORDER BY number")]
    db.close()
    return found


def count(root=ROOT):
    return one_value(root, "SELECT count(*) FROM iterations", default=0)


def standing(root=ROOT):
    """Where the run stands, for --status: {requests (that may have reached a model), tokens, tests ((passing, at
    iteration) of the last gate that ran tests), score and best ((score, at iteration) of the last scored landing
    and of the best), landed (the last landing's row: number, ended, files)}; None for what the record lacks."""
    books = ledger(root)
    uses = [use for models in books.values() for use in models.values()]
    found = {"requests": sum(map(reached, uses)),
             "tokens": sum(use["prompt"] + use["output"] + use["thinking"] for use in uses)}
    db = reader(root)
    if db is None:
        return {**found, "tests": None, "score": None, "best": None, "landed": None}
    last = "ORDER BY number DESC LIMIT 1"
    found["tests"] = db.execute(f"SELECT tests_passing, number FROM iterations WHERE tests_passing IS NOT NULL "
                                f"{last}").fetchone()
    found["score"] = db.execute(f"SELECT score, number FROM iterations WHERE kind = 'landed' AND score IS NOT NULL "
                                f"{last}").fetchone()
    found["best"] = db.execute("SELECT score, number FROM iterations WHERE kind = 'landed' AND score IS NOT NULL "
                               "ORDER BY score DESC, number LIMIT 1").fetchone()
    landed = db.execute(f"SELECT number, ended, files FROM iterations WHERE kind = 'landed' {last}").fetchone()
    db.close()
    found["landed"] = landed and {"number": landed[0], "ended": landed[1], "files": json.loads(landed[2] or "[]")}
    return found


def last_number(root=ROOT):
    return one_value(root, "SELECT max(number) FROM iterations", default=0)


def state_after(root, number):
    """The snapshot holding the codebase as iteration `number` left it: its landing, or the state it restored, or
    the one it started from (it changed nothing), or the last before it; None for none."""
    return one_value(root, "SELECT coalesce(snapshot_after, snapshot_before) FROM iterations WHERE number <= ? AND "
                           "coalesce(snapshot_after, snapshot_before) IS NOT NULL ORDER BY number DESC LIMIT 1",
                     (number,))


def has_row(root, number):
    return one_value(root, "SELECT 1 FROM iterations WHERE number = ?", (number,), default=0) == 1


def one_value(root, query, args=(), default=None):
    """The first value of the first row a query gives; `default` without a record, a row or a value."""
    db = reader(root)
    if db is None:
        return default
    found = db.execute(query, args).fetchone()
    db.close()
    return found[0] if found and found[0] is not None else default


def ledger(root=ROOT):
    """{Pacific day: {model: {requests, prompt, output, thinking, kinds, wasted}}}: the requests, and the
    counts carried from before the record."""
    db = reader(root)
    if db is None:
        return {}
    books = ledger_of(db)
    db.close()
    return books


def old_usage(path):
    """(its bytes, what it says: {} when it is no JSON object) of a usage.json an older keeper left, or None when
    there is none, it is no file (a folder, a link) or it cannot be read: then it is left as it is."""
    try:
        if not stat.S_ISREG(path.lstat().st_mode):
            return None
        data = path.read_bytes()
    except OSError:
        return None
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        return data, {}
    return data, value if isinstance(value, dict) else {}


def whole(use):
    """A day's use of a model with only what counts in it (what a hand edit of an old usage.json left of another
    shape counts as none): requests and tokens as whole numbers, kinds and waste as {name: whole number}."""
    use = use if isinstance(use, dict) else {}
    count = lambda value: value if type(value) is int and value > 0 else 0  # noqa: E731
    tally = lambda counts: {str(name): count(n) for name, n in counts.items() if count(n)} \
        if isinstance(counts, dict) else {}  # noqa: E731
    return {**{name: count(use.get(name)) for name in ("requests", "prompt", "output", "thinking")},
            "kinds": tally(use.get("kinds")), "wasted": tally(use.get("wasted"))}


def ledger_of(db):
    books = {}
    for day, model, requests, prompt, output, thinking, kinds, wasted in db.execute("SELECT * FROM carried"):
        books.setdefault(day, {})[model] = whole({"requests": requests, "prompt": prompt, "output": output,
                                                  "thinking": thinking, "kinds": json.loads(kinds),
                                                  "wasted": json.loads(wasted)})
    for day, model, kind, wasted, requests, prompt, output, thinking in db.execute(
            f"SELECT coalesce(day, ''), coalesce(model, ''), coalesce(kind, ''), wasted, count(*), {TOKENS} "
            "FROM requests GROUP BY day, model, kind, wasted"):
        use = books.setdefault(day, {}).setdefault(model, {"requests": 0, "prompt": 0, "output": 0, "thinking": 0,
                                                           "kinds": {}, "wasted": {}})
        use["requests"] += requests
        use["prompt"], use["output"], use["thinking"] = use["prompt"] + prompt, use["output"] + output, \
            use["thinking"] + thinking
        use["kinds"][kind] = use["kinds"].get(kind, 0) + requests
        if wasted:
            use["wasted"][wasted] = use["wasted"].get(wasted, 0) + requests
    return books


def requests_of(root, number):
    """[(id, model, kind, tokens (prompt, output, thinking), latency, wasted)] of an iteration's requests."""
    db = reader(root)
    if db is None:
        return []
    found = db.execute("SELECT id, model, kind, prompt_tokens, output_tokens, thinking_tokens, latency, wasted "
                       "FROM requests WHERE iteration = ? ORDER BY id", (number,)).fetchall()
    db.close()
    return found


def exchange(root, request, decoded=None):
    db = reader(root)
    if db is None:
        return None
    found = exchange_from(db, request, decoded)
    db.close()
    return found


def texts_of(data):
    """The texts a request or answer body carries (its "text" and "content" strings, in order), or ''."""
    try:
        body = json.loads(data)
    except ValueError:
        return ""
    found = []

    def walk(value, key=None):
        if isinstance(value, dict):
            for name, item in value.items():
                walk(item, name)
        elif isinstance(value, list):
            for item in value:
                walk(item, key)
        elif isinstance(value, str) and key in ("text", "content"):
            found.append(value)
    walk(body)
    return "\n".join(found)


def heading_time(row):
    """When the iteration ended, as its log heading says it, and as a datetime (None if unreadable)."""
    return read_stamp(row["ended"] or "")


# --- migration: the one place that reads the old log's prose ------------------------------------------
def migrate(book, root, usage=None):
    """Bring a workspace from before the record in, in one transaction: each section of iteration_log.md (and of the
    logs set aside in backups/logs/, for a record made anew) as a row, the counts of its usage.json (`usage`, as
    old_usage read it) as carried, and the old log, usage.json and quota.json kept whole."""
    data, said = usage or (None, {})
    files = {path.name: path.read_bytes() for path in (root / LOG.name, root / "backups" / QUOTA.name)
             if path.is_file()} | ({USAGE: data} if usage else {})
    aside = logs_set_aside(root / "backups" / LOGS_ASIDE.name)
    if not files and not aside:
        return
    old = {day: {m: u for m, u in models.items() if isinstance(u, dict)} for day, models in said.items()
           if isinstance(models, dict)}
    with Transaction(book.db):
        for data in [path.read_bytes() for _, path in aside] + [files.get(LOG.name, b"")]:  # oldest first
            for row in read_old_log(data.decode("utf-8", "replace")):
                book.db.execute("DELETE FROM iterations WHERE number = ?", (row["number"],))
                book.insert_row(row)
        book.carry(old, files)


HEADING = re.compile(r"^## Iteration (\d{1,15}) — (.*?) — (.*)$", re.M)
FILE_CHANGE = re.compile(r"(?:^|, )(.+?)(?: \((new|deleted)\))? \+(\d+) −(\d+)(?=, |$| and \d+ more$)")
MODEL_LINE = re.compile(r"(.*?), (\d+) request\(s\), tokens ([\d,]+) prompt \+ ([\d,]+) output \+ ([\d,]+) thinking; "
                        r"([\d.]+) s")
RESTORED = re.compile(r"(?:Restored snapshot|went back to snapshot) (\w+)(?:.*kept (?:in backups/|as snapshot )(\w+))?")


def read_old_log(text):
    """The rows of an old iteration_log.md, one per section (the last of a number wins)."""
    found = list(HEADING.finditer(text))
    ends = [m.start() for m in found[1:]] + [len(text)]
    return [read_section(m, text[m.end():end]) for m, end in zip(found, ends)]


def read_section(heading, body):
    number, when, outcome = heading.groups()
    row = dict.fromkeys(COLUMNS)
    row.update(number=int(number), ended=when.strip(), outcome=outcome.strip(), kind=kind_of(outcome.strip()),
               tasks=[], done=[], files=[], refused=[], not_landed=[], outside=[], refusals=[], requests=0,
               prompt_tokens=0, output_tokens=0, thinking_tokens=0, lines_added=0, lines_removed=0, reason="")
    block, output, facts = None, [], []
    for line in body.splitlines():
        if line.startswith("- "):
            label, colon, value = line[2:].partition(":")
            block = label if colon and not value.strip() else None
            if not block:
                facts.append([label, value.strip()] if colon else ["", line[2:]])
        elif block == "Tasks" and (task := re.match(r"\s+\d+\.\s(.*)", line)):
            row["tasks"].append(task[1])
        elif block == "Last output" and line.startswith("      "):
            output.append(line[6:])
    row["output"] = "\n".join(output)
    read_facts(row, facts)
    return row


def kind_of(heading):
    """The outcome an old log's heading names, by the words it begins with (the migration alone reads prose)."""
    return next((kind.value for kind in Outcome if heading.startswith(kind.value)), Outcome.OTHER.value)


LISTED = {"Refused": "refused", "Not landed (the keeper's)": "not_landed", "Refused by the system": "refusals",
          "Not landed (a symlink out of the folder, or a folder, stands there)": "outside"}
TOLD = {"Reason": "reason", "Stalled": "stalled", "Confinement": "confinement", "Salvaged": "salvaged"}


def read_facts(row, facts):
    """The columns an old section's `- Label: value` lines say: files, reason, done, what was refused or not landed,
    snapshots restored, the model's line."""
    for label, value in facts:
        if label in LISTED:
            row[LISTED[label]] = value.split("; ")
        elif label in TOLD:
            row[TOLD[label]] = value
        elif label == "Files":
            row["files"] = [[m[1], m[2] or "changed", int(m[3]), int(m[4])] for m in FILE_CHANGE.finditer(value)]
        elif label == "Done from pending_tasks.md":
            row["done"] = value.split("; ")
        elif label == "Model" and (m := MODEL_LINE.match(value)):
            row.update(model=None if m[1] == "none" else m[1], requests=int(m[2]), seconds=float(m[6]),
                       **{f"{k}_tokens": int(m[n].replace(",", "")) for n, k in
                          ((3, "prompt"), (4, "output"), (5, "thinking"))})
        elif m := RESTORED.search(value):
            row.update(restored=m[1], kept=m[2], snapshot_after=m[1])
    row["lines_added"] = sum(f[2] for f in row["files"])
    row["lines_removed"] = sum(f[3] for f in row["files"])


def columns_of(db, table="iterations"):
    return {name for _, name, *_ in db.execute(f"PRAGMA table_info({table})")}

