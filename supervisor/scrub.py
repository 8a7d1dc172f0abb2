"""scrub: what leaves the keeper, for a person or upstream: secrets taken out by their value, control characters shown.

    redact(text or bytes, held=())  every secret's value as [ITS NAME], and anything shaped like a Google API key:
                              the one scrub of every file the keeper writes (the log, the tasks, the page, the
                              record, the report's cache), of every line it prints and of what the gateway keeps
    printable(text, keep="")  every character that is not printable text shown as its escape (\\x1b, \\u202e): nothing
                              from a model or its processes moves a terminal's cursor, sets its title or clipboard
                              in any encoding a prompt could carry it
    valid(text or JSON value) what comes in from a model or its code made storable where it enters, before anything
                              keeps it: each lone surrogate and NUL as U+FFFD (the record, the log and the page
                              could hold such text and never be written again)

The secrets are the values of .env's settings whose names hold KEY, TOKEN, SECRET or PASSWORD, or that
SEED_SECRETS names (the keeper's own SEED_ settings aside), as .env writes them and as the environment has them,
and the keys the keeper holds (GEMINI_API_KEY, OPENAI_API_KEY) wherever they come from. A value shorter than
MIN_SECRET characters is not one: it would match everywhere.
"""
import base64
import html
import json
import os
import re
from urllib.parse import quote

from . import envfile
from .settings import KEY_SHAPES, ROOT, SECRET_NAMES

KEYS = ("GEMINI_API_KEY", "OPENAI_API_KEY")  # the keys the keeper holds, from .env or the environment
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD")  # a setting whose name holds one of these is a secret
MIN_SECRET = 8  # characters; a shorter value is not scrubbed (it would match everywhere)


# --- the secrets ----------------------------------------------------------------------------------
def secrets():
    """[(name, value)] of every secret, the longest value first (so a value inside another goes after it)."""
    dotenv = ROOT / ".env"
    try:
        stamp = dotenv.stat().st_mtime_ns, dotenv.stat().st_size
    except OSError:
        stamp = None
    written = {name: value for name, value in envfile.values(dotenv, stamp).items() if is_secret(name)}
    named = set(written) | set(KEYS) | set(SECRET_NAMES)
    pairs = {(name, (value or "").strip()) for name, value in written.items()}
    pairs |= {(name, os.environ[name].strip()) for name in named if name in os.environ}
    return sorted(((name, value) for name, value in pairs if len(value) >= MIN_SECRET), key=lambda p: (-len(p[1]), p))


def is_secret(name):
    """Whether a setting's value is a secret, by its name."""
    if name.startswith("SEED_"):
        return name in SECRET_NAMES
    return name in KEYS or name in SECRET_NAMES or any(word in name.upper() for word in SECRET_WORDS)


# --- the one scrub --------------------------------------------------------------------------------
def redact(data, held=()):
    """The text (or bytes) with every secret's value, in any form it is written to a file in, as [ITS NAME], and
    anything shaped like a Google API key as [GEMINI_API_KEY]. `held`: (name, value) of secrets the caller holds
    besides (the gateway's key, as its backend was handed it)."""
    as_bytes = isinstance(data, (bytes, bytearray))
    text = bytes(data).decode("utf-8", "surrogateescape") if as_bytes else str(data)
    held = [(name, value) for name, value in held if len(value) >= MIN_SECRET]
    for name, value in sorted({*secrets(), *held}, key=lambda pair: (-len(pair[1]), pair)):
        for form in {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1], html.escape(value)}:
            text = text.replace(form, f"[{name}]")
    text = KEY_SHAPES.sub("[GEMINI_API_KEY]", text)
    return text.encode("utf-8", "surrogateescape") if as_bytes else text


# --- the one sanitizer ----------------------------------------------------------------------------
def printable(text, keep=""):
    """The text with every character that is not printable text (str.isprintable: control characters C0, C1 and DEL,
    format characters such as bidi overrides and zero-width joiners, line separators, bytes that are not UTF-8)
    shown as its escape; the characters of `keep` ("\\n\\t" for output of many lines) kept as they are."""
    if text.isprintable():
        return text
    if keep:
        return re.sub(f"[^{re.escape(keep)}]+", lambda piece: printable(piece[0]), text)
    return "".join(c if c.isprintable() else escaped(c) for c in text)


def escaped(c):
    """A character as Python writes it in a string: \\x1b, \\u202e, \\U000e0001; a byte that is not UTF-8 (held
    as a surrogate) as the byte itself, \\xff."""
    code = ord(c)
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


# --- the one cleaning of what comes in -------------------------------------------------------------
UNSTORABLE = re.compile("[\ud800-\udfff\x00]")  # no UTF-8 holds a lone surrogate; NUL ends a C string
REPLACEMENT = "\ufffd"


def valid(value):
    """The text, or a JSON value (its lists and objects cleaned in place, keys too, at any depth), with each lone
    surrogate and NUL as U+FFFD: valid UTF-8 that any file, database or terminal takes."""
    if isinstance(value, str):
        return UNSTORABLE.sub(REPLACEMENT, value)
    box = [value]
    pending = [box]
    while pending:  # by hand, not by recursion: a JSON value may nest as deep as its parser went
        held = pending.pop()
        pairs = list(held.items() if isinstance(held, dict) else enumerate(held))
        if isinstance(held, dict):
            held.clear()
        for key, item in pairs:
            item = UNSTORABLE.sub(REPLACEMENT, item) if isinstance(item, str) else item
            pending += [item] if isinstance(item, (dict, list)) else []
            held[UNSTORABLE.sub(REPLACEMENT, key) if isinstance(key, str) else key] = item
    return box[0]


# --- nothing secret goes upstream -----------------------------------------------------------------
def secret_in(body):
    """(the name of a secret the body carries, in which form), or None. The body is searched as it came, and as its
    JSON reads: its strings' values side by side, then its keys (escapes undone, a value split in two found)."""
    text = body.decode("utf-8", "replace") if isinstance(body, (bytes, bytearray)) else str(body)
    values, keys = strings_in(text)
    texts = [text, "".join(values), "".join(keys)]
    for name, value in secrets():
        for form, encoded in forms(value):
            if any(encoded in haystack for haystack in texts):
                return name, form
    return None


def strings_in(text):
    """([every string value], [every key]) of a JSON text, each in order; none when it is not JSON."""
    try:
        stack, values, keys = [json.loads(text)], [], []
    except ValueError:
        return [], []
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            values.append(value)
        elif isinstance(value, dict):
            keys += value
            stack += reversed(value.values())
        elif isinstance(value, list):
            stack += reversed(value)
    return values, keys


def forms(value):
    """(name, text) of each encoding a prompt could carry a value in: as it is, reversed, percent-, hex- and
    base64-encoded (the part of its base64 that does not depend on what stands beside it, at each alignment)."""
    data = value.encode()
    found = [("as it is", value), ("reversed", value[::-1]), ("percent-encoded", quote(value, safe="")),
             ("hex-encoded", data.hex()), ("hex-encoded", data.hex().upper())]
    for encode in (base64.b64encode, base64.urlsafe_b64encode, base64.b32encode):
        found += [("base64-encoded" if encode is not base64.b32encode else "base32-encoded", core)
                  for core in aligned_cores(encode, data)]
    return [(form, text) for form, text in found if len(text) >= MIN_SECRET]


def aligned_cores(encode, data):
    """The characters of encode(prefix + data) that data alone decides, for each length of prefix the encoding's
    groups can leave before it (base64: 3 bytes to 4 characters; base32: 5 to 8)."""
    group, chars = (5, 8) if encode is base64.b32encode else (3, 4)
    bits = group * 8 // chars  # of the data, in each character
    cores = []
    for offset in range(group):
        encoded = encode(bytes(offset) + data).decode()
        start = -(-offset * 8 // bits)  # the characters holding any bit of the prefix
        end = (offset + len(data)) // group * chars  # a last group the bytes after the value share is left out
        cores.append(encoded[start:end])
    return cores
