"""console: what a person sees in the terminal: a line per iteration, a live status line, colours, a summary.

On a terminal (and unless TERM=dumb) a status line shows what the current iteration is doing and for how
long; each iteration then leaves one line, coloured by its outcome (unless NO_COLOR is set). Redirected to
a file, only the lines are written. Nothing printed ever holds a secret or moves the terminal's cursor (scrub.py).
"""
import os
import shutil
import sys
import threading
import time
from datetime import datetime

from ..store.journal import describe_changes
from ..scrub import printable, redact
from ..settings import LOG

LIVE = sys.stdout.isatty() and os.environ.get("TERM") != "dumb"  # a status line redrawn in place
COLOURS = {"landed": "32", "rolled back": "31", "tampered": "35", "stopped": "31", "waiting": "33", "no change": "2"}
status = {"text": "", "since": time.monotonic(), "iteration": None}  # what the current iteration is doing, since when
print_lock = threading.Lock()


def say(line, outcome=None):
    """A permanent line; on a terminal it replaces the status line, coloured by outcome (unless NO_COLOR)."""
    text = printable(redact(f"{datetime.now():%H:%M:%S} {line}"))
    if LIVE and outcome in COLOURS and "NO_COLOR" not in os.environ:
        text = f"\x1b[{COLOURS[outcome]}m{text}\x1b[0m"
    with print_lock:
        out(("\r\x1b[K" if LIVE else "") + text + "\n")


def out(text):
    """Write to the console; a reader that went away (| head, a closed terminal) stops the console, never the loop:
    what follows goes nowhere, and the log, the record and the page go on as before."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # ValueError: stdout closed  # a terminal gone (EIO), a full disk under a redirect: the console is for watching only
        pass


def show_phase(text, restart=False):
    """What is happening now, shown on the status line of a terminal (and nowhere else)."""
    status["text"] = printable(redact(" ".join(text.split())))
    if restart:
        status["since"] = time.monotonic()



def show_iteration(number):
    """The iteration the status line speaks of, from now on."""
    status["iteration"] = number


def start_status_line():
    """Redraw the status line in the background, on a terminal."""
    if LIVE:
        threading.Thread(target=redraw_status_forever, daemon=True).start()


def redraw_status_forever():
    while True:
        time.sleep(0.5)
        elapsed = int(time.monotonic() - status["since"])
        number = f"#{status['iteration']} " if status["iteration"] else ""
        line = f"{number}{elapsed // 60}:{elapsed % 60:02d} {status['text']}"[:shutil.get_terminal_size().columns - 1]
        with print_lock:
            if status["text"]:
                out(f"\r\x1b[K\x1b[2m{line}\x1b[0m")



def count(row, totals):
    """The iteration's row in the running totals the closing line sums up (a row Ctrl+C ended, with the request it
    may have sent, included); the tokens it spent."""
    spent = row["prompt_tokens"] + row["output_tokens"] + row["thinking_tokens"]
    totals[row["kind"]] += 1
    totals["requests"] += row["requests"] or 0
    totals["tokens"] += spent
    return spent


def report(row, headline, totals):
    """One line a person can scan, from the iteration's row and its headline (its times in local time, as the console
    says every time), and the running totals for the summary."""
    spent = count(row, totals)
    files = describe_changes(row["files"]) if row["kind"] == "landed" else ""
    score = f", score {row['score']:g}" if row.get("score") is not None else ""
    say(f"#{row['number']} {headline}{' — ' + files if files else ''} ({row['seconds']:.0f} s, "
        f"{row['requests']} request(s), {spent:,} tokens{score})", row["kind"])


def local_time(moment):
    """A time as the console says it: local, with the day of the week."""
    return f"{moment.astimezone():%a %H:%M} local time"


def summary(done, totals, grown_from, grown_to):
    counts = ", ".join(f"{totals[k]} {k}" for k in ("landed", "no change", "rolled back", "tampered", "waiting")
                       if totals[k])
    return (f"{done} iteration(s){': ' + counts if counts else ''}; {totals['requests']} request(s), "
            f"{totals['tokens']:,} tokens; codebase {grown_from[0]} → {grown_to[0]} files, "
            f"{grown_from[1]:,} → {grown_to[1]:,} lines. The log is in {LOG.name}.")
