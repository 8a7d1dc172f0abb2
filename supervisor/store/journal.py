"""journal: the keeper's memory in the user's files: failure tasks and ticks in pending_tasks.md, the log.

pending_tasks.md is the user's checklist: the keeper adds one task per failure of the code (the same
failure again counts up in its task), ticks the tasks a landed answer finished, and never touches a
person's tasks otherwise. Each edit changes only the lines it means to: every other byte stays as it was
(bytes that are not UTF-8, each line's ending, a missing last line break; see read_tasks). iteration_log.md
gets one section per iteration, rendered from its row in the record (record.py), for people: nothing reads it
back but the migration of a workspace from before the record; past SEED_LOG_MB it is set aside in backups/logs/
and begun again. The seed's record of its run is read here too, every field checked, since the seed may have
been rewritten.
"""
import hashlib
import json
import os
import re
import sys
from dataclasses import dataclass

from ..kinds import Account
from ..scrub import printable, redact
from ..settings import (JUDGED, LOG, LOG_BYTES, LOGS_ASIDE, LOGS_KEPT, MAX_FAILURE_TASKS, ROOT, TASK_LINES, TASKS, WORK,
                        stamp, tail_of, utc_now, write_atomically)
from ..settings import source_of  # --goal FILE: the goal.md a run is given

SHOWN_TASKS = 20  # open tasks the seed puts in its prompt (its MAX_TASKS)


def failure_mark(kind, output):
    """Eight hex digits naming a failure: the same kind, place (file and function) and error line give the
    same mark, whichever iteration, line number or folder it happened in."""
    tail = redact(output).replace(f"{WORK}/", "").replace(str(ROOT), "")
    tail = "\n".join(tail.strip().splitlines()[-TASK_LINES:])
    places = re.findall(r'File "([^"]+)", line \d+, in (\S+)|^(\S+\.py):\d+: in (\S+)', tail, re.M)
    place = ":".join(part for part in places[-1] if part) if places else ""
    error = re.sub(r"\d+", "N", error_line(output))
    return hashlib.sha256(f"{re.sub(r'[0-9]+', 'N', kind)}|{place}|{error}".encode()).hexdigest()[:8]


NAME_ERROR = re.compile(r"^(E\s+)?NameError: name '(\w+)' is not defined$", re.M)  # as pytest and Python say it
FOREIGN_FRAME = re.compile(r'\s*File "/|/\S+:\d+: in ')  # a traceback's frame in code outside the codebase


def telling_lines(output):
    """The last TASK_LINES lines of output worth a reader's and the model's eyes: frames of code outside the
    codebase (the standard library's, pytest's: their paths are absolute, the codebase's relative), the carets
    under a line and pytest's "!!! stopping" banners left out, so a test's name, its line and the error stay."""
    kept, foreign = [], False
    for folder in (WORK, JUDGED, ROOT):  # the codebase's paths as the model knows them
        output = output.replace(f"{folder}/", "")
    for line in output.strip().splitlines():
        if FOREIGN_FRAME.match(line):
            foreign = True
        elif foreign and line.startswith("    ") and not line.lstrip().startswith("E "):
            continue  # the foreign frame's code line
        else:
            foreign = False
            if not re.fullmatch(r"\s*\^[\s^~]*|!{3,}.*", line):
                kept.append(forgotten_import(line))
    return kept[-TASK_LINES:]


def forgotten_import(line):
    """A NameError of a standard module's name, with the hint Python 3.12 gives it (3.11 does not): a small model
    that used json in a test without importing it did so four times running with the bare error before it."""
    name = NAME_ERROR.fullmatch(line.rstrip())
    return f"{line.rstrip()}. Did you forget to import '{name[2]}'?" if name and name[2] in sys.stdlib_module_names \
        else line


def describe_changes(changed, most=20):
    """The changed files for a log or console line; odd characters in names are shown as escapes."""
    shown = [f"{printable(rel)}{'' if kind == 'changed' else f' ({kind})'} +{added} −{removed}"
             for rel, kind, added, removed in changed[:most]]
    return ", ".join(shown) + (f" and {len(changed) - most} more" if len(changed) > most else "")


def error_line(output):
    """The last line of output that names an error (else the last line), for a task or a one-line message."""
    lines = [line.strip() for line in redact(output).splitlines() if line.strip()]
    errors = [line for line in lines if re.match(r"(E\s+)?[\w.]*(Error|Exception|Exit|Interrupt)\b", line)]
    return (errors or lines or [""])[-1][:300]


def read_tasks(path=TASKS):
    """pending_tasks.md's lines, split at "\n" alone and each with its own ending ("\r\n", "\n", or none at
    the end of the file), bytes that are not UTF-8 kept as surrogates: joined and encoded back, the same bytes."""
    text = path.read_bytes().decode("utf-8", "surrogateescape") if path.exists() else ""
    return re.findall(r"[^\n]*\n|[^\n]+", text)


TASK = re.compile(r"\s*[-*] \[([ xX])\] (.*)")  # a task's line: its box, then its text
FAILURE = re.compile(r"\[failure (\w+): (\d+) times? since ([^,\]]+), (first after snapshot (\w*))\]")  # the
# bracket of a task the keeper wrote for a failure (edited by a person, it no longer matches: a person's task then)


@dataclass
class Task:
    """A task of pending_tasks.md: its lines in read_tasks()'s list (`first`, and `end` past its detail lines),
    whether it is ticked, its text as seed.py reads it (undecodable bytes replaced, on one line), the keeper's
    failure bracket in it (a match: mark, count, since, first after snapshot ...), and its indented detail lines."""
    first: int
    end: int
    done: bool
    text: str
    failure: re.Match | None
    detail: list


def parse_tasks(lines):
    """The tasks among read_tasks()'s lines, in order: the one reading of pending_tasks.md (the seed has its own,
    which this follows: a task's detail is the indented lines after it)."""
    tasks = []
    for n, line in enumerate(lines):
        seen = line.encode("utf-8", "surrogateescape").decode("utf-8", "replace").rstrip("\r\n")
        if found := TASK.match(seen.splitlines()[0] if seen.splitlines() else ""):
            tasks.append(Task(n, n + 1, found[1] != " ", one_line(found[2], 2_000), FAILURE.search(found[2]), []))
        elif tasks and seen.startswith("  ") and seen.strip() and tasks[-1].end == n:
            tasks[-1].detail.append(seen.strip())
            tasks[-1].end = n + 1
    return tasks


def write_tasks(lines, edited):
    """Write read_tasks's lines as edited, if they changed: a line without an ending (one the keeper adds) gets
    the file's usual one, and the file ends as it did, with a line break or without."""
    if edited == lines:
        return
    text = "".join(lines)
    eol = "\r\n" if 2 * text.count("\r\n") > text.count("\n") else "\n"
    edited_text = "".join(line if line.endswith("\n") else line + eol for line in edited)
    if text and not text.endswith("\n"):
        edited_text = edited_text.removesuffix(eol)
    write_atomically(TASKS, edited_text.encode("utf-8", "surrogateescape"))


def add_failure_task(headline, output, where, mark):
    """Record a failure as an open task, once: the same failure (same mark) again counts up in its task,
    which says how often, since when and after which snapshot it began. At most MAX_FAILURE_TASKS stay
    open (the oldest go); a person's tasks are never touched. What the model's code wrote is scrubbed of secrets
    and shown without control characters (scrub.py): a person reads this file with cat."""
    tail = telling_lines(printable(redact(output), keep="\n"))
    lines = read_tasks()
    edited = list(lines) if TASKS.exists() else ["# Pending tasks", ""]
    found = next(((task.first, task.failure) for task in parse_tasks(lines) if not task.done and task.failure
                  and task.failure[1] == mark), None)
    if found is None:
        detail = [f"      > {line[:300]}" for line in tail if line.strip()]  # quoted: no line of it reads as a task
        edited += [f"- [ ] {printable(redact(headline))} [failure {mark}: 1 time since {stamp(utc_now())}, first after "
                   f"snapshot {where}]"] + detail
    else:
        n, match = found
        count = int(match.group(2)) + 1
        ending = edited[n][len(edited[n].rstrip("\r\n")):]
        edited[n] = (f"- [ ] {printable(redact(headline))} [failure {mark}: {count} times since {match.group(3)}, "
                     f"{match.group(4)}] This keeps happening: fix it before anything else.{ending}")
    write_tasks(lines, drop_oldest_failures(edited))


def remove_failure_task(mark):
    """Take back the open task of a failure that turned out not to be the code's (with its detail lines)."""
    lines = read_tasks()
    gone = {n for task in parse_tasks(lines) if not task.done and task.failure and task.failure[1] == mark
            for n in range(task.first, task.end)}
    write_tasks(lines, [line for n, line in enumerate(lines) if n not in gone])


def tick_tasks(done):
    """Tick the open tasks a landed answer finished, found by their text as seed.py reads it (undecodable
    bytes replaced, cut at any line break, on one line): edits made meanwhile are kept."""
    lines = read_tasks() if done else []
    ticked, tasks = list(lines), parse_tasks(lines)
    for text in done:
        task = next((task for task in tasks if not task.done and task.text[:300] == text), None)
        if task:
            ticked[task.first], task.done = lines[task.first].replace("[ ]", "[x]", 1), True
    write_tasks(lines, ticked)


def steering_size():
    """Characters every prompt carries from the person: goal.md and the open tasks with their detail lines (the
    first SHOWN_TASKS, as the seed shows them), so that a model whose prompt cannot hold them is not asked."""
    lines = read_tasks()
    shown = [task for task in parse_tasks(lines) if not task.done][:SHOWN_TASKS]
    goal = source_of("goal.md")
    return (len(goal.read_text("utf-8", "replace")) if goal.is_file() else 0) + sum(
        len(lines[task.first]) + min(sum(map(len, lines[task.first + 1:task.end])), 2_000) for task in shown)
    # a task's line whole, its detail lines up to the seed's cap


def drop_oldest_failures(lines):
    """Keep at most MAX_FAILURE_TASKS open failure tasks (with their indented detail lines)."""
    failures = [task for task in parse_tasks(lines) if not task.done and task.failure]
    drop = {n for task in failures[:max(0, len(failures) - MAX_FAILURE_TASKS)] for n in range(task.first, task.end)}
    return [line for n, line in enumerate(lines) if n not in drop]


LOG_HEAD = "# Iteration log\n\nfallback.py appends one section per iteration here. Newest at the bottom.\n"
ASIDE = re.compile(rb"^Iterations up to (\d{1,15}) are in ", re.M)  # the line a log begun again starts with
SET_ASIDE = re.compile(r"iteration_log-(\d+)-\d+\.md")  # a log set aside, by its first and last iteration


TASKS_HEAD = ("# Pending tasks\n\nOpen tasks come first in every prompt, oldest first. Add one as a line `- [ ] what to "
              "do`; the keeper\nticks it (`- [x]`) when an answer that finishes it has passed, and adds a task for "
              "every failure.\n\n")


def start_log():
    """Begin iteration_log.md if there is none: the one a set-aside killed between its two moves began, if any (the
    catch-up reads where it left off there, and not from the first iteration); and pending_tasks.md, with how to
    use it. Neither is in git: a clone stays clean after its first run, and pulls the keeper without a conflict."""
    if not TASKS.exists():
        write_atomically(TASKS, TASKS_HEAD.encode())
    if LOG.exists():
        return
    if (LOGS_ASIDE / "next.md").is_file():
        os.replace(LOGS_ASIDE / "next.md", LOG)
    else:
        LOG.write_text(LOG_HEAD)


def log_iteration(row):
    """Append the iteration's section to iteration_log.md, rendered from its row in the record (secrets scrubbed,
    control characters shown: see scrub.py); a log past SEED_LOG_MB is set aside first."""
    try:
        grown = LOG.stat().st_size > LOG_BYTES
    except FileNotFoundError:
        grown = False
    if grown:
        set_aside_log()
    with LOG.open("a", encoding="utf-8") as log:
        log.write(printable(redact(section_of(row)), keep="\n\t"))


def set_aside_log():
    """Move iteration_log.md to backups/logs/iteration_log-FIRST-LAST.md and begin it again with a line saying
    where the rest is; only the newest LOGS_KEPT set aside are kept (the record holds every iteration)."""
    with LOG.open("rb") as log:
        first = re.search(rb"^## Iteration (\d{1,15}) ", log.read(65536), re.M)
    last = last_logged_iteration()
    name = f"iteration_log-{int(first[1]) if first else 1}-{last}.md"
    LOGS_ASIDE.mkdir(parents=True, exist_ok=True)
    write_atomically(LOGS_ASIDE / "next.md", f"{LOG_HEAD}\nIterations up to {last} are in backups/logs/ ({name} "
                     f"and up to {LOGS_KEPT - 1} before it); any iteration in full: python fallback.py --show N\n")
    os.replace(LOG, LOGS_ASIDE / name)  # a kill here leaves no log: the next start puts next.md in its place
    os.replace(LOGS_ASIDE / "next.md", LOG)
    for _, old in logs_set_aside(LOGS_ASIDE)[:-LOGS_KEPT]:
        old.unlink()


def logs_set_aside(folder):
    """[(first iteration, path)] of the logs set aside in `folder`, oldest first (none where it is no folder)."""
    if not folder.is_dir():
        return []
    return sorted((int(m[1]), path) for path in folder.iterdir() if (m := SET_ASIDE.fullmatch(path.name)))


def section_of(row):
    """The log section of an iteration's row: its heading, tasks, facts (`- Label: value`) and last output."""
    lines = [f"## Iteration {row['number']} — {row['ended']} — {row['outcome']}", ""]
    if row["tasks"]:
        lines += ["- Tasks:"] + [f"  {n}. {task}" for n, task in enumerate(row["tasks"], 1)]
    lines += [f"- {label}: {value}" if label else f"- {value}" for label, value in facts_of(row)]
    if row["output"]:
        lines += ["- Last output:", ""] + [f"      {line}" for line in row["output"].splitlines()[-TASK_LINES:]]
    return "\n" + "\n".join(lines) + "\n"


LISTED = (("Refused", "refused"), ("Not landed (the keeper's)", "not_landed"),
          ("Not landed (a symlink out of the folder, or a folder, stands there)", "outside"),
          ("Refused by the system", "refusals"))  # the row's lists a section shows, each on a line of its own


def facts_of(row):
    """The `- Label: value` lines of an iteration's section (and the page's card), rendered from its row."""
    facts = [("Done from pending_tasks.md", "; ".join(row["done"]))] if row["done"] else []
    facts.append(("Files", describe_changes(row["files"]) or "none changed"))
    facts += [(label, "; ".join(row.get(key) or [])) for label, key in LISTED if row.get(key)]
    facts += [("Reason", row["reason"])] if row["reason"] else []
    facts += [("Stalled", row["stalled"])] if row.get("stalled") else []
    if row["restored"]:
        kept = f"kept as snapshot {row['kept']}" if row["kept"] else "not kept (it could not be taken)"
        facts.append(("", f"Restored snapshot {row['restored']}; the failing state is {kept}"))
    if row["tests_ran"] and row["passing"] is not None:
        facts.append(("Tests", f"{row['tests_passing']} of the model's pass; the gate ran {row['tests_ran']}"))
    if row["score"] is not None:
        others = ", ".join(f"{name} {value:g}" for name, value in (row["scores"] or {}).items() if name != "score")
        facts.append(("Score", f"{row['score']:g}" + (f" ({others})" if others else "")))
    facts += [("Confinement", row["confinement"])] if row.get("confinement") else []
    facts += [("Salvaged", row["salvaged"])] if row.get("salvaged") else []
    facts.append(("Model", f"{row['model'] or 'none'}, {row['requests']} request(s), tokens {row['prompt_tokens']:,} "
                           f"prompt + {row['output_tokens']:,} output + {row['thinking_tokens']:,} thinking; "
                           f"{row['seconds'] or 0:.1f} s"))
    return facts


def last_logged_iteration():
    """The number of the log's last section (of the last one set aside, if it has none yet), or 0."""
    size = 65536
    while True:  # read further back while the tail holds no heading: a section with a long line of output is longer
        tail = tail_of(LOG, size)
        numbers = re.findall(rb"^## Iteration (\d{1,15}) ", tail, re.M) or ASIDE.findall(tail)
        if numbers or len(tail) < size or size > LOG_BYTES:  # a person's paste of gigabytes is not read whole
            return int(numbers[-1]) if numbers else 0
        size *= 4


def read_record(data):
    """What the seed says it did, from the bytes of its record (b"" when it left none): how it ended, what it
    refused to write and why. The seed may have been rewritten, so every field is checked, and texts become
    single lines (no forged log headings). What it asked, spent, planned and finished is not its say: the
    gateway's account of the answer says that (see account)."""
    try:
        raw = json.loads(data)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than Python reads: no record
        raw = {}
    raw = raw if isinstance(raw, dict) else {}
    refused = raw.get("refused") if isinstance(raw.get("refused"), list) else []
    return {"outcome": one_line(text_of(raw.get("outcome")), 20),
            "refused": one_line_each([text for text in refused if isinstance(text, str)]),
            "reason": one_line(text_of(raw.get("reason")))}


def text_of(value):
    """A text of the record's, or '': what is not a text (a number, a list nested deep) is no text of it."""
    return value if isinstance(value, str) else ""


def account(record, use, shown):
    """The seed's record with the gateway's account of the run: the model, requests, tokens, what it dropped, and
    from the answer itself, its tasks and which of the open tasks `shown` to the seed it finished."""
    done = sorted({n for n in use.done if isinstance(n, int) and 1 <= n <= len(shown)})
    return Account(outcome=record["outcome"], reason=record["reason"],
                   refused=(*record["refused"], *(one_line(why) for why in use.refused)), model=use.model,
                   requests=use.requests, tokens=use.tokens, calls=use.calls, salvaged=one_line(use.salvaged),
                   answered=use.answered, problem=use.problem, asking=use.asking,
                   tasks=tuple(one_line_each(use.tasks)), done=tuple(shown[n - 1] for n in done))


def open_tasks():
    """The open tasks as the seed lists them (its numbering: the first SHOWN_TASKS `- [ ]` lines, each by the
    text of its first line), so that an answer's "done" numbers can be read."""
    return [task.text[:300] for task in parse_tasks(read_tasks()) if not task.done][:SHOWN_TASKS]


def one_line(value, limit=300):
    return " ".join(str(value).split())[:limit] if value else ""


def one_line_each(values):
    return [one_line(v) for v in values[:50]] if isinstance(values, (list, tuple)) else []
