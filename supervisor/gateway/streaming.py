"""streaming: a chat completion read as the server streams it, so that a runaway answer is stopped early.

    read = reader(over)              # fetch_bounded(..., read=read): the completion assembled in OpenAI's shape
    chat.update(STREAM)              # what a request adds to be streamed (with usage at its end, where served)

Reading the events as they come lets the keeper stop an answer that repeats itself (a model writing "\t" to
its token limit: 381 s; or sending one file block back again and again: 927 s), or whose run has ended (Ctrl+C, the seed gone at its own time limit, --timeout): the
connection is closed, and llama-cpp-python, which goes on generating an abandoned request that is not streamed,
stops at its next token. The answer so far comes back with finish_reason "repetition" or "run_ended", and the
whole files in it are salvaged. An answer is never stopped for being slow: on a loaded 2-core machine the 1.5B
read a long prompt for minutes before its first token, and a fixed 600 s cut honest answers a few hundred
characters in; its token limit (the server's) and the seed's time bound it. A server that answers with a plain
JSON body (it does not stream) is read whole.
"""
import json
import re

from .outcomes import MAX_ANSWER, TooLarge, read_whole

STREAM = {"stream": True, "stream_options": {"include_usage": True}}
CHECK_EVERY = 32          # events between two looks at the text so far
REPEATS = 800             # characters at the end of an answer that, one short piece over and over, are a runaway
PIECE = 60                # the longest such piece
RUNAWAY = re.compile(rf"(.{{1,{PIECE}}}?)\1+.{{0,{PIECE}}}", re.S)
BLOCK = (300, 2_000)      # a longer piece, at least and at most, whose second copy in a row is a runaway too: the
# 1.5B sent one file block back 4 to 20 times in an answer, to its token limit (927 s), which pieces of 60 missed
KEPT = 2 * BLOCK[1]       # characters of an answer's end kept for a look


def reader(over):
    """A read function for fetch_bounded: a streamed completion assembled, stopped when `over` is set or at a
    runaway repetition; a plain JSON body read whole."""
    def read(response):
        if "text/event-stream" not in response.headers.get("Content-Type", ""):
            return read_whole(response)
        completion = assemble(response, lambda text: why_stop(text, over))
        return json.dumps(completion).encode() if completion else b""  # no event: it failed before a token
    return read


def assemble(response, stop):
    """The completion the events make, in OpenAI's non-streamed shape, cut short when stop(its last KEPT characters)
    gives a reason; None when no event came."""
    pieces, finish, usage, model, size, seen, tail = [], None, None, None, 0, False, ""
    for n, line in enumerate(response.iter_lines()):
        size += len(line)
        if size > MAX_ANSWER:
            raise TooLarge(f"an answer over {MAX_ANSWER // 2 ** 20} MB")
        event = event_of(line)
        choice = (event.get("choices") or [{}])[0] if isinstance(event.get("choices"), list) else {}
        seen = seen or bool(event)
        delta = choice.get("delta") if isinstance(choice, dict) and isinstance(choice.get("delta"), dict) else {}
        if isinstance(delta.get("content"), str) and delta["content"]:
            pieces.append(delta["content"])
            tail = (tail + delta["content"])[-KEPT:]  # what a look needs: never the whole answer joined again
        finish = (choice.get("finish_reason") if isinstance(choice, dict) else None) or finish
        usage, model = event.get("usage") or usage, event.get("model") or model
        if finish is None and n % CHECK_EVERY == 0 and (why := stop(tail)):
            finish = why
            break
    if not seen:
        return None
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": "".join(pieces)},
                         "finish_reason": finish}], "model": model,
            "usage": usage if isinstance(usage, dict) else {"completion_tokens": len(pieces)}}


def event_of(line):
    """The JSON object of one `data:` line of the stream ({} for anything else, [DONE] included)."""
    if not line.startswith(b"data:"):
        return {}
    try:
        event = json.loads(line[5:])
    except (ValueError, RecursionError):
        return {}
    return event if isinstance(event, dict) else {}


def why_stop(text, over):
    """Why to stop reading an answer now (`text`: its end), or None."""
    if over is not None and over.is_set():
        return "run_ended"
    tail = text[-REPEATS:]
    if len(tail) == REPEATS and RUNAWAY.fullmatch(tail):
        return "repetition"
    if any(text[-2 * size:-size] == text[-size:] for size in range(BLOCK[0], min(BLOCK[1], len(text) // 2) + 1)):
        return "repetition"  # a block of hundreds of characters, twice in a row: sent again, not written
    return None
