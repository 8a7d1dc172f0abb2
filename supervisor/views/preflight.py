"""preflight: what a person must fix before the keeper can run, each said in one line.

    problem = check_setup(need_key=True, writes=True)   # None, or one line: the settings, the key, goal.md and
                                                        # pending_tasks.md, a folder it cannot write
    problem = write_problem()                           # the last alone: for a command by hand that writes

fallback.py stops on the first problem with that line and exit code 78 (settings.EX_CONFIG), before it asks
anything or writes anything.
"""
import os
import re

from .. import envfile
from ..store import journal
from ..gateway.answers import CHARS_PER_TOKEN
from ..settings import BACKUPS, PROBLEMS, PROMPT_TOKENS, ROOT, STEERING, source_of, unknown_settings

MOST_TERSE = 3  # words a goal says besides its headings, at the least: "Grow a calculator."


def check_setup(need_key=True, writes=True):
    """The first thing a user must fix, as one line, or None."""
    if os.name != "posix":
        return "fallback.py needs Linux or macOS (on Windows, run it inside WSL)"
    problems = [*envfile.PROBLEMS, *unknown_settings(os.environ, envfile.WRITTEN), *PROBLEMS]
    if problems:
        return problems[0] + (f" ({len(problems) - 1} more after this one)" if len(problems) > 1 else "")
    if need_key and not os.environ.get("GEMINI_API_KEY", "").strip() and not os.environ.get("OPENAI_BASE_URL"):
        if "GEMINI_API_KEY" in envfile.ASSIGNED:  # .env gives it a value, and the environment has none
            if "GEMINI_API_KEY" in envfile.OVERRIDDEN:
                return "GEMINI_API_KEY is set but empty in the environment, which wins over .env: unset it"
            return "GEMINI_API_KEY in .env could not be read: write it as one line,  GEMINI_API_KEY=your-key"
        where = "put it in .env as  GEMINI_API_KEY=your-key" if (ROOT / ".env").is_file() else \
            "copy .env.example to .env and put your key in it"
        return f"GEMINI_API_KEY is not set: {where} (a free key: https://aistudio.google.com/apikey)"
    problem = steering_problem() if need_key else None
    return problem if problem or not writes else write_problem()


def write_problem():
    """Why nothing can be written in backups/ (a read-only file system, a folder not the person's), as one line;
    else None. Every command that writes the folder asks first: the loop, --restore, --reset, --keep, --materialise."""
    try:
        BACKUPS.mkdir(exist_ok=True)
        probe = BACKUPS / f".write-test-{os.getpid()}"
        probe.write_text("ok")
        probe.unlink()
    except OSError as error:
        return f"cannot write in {BACKUPS} ({error.strerror or error}): make the folder writable, or move it"
    return None


def steering_problem():
    """goal.md (or --goal's file) and pending_tasks.md as no prompt should carry them, as one line: not UTF-8 text,
    a goal missing, empty or binary, or more than the largest prompt; else None."""
    for rel in STEERING:
        path = source_of(rel)
        name = rel if path == ROOT / rel else str(path)
        try:
            text = path.read_bytes().decode("utf-8-sig")
        except FileNotFoundError:
            text = ""
        except OSError as error:
            return f"cannot read {name} ({error.strerror or error}): check its permissions"
        except UnicodeDecodeError as error:
            if rel == "goal.md" or b"\0" in error.object:  # a person's tasks may hold any bytes, kept as they are
                line = error.object[:error.start].count(b"\n") + 1
                return f"{name} is not UTF-8 text (line {line}): save it as UTF-8 text"
            text = error.object.decode("utf-8", "replace")
        if rel == "goal.md" and not text.strip():
            return f"{name} is missing or empty: write in it what you want grown (a few lines are enough)"
        odd = re.search(r"[\x00-\x08\x0b\x0e-\x1f\x7f]" if rel == "goal.md" else "\0", text)
        if odd:  # tasks may hold a failure's output, colour codes and all (never shown raw): only NUL is binary
            return (f"{name} holds a control character ({odd[0]!r}, line {text[:odd.start()].count(chr(10)) + 1}): "
                    "it should be plain text; is it a binary file?")
        if rel == "goal.md" and len(re.findall(r"\w+", re.sub(r"(?m)^\s*#.*$", "", text))) < MOST_TERSE:
            return (f"{name} gives the model no direction yet (only {' '.join(text.split())[:40]!r}): write in a "
                    "sentence or two what you want grown")
    tokens = journal.steering_size() // CHARS_PER_TOKEN
    if tokens > PROMPT_TOKENS:
        return (f"goal.md and the open tasks come to ~{tokens:,} tokens, more than the largest prompt "
                f"(~{PROMPT_TOKENS:,}): shorten them")
    return None
