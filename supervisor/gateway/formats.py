"""formats: the two shapes an answer may come in, and how each is read back into {"tasks", "done", "files"}.

    answer, note = read_json(text, prompt)    # JSON as the seed's schema has it (Gemini's strict mode)
    answer, note = read_files(text)           # plain text: "- task" lines, "Done: 1, 2", <file path="..."> blocks
    FILES_FORMAT                              # the words that ask a model for the plain-text shape

Either returns the answer and "" when it came whole, the answer and what broke when only some of it could be kept
(every complete, well-formed file is salvaged from an answer that is otherwise broken, wherever it broke), or
raises a ValueError whose message is the parser's own error and where. Small models write code in JSON
strings badly (invalid escapes, raw newlines, triple-quoted strings: measured with bench/real_model.py); the
plain-text shape needs no escaping, and the prompt already shows files in it.

Every pattern here runs in linear time on any text (no two quantifiers side by side that could take the same
characters, none that reaches past a line where a line is meant), fences are found in one pass over the lines,
and the JSON decodings tried from each opening together read at most READS times the answer's length: an answer
is untrusted, and a few hundred blank lines once froze the keeper.
"""
import json
import re
from collections import namedtuple

MAX_TASKS = 10
PLACEHOLDER = "path/of/the/file.py"  # FILES_FORMAT's example path: an answer's file there never lands
FILES_FORMAT = f"""# Answer format
Answer in plain text, not JSON, in this shape: your three tasks, the numbers of the open tasks this answer
finishes (or none), then every file you write, whole, as the codebase above shows files:
- first task
- second task
- third task
Done: 1
<file path="{PLACEHOLDER}">
the complete new text of the file, as it is (no escaping, no Markdown fence)
</file>
A test file imports what it tests from the module that defines it, and imports every module it uses."""
FILE_TAG = re.compile(r"""<file\s+path\s*=\s*["']([^"'\n<>]{1,500})["']\s*>""")
CLOSE_TAG = "</file>"
PATH_WORD = re.compile(r"(?<![\w/.-])((?:[\w-]+/)*[\w-][\w.-]*\.[A-Za-z0-9]{1,8})(?![\w/-])")
TASK_LINE = re.compile(r"^[^\S\n]*(?:[-*•]|\d{1,2}[.)])[^\S\n]+(\S.*)", re.M)  # its text, line-end spaces kept
DONE_LINE = re.compile(r"^[^\w\n]*done[^\w\n]*?:(.*)", re.I | re.M)
JSON_OPENING = re.compile(r'\{\s*"(?:tasks|done|files)"')
FILE_OBJECT = re.compile(r'\{\s*"path"\s*:')
READS = 4  # times an answer's length that the JSON decodings tried from all its openings may read together
Fence = namedtuple("Fence", "start content before")  # a fenced block: where, its text, the last line before it


def read_json(text, prompt=""):
    """The answer object in the text (behind a fence or prose; never one the prompt itself holds), with the whole
    files of a broken one salvaged; a ValueError with the parser's error and where."""
    error, odd, echoed = None, None, False
    for start, value, end in decodings(text, JSON_OPENING):
        if end is None:
            error = error or value
            continue
        if prompt and text[start:end] in prompt:
            echoed = True  # the rules' example, or a file of the codebase, sent back
            continue
        if answer := as_answer(value):
            return answer, ""
        odd = odd or start
    found = salvage_json(text, prompt)
    problem = f"not valid JSON: {describe(error, text)}" if error else \
        f"JSON, but no list of tasks and list of files of {{path, content}} in it ({where(text, odd)})" \
        if odd is not None else "the example from the instructions, sent back" if echoed else \
        f"no JSON object with \"tasks\" and \"files\" in it (it begins {text.strip()[:60]!r})"
    if found:
        return found, problem
    raise ValueError(problem)


def decodings(text, opening):
    """(start, value, end) of the JSON value decoded at each place `opening` finds, or (start, the JSONDecodeError,
    None) where none decodes; stopped once they have read READS times the text's length together (openings nested
    in an answer that never closes would each read to its end, and each error counts its line from the start: the
    answer's length squared)."""
    decoder, left = json.JSONDecoder(), READS * len(text)
    for start in (match.start() for match in opening.finditer(text)):
        if left < 0:
            return
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError as why:
            left -= why.pos + 1  # its line and column were counted from the text's start
            yield start, why, None
            continue
        except RecursionError:  # nested deeper than Python's parser goes: the answer's fault, said as such
            left -= len(text)
            yield start, json.JSONDecodeError("nested deeper than can be read", text, start), None
            continue
        left -= end - start
        yield start, value, end


def where(text, position):
    """A place in the text as its line and column, and the text there."""
    line = text.count("\n", 0, position) + 1
    return f"line {line} column {position - text.rfind(chr(10), 0, position)}, near {text[position:position + 50]!r}"


def describe(error, text):
    """A JSON error as its message, line and column, and the text around it."""
    near = text[max(0, error.pos - 25):error.pos + 25]
    return f"{error.msg} at line {error.lineno} column {error.colno}, near {near!r}"


def salvage_json(text, prompt):
    """The tasks and every {path, content} object that decodes whole, wherever the answer breaks; None if none."""
    decoder, files, tasks = json.JSONDecoder(), {}, []
    for start, item, end in decodings(text, FILE_OBJECT):
        if end is not None and isinstance(item, dict) and isinstance(item.get("path"), str) and \
                isinstance(item.get("content"), str) and not (prompt and text[start:end] in prompt):
            files.setdefault(item["path"], item["content"])
    match = re.search(r'"tasks"\s*:\s*(?=\[)', text)
    try:
        tasks = decoder.raw_decode(text, match.end())[0] if match else []
    except (ValueError, RecursionError):
        pass
    files = [{"path": path, "content": content} for path, content in files.items()]
    return as_answer({"tasks": tasks if isinstance(tasks, list) else [], "files": files}) if files else None


def as_answer(value):
    """The answer in the schema asked for (tasks as text, done as numbers, files with a path and a text), or None."""
    if not isinstance(value, dict) or not isinstance(value.get("tasks"), list) \
            or not isinstance(value.get("files"), list):
        return None
    if not all(isinstance(item, dict) and isinstance(item.get("path"), str) and isinstance(item.get("content"), str)
               for item in value["files"]):
        return None
    done = value.get("done") if isinstance(value.get("done"), list) else []
    return {"tasks": [str(task) for task in value["tasks"]][:MAX_TASKS],
            "done": [n for n in done if isinstance(n, int) and not isinstance(n, bool)],
            "files": [{"path": item["path"], "content": item["content"]} for item in value["files"]]}


# --- plain text with file blocks ----------------------------------------------------------------------
def read_files(text):
    """The tasks, done numbers and files of a plain-text answer: <file path="..."> blocks, else a path followed by
    a fenced block (the shape many models fall into); a ValueError saying what the text lacks."""
    files, broken = file_blocks(text)
    blocks = fences(text)
    files = files or ([] if broken else fenced_files(blocks))
    head = text[:min([m.start() for m in FILE_TAG.finditer(text)] + [fence.start for fence in blocks] + [len(text)])]
    done_line = DONE_LINE.search(head)
    tasks = [m.group(1).rstrip() for m in TASK_LINE.finditer(head) if not DONE_LINE.match(m.group(0)) and
             re.search(r"\w", m.group(1))]
    answer = {"tasks": tasks[:MAX_TASKS], "files": files,
              "done": [int(n) for n in re.findall(r"\d+", done_line.group(1))][:50] if done_line else []}
    if broken and not files:
        raise ValueError(f"no file came whole: {'; '.join(broken)}")
    if files or tasks:
        return answer, "; ".join(broken)
    raise ValueError(f'no <file path="..."> block and no "- " task line (it begins {text.strip()[:60]!r})')


def file_blocks(text):
    """([{path, content}] of the blocks closed by </file> (or by their fence alone), [what was wrong with each])."""
    files, broken, by_fence, tags = [], [], [], list(FILE_TAG.finditer(text))
    line, counted = 1, 0
    for n, tag in enumerate(tags):
        following = tags[n + 1].start() if n + 1 < len(tags) else len(text)
        end = text.find(CLOSE_TAG, tag.end(), following)
        path, line, counted = tag.group(1).strip(), line + text.count("\n", counted, tag.start()), tag.start()
        if end >= 0:
            files.append({"path": path, "content": unwrap(text[tag.end():end], fenced=not path.endswith(".md"))})
        elif fenced := whole_fence(text[tag.end():following], strict=path.endswith(".md")):
            files.append({"path": path, "content": fenced})  # a small model's habit: the fence closed, not the tag
            by_fence.append(path)
        else:
            broken.append(f"the block of {path} (line {line}) has no {CLOSE_TAG}")
    if by_fence:
        broken.append(f"{len(by_fence)} block(s) ended with a Markdown fence, not {CLOSE_TAG} ({', '.join(by_fence)}): "
                      "the fenced text was taken")
    return files, broken


def whole_fence(block, strict):
    """The text of a block that is one fenced block (opened on its first line, closed by its last bare fence, with
    only words after it, or, `strict`, nothing), or None."""
    opened = re.match(r"[ \t]*\n?```[^\n`]*\n", block)
    closes = list(re.finditer(r"^```[ \t]*$", block, re.M))
    if not opened or not closes or closes[-1].start() < opened.end() or strict and block[closes[-1].end():].strip():
        return None
    content = block[opened.end():closes[-1].start()]
    return content if content.strip() else None


def fences(text):
    """[Fence] of each fenced block, found in one pass over the lines: a line that opens with ``` (and no other
    backtick) and ends with a line break, to the next line that is ``` alone (spaces after it may follow); `before`,
    the last line before it that says something."""
    found, opened, before, start = [], None, "", 0
    for line in text.split("\n"):
        end = start + len(line)
        if opened and line.startswith("```") and not line[3:].strip(" \t"):
            found.append(Fence(opened[0], text[opened[1]:start], opened[2]))
            opened = None
        elif not opened and line.startswith("```") and "`" not in line[3:] and end < len(text):
            opened = (start, end + 1, before)
        before, start = line if line.strip() else before, end + 1
    return found


def fenced_files(blocks):
    """Files written as a line naming the path, then a fenced block: [{path, content}]."""
    files = []
    for fence in blocks:
        paths = PATH_WORD.findall(re.sub(r"[`*]", " ", fence.before))
        if paths:
            files.append({"path": paths[0], "content": fence.content})  # "app.py in the same folder as seed.py"
    return files


def unwrap(content, fenced=True):
    """A block's text as the file's: the line breaks around it dropped, and a Markdown fence around it (or only
    its opening line, as small models leave it) removed, unless the file is Markdown itself."""
    content = re.sub(r"\n[-*] ?\Z", "\n", content)  # "- </file>": a model that began every line with "- "
    content = content.removeprefix("\n").removesuffix("\n")
    if fenced and re.match(r"\s*```[^\n`]*\n", content):
        content = re.sub(r"\n?```\s*\Z", "", re.sub(r"\A\s*```[^\n`]*\n", "", content))
    return content + "\n" if content else content
