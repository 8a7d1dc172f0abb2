"""answers: the seed's contract with the gateway, whatever the backend: the request it may send and the answer it gets.

    request = read_request(data)          # the seed's generateContent body, or a ValueError saying what it must be
    tokens = estimate_tokens(request)     # every part counted: characters / 3
    body = adapt(request, facts)          # what the model accepts; the rest folded into the text
    answer, salvaged = clean_answer(gemini_shaped_answer)   # the JSON object alone, or a ValueError: why not
    answer, refused = drop_lazy(answer)   # files whose text stands in for code, dropped and named

The seed speaks Gemini's REST shape to the gateway, whichever server answers: one user turn of text parts,
one candidate, JSON asked for with a schema. Anything else (candidateCount above 1, images or other parts
that are not text, an output limit above the model's) is refused or clamped here, before a budget is counted.
An answer comes back as {"tasks", "done", "files"}: found behind a fence or prose, thought parts dropped,
the whole files of an answer cut off (MAX_TOKENS) salvaged, lazy files ("# ... rest unchanged") removed.
"""
import copy
import json
import re

# --- settings ---------------------------------------------------------------------------------
CHARS_PER_TOKEN = 3       # budgets are in estimated tokens: characters of all the request's parts / 3
MARGIN = 4 / 3            # such estimates undercount code by up to a third: a prompt, a third larger, must fit
FOLD_TOKENS = 500         # room kept in each budget for the answer instruction folded into a prompt
MAX_OUTPUT = 65_536       # tokens: the largest answer any model of the table gives; a larger ask is clamped
TOKEN_FIELDS = {"prompt": "promptTokenCount", "output": "candidatesTokenCount", "thinking": "thoughtsTokenCount"}
MOST_TOKENS = 10 ** 9  # a count of tokens no one request reaches: beyond it, a server's count is not believed
LAZY = re.compile(r"^\s*(#|//|/\*|<!--)\s*((\.\.\.|…)\s*[(\[]?\s*"
                  r"(existing|rest|remaining|previous|unchanged|same|other)"
                  r"|[(\[]?(rest of|remaining)\b.*\b(unchanged|as before|the same|omitted))", re.I | re.M)
ANSWER_ONLY = "Answer with only the JSON object, with no Markdown fence and no words before or after it."
SHAPE = ('not a generateContent request: {"systemInstruction": {"parts": [{"text": "..."}]}, "contents": '
         '[{"role": "user", "parts": [{"text": "..."}]}], "generationConfig": {...}}')


# --- the request ----------------------------------------------------------------------------------
def read_request(data):
    """The seed's generateContent body, or a ValueError saying what it must look like. Only what can be sent as it
    is: strict JSON (no NaN, nothing nested past reason), text parts that say something, the roles Gemini takes,
    and numbers where numbers go."""
    try:
        request = json.loads(data, parse_constant=refuse_constant)
    except (ValueError, RecursionError):
        request = None
    system, config = (request.get(name) if isinstance(request, dict) else None
                      for name in ("systemInstruction", "generationConfig"))
    if not isinstance(request, dict) or not isinstance(request.get("contents"), list) or not request["contents"] \
            or not all(map(is_content, request["contents"])) or (system is not None and not is_content(system)) \
            or not isinstance(config or {}, dict):
        raise ValueError(SHAPE)
    contents = request["contents"] + ([system] if system else [])
    if any(set(part) - {"text", "thought"} or not isinstance(part.get("text"), str) or not part["text"].strip()
           for content in contents for part in content["parts"]) or not all(content["parts"] for content in contents):
        raise ValueError("only text parts that say something are accepted (no inlineData, fileData, other or empty "
                         "parts)")
    if any(content.get("role", "user") not in ("user", "model") for content in request["contents"]):
        raise ValueError('each content\'s role is "user" or "model"')
    count = (config or {}).get("candidateCount", 1)
    if type(count) is not int or count != 1:
        raise ValueError(f"candidateCount must be 1 (was {count!r}): one answer is asked at a time")
    for name in ("maxOutputTokens", "topK", "seed"):
        if name in (config or {}) and type(config[name]) is not int:
            raise ValueError(f"generationConfig.{name} must be a whole number (was {config[name]!r})")
    return request


def refuse_constant(name):
    raise ValueError(f"{name} is not JSON a model takes")


def is_content(value):
    return isinstance(value, dict) and isinstance(value.get("parts"), list) and \
        all(isinstance(part, dict) for part in value["parts"])


def estimate_tokens(body):
    """Characters of every part of a request (text, and any other part as its JSON), over CHARS_PER_TOKEN."""
    contents = body["contents"] + [body.get("systemInstruction") or {"parts": []}]
    return sum(len(part["text"]) if isinstance(part.get("text"), str) else len(json.dumps(part))
               for content in contents for part in content["parts"]) // CHARS_PER_TOKEN


def adapt(request, facts):
    """The body for a model: what it accepts, the rest folded into the text; never a thinking setting; the output
    limit clamped to the largest a model gives."""
    body = {"contents": copy.deepcopy(request["contents"])}
    config = dict(request.get("generationConfig") or {})
    config.pop("thinkingConfig", None)
    if isinstance(config.get("maxOutputTokens"), int):
        config["maxOutputTokens"] = max(1, min(config["maxOutputTokens"], MAX_OUTPUT))
    if not facts["json_mode"] and config.get("responseMimeType") == "application/json":
        taken = {name: config.pop(name, None) for name in ("responseMimeType", "responseSchema", "responseJsonSchema")}
        schema = taken["responseSchema"] or taken["responseJsonSchema"]
        fold(body["contents"][-1], ANSWER_ONLY + (f" It follows this schema: {json.dumps(schema)}" if schema else ""),
             first=False)
    system = request.get("systemInstruction")
    texts = [part["text"] for part in (system or {}).get("parts", []) if isinstance(part.get("text"), str)]
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
def clean_answer(body):
    """(the answer, a line on what was salvaged or ""), or a ValueError saying why the answer is unusable."""
    feedback = body.get("promptFeedback")
    if isinstance(feedback, dict) and feedback.get("blockReason"):
        raise ValueError(f"prompt blocked ({feedback['blockReason']})")
    candidates = body.get("candidates")
    candidate = candidates[0] if isinstance(candidates, list) and candidates and isinstance(candidates[0], dict) else {}
    text, finish = answer_text(candidate), candidate.get("finishReason")
    if finish == "STOP" and (answer := find_answer(text)):
        return answer, ""
    if finish == "MAX_TOKENS" and (answer := salvage(text)):
        return answer, f"cut off (MAX_TOKENS): kept the {len(answer['files'])} file(s) that came whole"
    raise ValueError(f"answer cut off, empty or not the JSON asked for (finishReason {finish}, {len(text):,} "
                   f"characters: {text[:80]!r})")


def answer_text(candidate):
    """The candidate's text, without thought parts."""
    content = candidate.get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    return "".join(part["text"] for part in parts if isinstance(part, dict) and not part.get("thought")
                   and isinstance(part.get("text"), str)) if isinstance(parts, list) else ""


def find_answer(text):
    """The answer object wherever it starts in the text: behind a Markdown fence, a space or prose."""
    decoder = json.JSONDecoder()
    for start in re.finditer(r'\{\s*"(?:tasks|done|files)"', text):
        try:
            value, _ = decoder.raw_decode(text, start.start())
        except ValueError:
            continue
        if answer := as_answer(value):
            return answer
    return None


def as_answer(value):
    """The answer in the schema asked for (tasks as text, done as numbers, files with a path and a text), or None."""
    if not isinstance(value, dict) or not isinstance(value.get("tasks"), list) \
            or not isinstance(value.get("files"), list):
        return None
    if not all(isinstance(item, dict) and isinstance(item.get("path"), str) and isinstance(item.get("content"), str)
               for item in value["files"]):
        return None
    done = value.get("done") if isinstance(value.get("done"), list) else []
    return {"tasks": [str(task) for task in value["tasks"]],
            "done": [n for n in done if isinstance(n, int) and not isinstance(n, bool)],
            "files": [{"path": item["path"], "content": item["content"]} for item in value["files"]]}


def salvage(text):
    """The tasks and the whole files at the start of an answer cut off, or None when no file came whole."""
    decoder, found = json.JSONDecoder(), {"tasks": [], "files": []}
    for name in found:
        match = re.search(rf'"{name}"\s*:\s*\[', text)
        position = match.end() if match else len(text)
        while position < len(text):
            position = re.compile(r"[\s,]*").match(text, position).end()
            try:
                item, position = decoder.raw_decode(text, position)
            except ValueError:
                break
            found[name].append(item)
    found["files"] = [item for item in found["files"] if isinstance(item, dict)
                      and isinstance(item.get("path"), str) and isinstance(item.get("content"), str)]
    return as_answer(found) if found["files"] else None


def drop_lazy(answer):
    """The answer without files whose text stands in for code, and a line for each file dropped."""
    kept, refused = [], []
    for item in answer["files"]:
        if not item["content"].strip():
            refused.append(f"{item['path']}: empty")
        elif LAZY.search(item["content"]):
            refused.append(f"{item['path']}: lazy: its text stands in for code it would drop")
        else:
            kept.append(item)
    return {**answer, "files": kept}, refused


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
