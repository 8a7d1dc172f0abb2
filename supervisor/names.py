"""names: the allow-list of names a file of the codebase may have: checked when a run's files are taken, again when
they land, and on every name of the folder, of a snapshot and of an export.

A path is taken when every rule holds; `refusal` says which rule it breaks, in a few words after the path:
- text: UTF-8, each character printable (str.isprintable: a letter, mark, number, punctuation, symbol or the
  ASCII space); no control character (C0, C1, DEL), no format character (bidi overrides, zero-width joiners,
  which also hide a .git from a person's eyes or from macOS's folding), no line separator;
- short enough: each name at most NAME_MAX bytes (the keeper's temporary names never grow with it), and the path
  as the folder holds it, the folder's own path included, at most PATH_MAX bytes;
- visible: no name that starts with "." but those SEED_DOT_NAMES lets in (a tool that runs in the folder acts on
  them by itself: .git, .vscode/, .envrc, .github/workflows/, .pre-commit-config.yaml); never git's own folder in
  any case (and GIT~1, its short name on Windows disks), whatever it says; no .env nor a copy of it by any name
  an editor or a person gives it (#.env#, .env~, Copy of .env, prod.env): they hold secrets;
- of the allow-list of characters: each name made of ASCII letters, digits, ".", "_" and "-" (NAME_CHARACTERS),
  and nothing else: no space, no letter of another script, no mark. A twin of a name the person reads (goal.md
  with an invisible combining grapheme joiner after it, a Cyrillic "о" in it, fullwidth letters) shows as that
  name in the log, the console and the page; no list of banned characters finds every such letter, an allow-list
  needs none. The person's own files of other names stay in the folder, untouched: they are not the codebase.

A tree the keeper only mirrors (visible_only=False: the working copy a run leaves, with its caches and the tools'
folders, whose names are no one's choice) is held to the rules of text and length alone.
"""
import os
import re

from .scrub import escaped
from .settings import DOT_NAMES, ROOT

NAME_MAX = 255    # bytes of one name (Linux, macOS)
PATH_MAX = 4095   # bytes of a whole path (Linux's 4,096 with the terminating NUL)
NAME_CHARACTERS = re.compile(r"[A-Za-z0-9._-]")  # the characters of a name of the codebase, and no other
DOTENV = re.compile(r"(?<![0-9a-z])\.env|\.env$", re.I)  # .env, its editors' backups (#.env#, .env~, Copy of .env)
# and the like (prod.env): what holds secrets, never the codebase's


def refusal(rel, visible_only=True):
    """Why the path `rel` ("a/b.py") is outside the allow-list, as "its name: the rule", or None; without
    visible_only, only the rules of text and length are checked (for a tree the keeper only mirrors)."""
    return unprintable(rel) or too_long(rel) or (hidden(rel) or outside(rel) if visible_only else None)


def unprintable(rel):
    odd = next((c for c in rel if not c.isprintable()), None)
    if odd is None:
        return None
    what = "a byte that is not UTF-8" if 0xDC80 <= ord(odd) <= 0xDCFF else f"U+{ord(odd):04X}"
    return f"{shown(rel)}: a name that is not plain text ({what})"


def too_long(rel):
    name = shown(rel) if len(rel) <= 80 else shown(rel[:80]) + "…"
    if any(len(part.encode("utf-8", "surrogateescape")) > NAME_MAX for part in rel.split("/")):
        return f"{name}: a name longer than {NAME_MAX} bytes"
    room = PATH_MAX - len(os.fsencode(ROOT)) - 1
    if len(rel.encode("utf-8", "surrogateescape")) > room:
        return f"{name}: a path longer than {PATH_MAX:,} bytes with the folder's own ({room:,} are left for it)"
    return None


def hidden(rel):
    for part in rel.split("/"):
        if is_git(part):
            return f"{shown(rel)}: git's own folder, .git (in any case, at any depth), is never the code's"
        if not part:
            return f"{shown(rel)}: an empty name"
        if part.startswith(".") and part not in DOT_NAMES:
            return f"{shown(rel)}: a name that starts with \".\" (only those SEED_DOT_NAMES lets in land)"
        if DOTENV.search(part):
            return f"{shown(rel)}: the name of .env or of a copy of it (secrets are never the codebase's)"
    return None


def outside(rel):
    odd = next((c for c in rel if c != "/" and not NAME_CHARACTERS.fullmatch(c)), None)
    if odd is None:
        return None
    return f"{shown(rel)}: a name with a character outside the allow-list (U+{ord(odd):04X}): the codebase's " \
           "names are made of ASCII letters, digits, \".\", \"_\" and \"-\""


def shown(rel):
    """The path as a rule's line shows it: every character but printable ASCII as its escape (goal.md\\u034f), so
    a twin never reads as the name it copies."""
    return "".join(c if " " <= c <= "~" else escaped(c) for c in rel)


def is_git(name):
    """Whether git would take this name for its own folder, on some disk: .git in any case, with the dots and spaces
    Windows drops at its end, or GIT~1, the short name Windows gives it."""
    return name.rstrip(". ").casefold() in (".git", "git~1")
