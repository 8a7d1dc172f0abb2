"""answers: the seed's contract with the gateway, whatever the backend: the request it may send and the answer it gets.

    request = read_request(data)          # the seed's generateContent body rebuilt from the fields known here, or a
                                          # ValueError saying what it must be
    tokens = estimate_tokens(request)     # every part counted (texts, the schema, the settings): characters / 3
    body = adapt(request, facts, answer)  # what the model accepts, in the answer format asked of the backend
    answer, note = clean_answer(gemini_shaped_answer, body)   # the answer alone, or a ValueError: exactly why not
    answer, refused = drop_unusable(answer, body)   # files that stand in for code, or echo the instructions

The seed speaks Gemini's REST shape to the gateway, whichever server answers: one user turn of text parts, one
candidate, JSON asked for with a schema. The gateway rebuilds, never forwards: it reads the fields it knows, in
camelCase or snake_case (Gemini takes both), sends one spelling, and refuses anything else with the reason,
before a budget is counted; every byte it sends counts toward the budget and is bounded. Each backend is asked
in the answer format that suits it (Gemini: JSON in strict mode; a small local model: plain text with
<file path> blocks, formats.py), and the seed always gets {"tasks", "done", "files"} back as JSON.
"""
import copy
import json
import re

from . import formats
from .formats import FILES_FORMAT, PLACEHOLDER
from ..kinds import TOKEN_FIELDS

# --- settings ---------------------------------------------------------------------------------
CHARS_PER_TOKEN = 3       # budgets are in estimated tokens: characters of all the request's parts / 3
MARGIN = 4 / 3            # such estimates undercount code by up to a third: a prompt, a third larger, must fit
FOLD_TOKENS = 500         # room kept in each budget for the answer instruction folded into a prompt
MAX_OUTPUT = 65_536       # tokens: the largest answer any model of the table gives; a larger ask is clamped
MAX_SCHEMA = 8_000        # characters of an answer schema (the seed's is about 700)
MOST_TOKENS = 10 ** 9  # a count of tokens no one request reaches: beyond it, a server's count is not believed
NUMBER, WHOLE, TEXT, SCHEMA = (int, float), int, str, dict
CONFIG = {"responseMimeType": TEXT, "responseSchema": SCHEMA, "responseJsonSchema": SCHEMA, "temperature": NUMBER,
          "topP": NUMBER, "topK": WHOLE, "maxOutputTokens": WHOLE, "candidateCount": WHOLE, "seed": WHOLE}
MIME_TYPES = ("application/json", "text/plain")
LAZY = re.compile(r"^[ \t]*(?:(?:#|//|/\*|<!--|[\"'])[ \t]*)?(?:(?:\.\.\.|…)[ \t]*(?:(?:#|//)[ \t]*)?(?:[(\[][ \t]*)?"
                  r"(?:existing|rest|remaining|previous|unchanged|same|other|more|original)\b"
                  r"|[(\[]?(?:rest of|remaining)\b.*\b(?:unchanged|as before|the same|omitted)"
                  r"|(?:your|the|more|other) code (?:goes )?here\b)", re.I | re.M)  # within a line, each space run
# taken by one quantifier: linear on any text (with \s* side by side, a few hundred blank lines took minutes)
ANSWER_ONLY = "Answer with only the JSON object, with no Markdown fence and no words before or after it."
SHAPE = ('not a generateContent request: {"systemInstruction": {"parts": [{"text": "..."}]}, "contents": '
         '[{"role": "user", "parts": [{"text": "..."}]}], "generationConfig": {...}}')


# --- the request ----------------------------------------------------------------------------------
def read_request(data):
    """The seed's generateContent body rebuilt from the fields known here (either spelling read, camelCase kept),
    or a ValueError saying what it must look like: strict JSON, text parts that say something, the roles Gemini
    takes, one candidate, a bounded schema, and nothing the gateway would not send on."""
    try:
        raw = json.loads(data, parse_constant=refuse_constant)
    except (ValueError, RecursionError):
        raw = None
    if not isinstance(raw, dict):
        raise ValueError(SHAPE)
    top = known_fields(raw, ("contents", "systemInstruction", "generationConfig"), "")
    if not isinstance(top.get("contents"), list) or not top["contents"]:
        raise ValueError(SHAPE)
    request = {"contents": [content_of(c, "contents[]") for c in top["contents"]]}
    if top.get("systemInstruction") is not None:
        request["systemInstruction"] = content_of(top["systemInstruction"], "systemInstruction")
    if any(c.get("role", "user") not in ("user", "model") for c in request["contents"]):
        raise ValueError('each content\'s role is "user" or "model"')
    if top.get("generationConfig") is not None:
        request["generationConfig"] = config_of(top["generationConfig"])
    return request


def known_fields(value, names, where):
    """The fields of an object by their camelCase names, read in either spelling; a ValueError for any other field,
    or one given in both spellings."""
    if not isinstance(value, dict):
        raise ValueError(SHAPE)
    fields = {}
    for name, field in value.items():
        camel = re.sub(r"_([a-z])", lambda m: m[1].upper(), str(name))
        if camel not in names:
            raise ValueError(f"{where}{name} is not a field the gateway sends on (it takes {', '.join(names)}, in "
                             "camelCase or snake_case)")
        if camel in fields:
            raise ValueError(f"{where}{camel} is given twice (camelCase and snake_case)")
        fields[camel] = field
    return fields


def content_of(value, where):
    """A content as sent on: its role, if any, and its text parts, each of which says something."""
    content = known_fields(value, ("role", "parts"), f"{where}.")
    parts = content.get("parts")
    if not isinstance(parts, list) or not parts:
        raise ValueError(SHAPE)
    rebuilt = {"parts": [part_of(part, where) for part in parts]}
    return {"role": content["role"], **rebuilt} if "role" in content else rebuilt


def part_of(value, where):
    """A text part as sent on (a previous turn's thought kept as one)."""
    odd = sorted(set(value) - {"text", "thought"}) if isinstance(value, dict) else ["a part that is no object"]
    if odd or not isinstance(value.get("text"), str) or not value["text"].strip() or \
            not isinstance(value.get("thought", False), bool):
        what = ", ".join(odd) or "an empty or odd text"
        raise ValueError(f"only text parts that say something are accepted in {where} (not {what}: no inlineData, "
                         "fileData or other parts)")
    return {"text": value["text"], **({"thought": True} if value.get("thought") else {})}


def config_of(value):
    """generationConfig rebuilt: each known setting of the right kind, one candidate, a schema of bounded size."""
    config = known_fields(value, tuple(CONFIG), "generationConfig.")
    for name, field in config.items():
        if not isinstance(field, CONFIG[name]) or isinstance(field, bool):
            raise ValueError(f"generationConfig.{name} must be {kind_name(CONFIG[name])} (was {field!r})"[:300])
    if config.get("candidateCount", 1) != 1:
        raise ValueError(f"candidateCount must be 1 (was {config['candidateCount']!r}): one answer is asked at a time")
    if config.get("responseMimeType", MIME_TYPES[0]) not in MIME_TYPES:
        raise ValueError(f"generationConfig.responseMimeType must be one of {', '.join(MIME_TYPES)}")
    for name in ("responseSchema", "responseJsonSchema"):
        if name in config and len(json.dumps(config[name])) > MAX_SCHEMA:
            raise ValueError(f"generationConfig.{name} is over {MAX_SCHEMA:,} characters: not sent")
    return config


def kind_name(kind):
    return {NUMBER: "a number", WHOLE: "a whole number", TEXT: "text", SCHEMA: "an object"}[kind]


def refuse_constant(name):
    raise ValueError(f"{name} is not JSON a model takes")


def estimate_tokens(body):
    """Every character the request sends (its texts, its settings and schema, as JSON) over CHARS_PER_TOKEN."""
    contents = body["contents"] + [body.get("systemInstruction") or {"parts": []}]
    texts = sum(len(part["text"]) for content in contents for part in content["parts"])
    return (texts + len(json.dumps(body.get("generationConfig") or {}))) // CHARS_PER_TOKEN


def adapt(request, facts, answer="json"):
    """The body for a model, the wire adaptation alone (what the seed asked, never more content, never another
    sampling): what the model accepts, in the answer format asked of its backend ("json": the schema, as strict
    JSON mode or folded into the text; "files": formats.FILES_FORMAT), the rest folded into the text; the output
    limit clamped to the largest a model gives."""
    body = {"contents": copy.deepcopy(request["contents"])}
    config = dict(request.get("generationConfig") or {})
    if isinstance(config.get("maxOutputTokens"), int):
        config["maxOutputTokens"] = max(1, min(config["maxOutputTokens"], MAX_OUTPUT))
    wants_json = config.get("responseMimeType") == "application/json"
    if wants_json and (answer == "files" or not facts["json_mode"]):
        taken = {name: config.pop(name, None) for name in ("responseMimeType", "responseSchema", "responseJsonSchema")}
        schema = taken["responseSchema"] or taken["responseJsonSchema"]
        fold(body["contents"][-1], FILES_FORMAT if answer == "files" else
             ANSWER_ONLY + (f" It follows this schema: {json.dumps(schema)}" if schema else ""), first=False)
    system = request.get("systemInstruction")
    texts = [part["text"] for part in (system or {}).get("parts", [])]
    if system and not facts["system_instruction"]:
        fold(body["contents"][0], "\n\n".join(texts), first=True)
    elif system:
        body["systemInstruction"] = system
    if config:
        body["generationConfig"] = config
    return body


def fold(content, text, first):
    """Put text before the first text part of a content, or after its last one."""
    parts = [part for part in content["parts"] if isinstance(part.get("text"), str)]
    if not parts:
        content["parts"].insert(0 if first else len(content["parts"]), {"text": text})
    elif first:
        parts[0]["text"] = f"{text}\n\n{parts[0]['text']}"
    else:
        parts[-1]["text"] = f"{parts[-1]['text']}\n\n{text}"


# --- the answer -----------------------------------------------------------------------------------
def clean_answer(body, sent):
    """(the answer, a note on what could not be kept, or ""), or a ValueError saying exactly why the answer is
    unusable: the parser's own error and where. `sent` is the body as it went upstream: its answer format is the
    one read first, and text it holds (the rules' example, a file of the codebase) is never taken for the answer."""
    feedback = body.get("promptFeedback")
    if isinstance(feedback, dict) and feedback.get("blockReason"):
        raise ValueError(f"prompt blocked ({feedback['blockReason']})")
    candidates = body.get("candidates")
    candidate = candidates[0] if isinstance(candidates, list) and candidates and isinstance(candidates[0], dict) else {}
    text, finish = answer_text(candidate), candidate.get("finishReason")
    if not text.strip():
        raise ValueError(f"empty answer (finishReason {finish})")
    prompt, files_asked = request_text(sent), FILES_FORMAT in request_text(sent)
    asked, other = [formats.read_files, lambda t: formats.read_json(t, prompt)][::1 if files_asked else -1]
    try:
        answer, broken = asked(text)
    except ValueError as why:
        answer, broken = read_otherwise(other, text), ""
        if answer is None:
            raise ValueError(f"{why}{cut_off(finish, text)}") from None
    if not answer["files"]:  # a model may answer in the format it was not asked for
        answer = read_otherwise(other, text) or answer
    if not answer["files"] and finish not in ("STOP", None):
        raise ValueError(f"no file came whole{cut_off(finish, text)}")
    if finish not in ("STOP", None) and answer["files"]:  # what broke is the cut's doing
        broken = f"cut off ({finish}: {STOPPED.get(finish, 'the server ended it')})"
    return answer, f"{broken}: kept the {len(answer['files'])} file(s) that came whole" if broken else ""


def read_otherwise(reader, text):
    """The answer with files in the format that was not asked for, or None."""
    try:
        answer = reader(text)[0]
    except ValueError:
        return None
    return answer if answer["files"] else None


def cut_off(finish, text):
    """What an answer's end says, when it did not end as asked: its finish reason, length and cause."""
    return "" if finish == "STOP" else \
        f" (finishReason {finish}, {len(text):,} characters: {STOPPED.get(finish, 'the server ended it')})"


STOPPED = {"MAX_TOKENS": "the answer was cut off at its token limit",  # why an answer ended before its end, in words
           "REPETITION": "the keeper stopped it as it repeated itself (a short piece over and over, or a block twice)",
           "RUN_ENDED": "the keeper stopped it as its run ended (Ctrl+C, or the seed's time: --timeout)"}


def request_text(body):
    """Every text the request sent, joined."""
    contents = body["contents"] + [body.get("systemInstruction") or {"parts": []}]
    return "\n".join(part["text"] for content in contents for part in content["parts"])


def answer_text(candidate):
    """The candidate's text, without thought parts."""
    content = candidate.get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    return "".join(part["text"] for part in parts if isinstance(part, dict) and not part.get("thought")
                   and isinstance(part.get("text"), str)) if isinstance(parts, list) else ""


def drop_unusable(answer, sent):
    """The answer without the files that cannot be the model's work (empty, lazy placeholders, the instructions'
    example or the prompt's own text sent back), and a line for each file dropped."""
    kept, refused, rules, beside = [], [], instructions(sent), beside_the_code(request_text(sent))
    for item in answer["files"]:
        if why := unusable_file(item, rules, beside):
            refused.append(f"{item['path']}: {why}")
        else:
            kept.append(item)
    return {**answer, "files": kept}, refused


def unusable_file(item, rules, beside=""):
    """Why a file of an answer cannot be the model's work, or None. `beside`: the prompt's text but its code."""
    path, content = item["path"], item["content"]
    if not content.strip():
        return "empty"
    if lazy := LAZY.search(content):
        line = content[lazy.start():].lstrip("\n").split("\n", 1)[0].strip()
        return f"lazy: {line[:60]!r} stands in for code it would drop"
    if path == PLACEHOLDER or "." not in path.rsplit("/", 1)[-1] and re.search(rf"\b{re.escape(path)}\b", rules):
        return "the instructions' example path, not a file of the codebase"
    if len(content.strip()) >= 8 and content.strip() in rules:
        return "the instructions' own text, sent back"
    if len(content.strip()) >= 60 and "\n" in content.strip() and content.strip() in beside:
        return "an echo of its prompt (its goal, tasks or log), not a file of the codebase"
    return None


def beside_the_code(prompt):
    """The prompt's text but the codebase's files it shows (the goal, the tasks, the log, what the seed wrote around
    them): a file of an answer that is only some of it is an echo, never work; code moved from a file it was shown
    can be (a function taken out into a module of its own)."""
    kept, at = [], 0
    for tag in formats.FILE_TAG.finditer(prompt):
        if tag.start() < at:
            continue
        kept.append(prompt[at:tag.start()])
        end = prompt.find(formats.CLOSE_TAG, tag.end())
        at = len(prompt) if end < 0 else end + len(formats.CLOSE_TAG)
    return "".join(kept) + prompt[at:]


def instructions(body):
    """The request's instructions (its system instruction and the answer format folded into it), not the prompt."""
    system = "\n".join(part["text"] for part in (body.get("systemInstruction") or {"parts": []})["parts"])
    return "\n".join([system] + ([FILES_FORMAT] if FILES_FORMAT in request_text(body) else []))


def describe_answer(answer, refused):
    """What an answer held, for a "no change": its tasks and its files, and what was dropped."""
    dropped = f"; dropped: {'; '.join(refused)}" if refused else ""
    return f"{len(answer['tasks'])} task(s) and {len(answer['files']) + len(refused)} file(s){dropped}"


def answer_body(answer, body, model):
    """The clean answer in Gemini's shape: one text part holding the JSON object alone."""
    usage = body.get("usageMetadata") if isinstance(body.get("usageMetadata"), dict) else {}
    return {"candidates": [{"content": {"role": "model", "parts": [{"text": json.dumps(answer, ensure_ascii=False)}]},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": usage, "modelVersion": body.get("modelVersion") or model}


def read_usage(body):
    """{"prompt", "output", "thinking"} tokens of an answer; a field missing or odd (not a count one request could
    take: negative, or a billion and more) counts 0."""
    usage = body.get("usageMetadata") if isinstance(body.get("usageMetadata"), dict) else {}
    return {name: usage[field] if isinstance(usage.get(field), int) and 0 <= usage[field] < MOST_TOKENS else 0
            for name, field in TOKEN_FIELDS.items()}
