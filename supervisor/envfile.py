"""envfile: the workspace's .env as a person wrote it, with any editor. Read when fallback.py starts, never at import.

    load(path)           its settings put in the environment (real environment variables win); the names it sets
                         (WRITTEN), those the environment held already (OVERRIDDEN), the names a line gives a value
                         to (ASSIGNED) and a line for each statement that cannot be read (PROBLEMS), for preflight.py
    values(path, stamp)  {name: value} as the file was at `stamp`: scrub.py reads it again when it changes

A byte-order mark is fine. A file that is not UTF-8 text, or a line that is not NAME=value, is a problem said in one
line, never raised; python-dotenv's own warnings are not shown, and a problem names the setting, never its value
(it may be a key). python-dotenv's parser is the one reader of the file.
"""
import functools
import io
import logging
import os
import re

PROBLEMS = []  # what load() found that cannot be read, each as one line saying what to fix
WRITTEN = set()  # the names .env sets, as load() read them
ASSIGNED = set()  # the names a line of .env gives a value to, read or not (a line python-dotenv could not read too)
OVERRIDDEN = set()  # the names .env sets that the environment held already (it wins)


def load(path):
    """Put .env's settings in the environment, real environment variables first; nothing when there is no .env."""
    from dotenv import load_dotenv  # fallback.py checks that it is installed before it loads this
    text = read(path, PROBLEMS)
    if text is None:
        return
    bindings = parsed(text)
    PROBLEMS.extend(unreadable_lines(bindings))
    ASSIGNED.update(re.findall(r"^[ \t]*(?:export[ \t]+)?([A-Za-z_][\w.]*)[ \t]*=[ \t]*\S", text, re.M))
    WRITTEN.update(binding.key for binding in bindings if binding.key)
    OVERRIDDEN.update(name for name in WRITTEN if name in os.environ)
    quiet = logging.getLogger("dotenv.main")
    quiet.disabled, was = True, quiet.disabled  # each line it cannot parse is said above, with its number
    try:
        load_dotenv(stream=io.StringIO(text))
    finally:
        quiet.disabled = was


@functools.lru_cache(maxsize=4)
def values(path, stamp):
    """.env's settings as written, as the file was at `stamp` ({} when there is none, or it cannot be read); the
    lines python-dotenv cannot read left out (load() said them, once)."""
    text = read(path, []) if stamp else None
    return {binding.key: binding.value for binding in parsed(text or "") if binding.key and
            binding.value is not None and not binding.error}


def read(path, problems):
    """The file's text, or None: when there is none, or when it cannot be read (then a line in problems)."""
    try:
        return path.read_bytes().decode("utf-8-sig")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as error:
        why = getattr(error, "strerror", None) or "not UTF-8 text"
        problems.append(f"cannot read .env ({why}): save it as UTF-8 text, one NAME=value a line")
        return None


def parsed(text):
    """python-dotenv's reading of each statement."""
    from dotenv.parser import parse_stream
    return list(parse_stream(io.StringIO(text)))


def unreadable_lines(bindings):
    """A line of .env for each of python-dotenv's statements (`bindings`) that it cannot read, or that a quote left
    open runs past its line (it would swallow the lines after it); the setting's name is shown, never its value (it
    may be a key)."""
    problems = []
    for binding in bindings:
        lines = binding.original.string.rstrip("\n").split("\n")
        blank = next((n for n, line in enumerate(lines) if line.strip()), 0)  # blank lines it starts with
        first, more = lines[blank], lines[blank + 1:]
        if binding.error or more or (binding.key and binding.value is None):
            name = re.match(r"\s*(?:export\s+)?([A-Za-z_][\w.]*)\s*=\s*(['\"])?", first)
            where = f".env line {binding.original.line + blank}" + (f" ({name[1]}=…)" if name else "")
            problems.append(f"{where} cannot be read: its quote is not closed on that line; write it on one line as "
                            "NAME=value" if name and name[2] else f"{where} cannot be read: write it as NAME=value "
                            "(or start it with # to keep it as a comment)")
    return problems
