"""status: what a person asks the keeper without running the loop: --status, --show N and --models.

Neither makes a generation request: --status reads the record (backups/record.sqlite: the iterations and the
requests), the tasks, the gateway's memory and backups/; --models asks the API (or the local server) which
models it offers.
"""
import difflib
import json
import os
import sys

from ..gateway import backends
from ..store import journal, record
from ..kinds import Outcome
from ..scrub import printable
from ..store.ledger import Books, pacific_day, reached
from ..settings import BACKUPS, INDEX, ROOT
from ..store.snapshots import codebase_size, current, load_index, retention, run_worked


def show_status(holder):
    """What a person wants to know at a glance; makes no model request."""
    print(f"keeper: running (pid {holder})" if holder else "keeper: not running")
    run = record.identity(ROOT)
    print(f"run: {describe_run(run)}")
    count, rows, told = record.count(ROOT), record.iterations(ROOT, last=5), journal.last_logged_iteration()
    show_standing(count)
    inherited = run["parent"]["iteration"] if run and run["parent"] else 0  # a fork's log starts with its parent's
    print(f"iterations: {count} recorded" + ("; the last ones:" if rows else "") + (
        f" (iteration_log.md tells of {told}: backups/, which holds the record, was deleted or moved)"
        if not count and told > inherited else ""))
    for row in rows:
        score = f" (score {row['score']:g})" if row["score"] is not None else ""
        files = f" — {journal.describe_changes(row['files'], 3)}" if row["kind"] == "landed" and row["files"] else ""
        heading = f"Iteration {row['number']} — {row['ended']} — {row['outcome']}{score}{files}"
        print(f"  {printable(heading)}")
    open_ones = [task for task in journal.parse_tasks(journal.read_tasks()) if not task.done]
    tasks, failures = [task.text for task in open_ones], sum(bool(task.failure) for task in open_ones)
    print(f"pending tasks: {len(tasks)} open ({len(tasks) - failures} yours, {failures} failures remembered: the "
          "page lists them apart)")
    for task in tasks[:5]:
        print(f"  - {printable(cut_at_a_word(task, 100))}")
    today, books = record.ledger(ROOT).get(pacific_day(), {}), Books(BACKUPS)  # quota.json's one reader
    models = backends.chosen_models(os.environ)  # GEMINI_MODEL's, or OPENAI_MODEL's with a server of one's own
    print(f"models today (Pacific day {pacific_day()}):")
    for model in dict.fromkeys(models + list(today) + list(books.quota)):
        use = today.get(model, {})
        wasted, unreached = sum(use.get("wasted", {}).values()), use.get("requests", 0) - reached(use)
        print(f"  {model:<28} {reached(use):>3} request(s), {wasted - unreached} wasted, "
              f"{use.get('prompt', 0) + use.get('output', 0) + use.get('thinking', 0):>9,} tokens  "
              f"{model_state(books.blocked(model))}" + (f"  (and {unreached} that never reached it)"
                                                        if unreached else ""))
    index = load_index() if INDEX.exists() else {"snapshots": []}
    print(f"backups: {len(index['snapshots'])} snapshot(s), {disk_use(BACKUPS) / 1e6:.1f} MB; {where_it_stands(index)}")
    print(f"  {retention(index)}")
    return 0


def show_standing(count):
    """The run's totals (iterations by outcome, requests, tokens), the codebase as it stands (files, lines, tests
    passing, the score and its best) and what landed last, by name: three lines counted from the record's rows."""
    kinds, now = record.summary(ROOT, cells=1)["kinds"], record.standing(ROOT)
    outcomes = ", ".join(f"{kinds[k.value]} {k.value}" for k in Outcome if kinds.get(k.value))
    print(f"run so far: {count} iteration(s){': ' + outcomes if outcomes else ''}; {now['requests']} request(s), "
          f"{now['tokens']:,} tokens")
    files, lines = codebase_size()
    tests = f"; tests passing: {now['tests'][0]} (iteration {now['tests'][1]})" if now["tests"] else \
        "; tests passing: none run yet"
    score = f"; score {now['score'][0]:g} (iteration {now['score'][1]}), best {now['best'][0]:g} (iteration " \
        f"{now['best'][1]})" if now["score"] else ""
    print(f"codebase: {files} file(s), {lines:,} line(s){tests}{score}")
    if now["landed"]:
        landed = now["landed"]
        print(printable(f"last landed: iteration {landed['number']} ({landed['ended']}): "
                        f"{journal.describe_changes(landed['files'], 5) or 'no file named'}"))


def cut_at_a_word(text, most):
    """The text, or its first words up to `most` characters and an ellipsis: never cut in a word."""
    if len(text) <= most:
        return text
    head = text[:most - 1].rsplit(" ", 1)[0] if " " in text[:most - 1] else text[:most - 1]
    return head.rstrip(" ,;:") + "…"


def describe_run(identity):
    """The run's identity in a line: its id, the keeper's versions, the models, and the run it was forked from."""
    if not identity:
        return "none yet (the keeper's first start gives the run its id)"
    parent = identity["parent"]
    models = ", ".join(identity["models"]) or "none yet"
    return (f"{identity['id']} (keeper {', '.join(identity['versions'])}; models {models})"
            + (f"; forked from {parent['folder']} (run {parent['run'] or '?'}) after iteration {parent['iteration']}"
               if parent else ""))


def where_it_stands(index):
    """Which snapshot the codebase is now, and the newest one a run from worked (where a walk-back would go)."""
    now, worked = current(index), [e["id"] for e in index["snapshots"] if e["good"]]
    if not index["snapshots"]:
        return "no snapshot yet: the first run takes one (genesis)"
    state = (f"the codebase now is snapshot {now['id']} ({now['kind']}, a run from it worked: {run_worked(now)})"
             if now else "the codebase now is in no snapshot (edited since the last one)")
    return f"{state}; the newest a run worked from: {worked[-1] if worked else 'none yet'}"


def model_state(blocked):
    """ok, or spent / gone until a local time, from the gateway's memory (Books.blocked)."""
    return f"{blocked[0]} until {blocked[1].astimezone():%a %H:%M} local" if blocked else "ok"


def disk_use(folder):
    """Bytes the files under folder take, each hard-linked file counted once; links not followed."""
    sizes, folders = {}, [folder]
    while folders:
        try:
            entries = os.scandir(folders.pop())
        except OSError:  # gone, or not a folder
            continue
        with entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    folders.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    try:
                        found = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:  # pruned while this counts
                        continue
                    sizes[found.st_dev, found.st_ino] = found.st_size
    return sum(sizes.values())


def list_models():
    """The models Gemini (or the server at OPENAI_BASE_URL) offers: one request that spends no generation quota."""
    return backends.list_models(os.environ)


def readable(text):
    """An answer's text as a person reads it: an answer object (tasks, done, files) laid out with each file's text
    as it is, not one line of escaped JSON; any other text as it is."""
    try:
        answer = json.loads(text)
    except ValueError:
        return text
    if not isinstance(answer, dict) or not isinstance(answer.get("files"), list):
        return text
    lines = [f"tasks: {json.dumps(answer.get('tasks'), ensure_ascii=False)}",
             f"done: {json.dumps(answer.get('done'), ensure_ascii=False)}"]
    for item in answer["files"]:
        item = item if isinstance(item, dict) else {}
        lines += [f"~~~ file {item.get('path')!r}", str(item.get("content")), "~~~"]
    return "\n".join(lines)


def request_of(body):
    """A request's JSON object, or {} for a body that is none."""
    try:
        body = json.loads(body)
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def told(body):
    """The texts a request tells the model, in the order it reads them: the system's, then each message's (Gemini's
    shape, or a chat's)."""
    body = request_of(body)
    parts = [*(body.get("systemInstruction") or {}).get("parts", []),
             *(part for turn in body.get("contents") or [] for part in turn.get("parts", []))]
    texts = [part.get("text") for part in parts] + [turn.get("content") for turn in body.get("messages") or []]
    return "\n".join(text for text in texts if isinstance(text, str))


def adaptation(asked, sent):
    """What the wire adaptation changed of the seed's request, in lines: each line of text it added (+) or took
    away (-), then the settings as asked and as sent (what is not text: the answer's format, limits, sampling)."""
    changed = [line for line in difflib.unified_diff(told(asked).splitlines(), told(sent).splitlines(), lineterm="",
                                                     n=0) if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    asked_settings, sent_settings = settings_of(asked), settings_of(sent)
    return [*(changed or ["the text: none (the model was told what the seed asked, word for word)"]),
            f"the settings asked: {json.dumps(asked_settings, sort_keys=True)}",
            f"the settings sent:  {json.dumps(sent_settings, sort_keys=True)}"]


def settings_of(body):
    """A request's settings: all but its texts and the model's name (Gemini's generationConfig, a chat's fields)."""
    body = request_of(body)
    if "contents" in body:
        return body.get("generationConfig") or {}
    return {key: value for key, value in body.items() if key not in ("messages", "model")}


def print_iteration(number):
    """--show N: what the seed asked at iteration N, and apart what the wire adaptation changed of it (the prompt as
    sent), what the model answered (as received and as cleaned for the seed), and what came of it, from the record;
    2 (a command-line mistake) with one line if there is no such iteration."""
    rows = record.iterations(ROOT, number=number)
    if not rows:
        print(f"fallback: the record holds no iteration {number}: see  python fallback.py --status", file=sys.stderr)
        return 2
    row = rows[0]
    print(printable(f"Iteration {row['number']} — {row['ended']} — {row['outcome']}"))
    for label, value in journal.facts_of(row):
        print(printable(f"- {label}: {value}" if label else f"- {value}"))
    for request, model, kind, prompt, output, thinking, latency, wasted in record.requests_of(ROOT, number):
        print(f"\n=== request {request}: {model}, {kind}, tokens {prompt:,} prompt + {output:,} output + {thinking:,} "
              f"thinking, {latency or 0:.2f} s" + (f", wasted: {wasted}" if wasted else ""))
        found = record.exchange(ROOT, request) or {}
        if found.get("asked"):
            print(f"--- what the seed asked ({len(found['asked']):,} bytes), its text:")
            for line in told(found["asked"]).splitlines():
                print(printable(line))
            print("--- what the wire adaptation changed of it:")
            for line in adaptation(found["asked"], found.get("prompt") or b""):
                print(printable(line))
        for title, key in (("the prompt as sent", "prompt"), ("the answer as received", "answer"),
                           ("the answer as cleaned for the seed", "cleaned")):
            data = found.get(key) or b""
            if key == "prompt" and found.get("asked"):  # told above: what the seed asked, and what changed of it
                print(f"--- {title} ({len(data):,} bytes): what the seed asked, with the changes above")
                continue
            print(f"--- {title} ({len(data):,} bytes){', its text' if record.texts_of(data) else ''}:")
            for line in readable(record.texts_of(data) or data.decode("utf-8", "replace")).splitlines():
                print(printable(line))
    if row["output"]:
        print("\n=== the output that shows it (its last lines):")
        for line in row["output"].splitlines():
            print(printable(f"    {line}"))
    print(f"\n=== what came of it: {printable(row['outcome'])}"
          + (f"; score {row['score']:g}" if row["score"] is not None else ""))
    return 0

