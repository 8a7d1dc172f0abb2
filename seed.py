"""seed: one iteration of a codebase that grows itself. Started by fallback.py; rewritten by the model.

Reads the goal, open tasks, end of the log, the keeper's facts on the last answer rolled back and the
codebase, in the prompt budget; asks the model once, through the keeper's gateway, for three tasks and the
whole files that do them; writes them atomically, refusing unsafe paths; compile-checks them, putting all back
if one fails; records what it did in .seed/record.json. Exit 0 when done, 75 with no answer for now, 78 when
not started by the keeper; anything else is a crash, rolled back. Whoever rewrites it keeps these rules."""
import json, os, re, sys  # noqa: E401 (the standard library only: the keeper's gateway is reached over HTTP)
from pathlib import Path
from urllib.request import HTTPError, Request, urlopen

ROOT = Path(__file__).resolve().parent
API_BASE = os.environ.get("GEMINI_API_BASE", "").rstrip("/")  # the keeper's gateway on loopback
TOKEN = os.environ.get("GEMINI_API_KEY", "")                  # this run's token: the gateway holds the key
MODEL = os.environ.get("GEMINI_MODEL", "gemini-3.5-flash")    # the model the keeper chose for this run
BUDGET = int(os.environ.get("SEED_PROMPT_TOKENS", 30_000)) * 3  # characters the whole request may take
WAIT = max(10.0, float(os.environ.get("SEED_TIMEOUT", 900)) - 10)  # seconds to wait for the answer
RECORD, FACTS = ROOT / ".seed" / "record.json", ".seed/rolled_back.json"  # what it did; the keeper's facts
MAX_TASKS, LOG_TAIL, MAX_FILE = 20, min(4_000, BUDGET // 8), 1_000_000  # open tasks; log characters; a file
KEEPER = os.environ.get("SEED_KEEPER", "fallback.py supervisor/ goal.md pending_tasks.md").casefold().split()
RULES = """You grow the codebase below toward the goal: plan three small tasks (open tasks first), do them by
writing whole files (every line, most important first), and say which open tasks, by number, your answer
finishes. Write only the codebase's files and new ones, not the keeper's (code, goal, tasks, log, docs) nor
names starting with ".". After each iteration every .py must compile, every top-level module import without
side effects (no key, no network), and plain pytest (no ini) pass over tests/ (add tests/test_*.py; a test's
new files go to a temp folder), with no fewer passing than before; a failing change is rolled back and becomes
a task. Shadow no standard or installed module (json.py). seed.py asks you (the goal's code goes elsewhere):
improve it if you keep its docstring's rules, at most 150 lines not blank, none over 110 characters."""
TEXT, ARRAY = {"type": "STRING"}, lambda items: {"type": "ARRAY", "items": items}
FILE = {"type": "OBJECT", "required": ["path", "content"], "properties": {"path": TEXT, "content": TEXT}}
SCHEMA = {"type": "OBJECT", "required": ["tasks", "files"],
          "properties": {"tasks": ARRAY(TEXT), "files": ARRAY(FILE), "done": ARRAY({"type": "INTEGER"})}}
UNSEEN = []  # seed.py when the prompt could not show it: never rewritten blind


class Stop(Exception):  # ends the run early: an exit code and one line saying why
    pass


def read(name):
    return (ROOT / name).read_text("utf-8", "replace").strip() if (ROOT / name).is_file() else ""


def open_tasks():
    """The unchecked `- [ ]` items of pending_tasks.md, each with its indented detail lines."""
    text = read("pending_tasks.md")
    found = re.findall(r"^[ \t]*[-*] \[ \] (.*)((?:\n  +(?![-*] \[ \] )\S.*)*)", text, re.M)
    return [(task.strip() + re.sub(r"\n +", "\n   ", more))[:2_000] for task, more in found][:MAX_TASKS]


def kept_by_keeper(rel):
    rel = rel.casefold()
    return "/." in f"/{rel}" or any(rel == k or k[-1] == "/" and rel.startswith(k) for k in KEEPER)


def codebase():
    """Every file the model may see and write, relative to ROOT (not a link: it may point anywhere)."""
    for folder, dirs, files in os.walk(ROOT):
        prefix = (Path(folder).relative_to(ROOT).as_posix() + "/").removeprefix("./")
        dirs[:] = sorted(d for d in dirs if not kept_by_keeper(f"{prefix}{d}/"))
        yield from (prefix + name for name in sorted(files)
                    if not kept_by_keeper(prefix + name) and not os.path.islink(os.path.join(folder, name)))


def mending(facts, room):
    """The last answer rolled back, why, its files whole (those the failure names first), in `room`."""
    told, shown = "".join(f"> {line}\n" for line in facts.get("lines") or []), ""
    for file in sorted(facts.get("files") or [], key=lambda f: f["path"] not in told):
        block = f'<file path="{file["path"]}">\n{file["content"]}\n</file>\n'
        shown += block if len(told) + len(shown) + len(block) + 200 <= room else ""
    return (f"# Your last answer, rolled back: {facts.get('why')}\n{told}Its files, as you wrote them: mend "
            f"them where the failure shows, and send every one again.\n{shown}\n") if shown else ""


def build_prompt(tasks, facts):
    """Goal, tasks, log, the answer to mend; then seed.py, the files they name, the smallest, as room lets."""
    listed = "\n".join(f"{n}. {t}" for n, t in enumerate(tasks, 1))
    goal, log = re.sub(r"\A#+ *Goal *\n", "", read("goal.md")), read("iteration_log.md")[-LOG_TAIL:]
    prompt = f"# Goal\n{goal}\n\n# Open tasks\n{listed}\n\n# End of the log\n{log}\n\n"
    prompt += mending(facts, BUDGET // 3) + "# Codebase\n"
    paths = sorted(codebase(), key=lambda r: (r != "seed.py", r not in prompt, os.path.getsize(ROOT / r)))
    left_out, room = [], BUDGET - len(RULES) - len(prompt) - 500
    for rel in paths:
        data = (ROOT / rel).read_bytes()[:MAX_FILE + 1]
        text = f'<file path="{rel}">\n{data.decode("utf-8", "replace")}\n</file>\n'
        if len(text) <= room and b"\0" not in data and len(data) <= MAX_FILE:
            prompt, room = prompt + text, room - len(text)
        else:
            left_out.append(rel)
    named = [rel for rel in left_out if rel != "seed.py" or UNSEEN.append(rel)]  # its name lures small models
    listing = "\n".join(f"{rel} ({(ROOT / rel).stat().st_size:,} bytes)" for rel in named)[:max(room, 0)]
    return prompt + (f"\n# Not shown ({len(named)}, too big or binary)\n{listing}" if named else "")


def ask(prompt, again):
    """The answer's JSON object, or Stop(75) when none for now; a small model that repeats is asked warmer."""
    print(f"asking {MODEL} (prompt ~{(len(prompt) + len(RULES)) // 3:,} tokens)", flush=True)
    warmth = {} if MODEL.startswith("gemini") else {"temperature": (0.2, 0.5, 0.8, 1.0)[min(again, 3)]}
    body = {"systemInstruction": {"parts": [{"text": RULES}]},
            "contents": [{"role": "user", "parts": [{"text": prompt}]}],
            "generationConfig": {"responseMimeType": "application/json", "responseSchema": SCHEMA, **warmth}}
    try:
        with urlopen(Request(f"{API_BASE}/v1beta/models/{MODEL}:generateContent", json.dumps(body).encode(),
                             {"x-goog-api-key": TOKEN}), timeout=WAIT) as reply:
            data = reply.read()
        if type(got := json.loads(json.loads(data)["candidates"][0]["content"]["parts"][0]["text"])) is dict:
            return got
    except HTTPError as error:  # the gateway's refusal: its body says why
        data = error.read()
    except OSError as error:
        raise Stop(75, f"no answer from the gateway ({type(error).__name__})") from None
    except (ValueError, KeyError, IndexError, TypeError):
        pass
    raise Stop(75, data[:300].decode("utf-8", "replace"))


def refusal(path, content):
    """Why this file may not be written, or None."""
    if not isinstance(path, str) or not isinstance(content, str) or not path or path[0] == "/" \
            or "\\" in path or re.search(r"[\x00-\x1f\x7f]|^[A-Za-z]:", path):
        return "not a plain relative path and a text"
    target = (ROOT / path).resolve()
    if not target.is_relative_to(ROOT):
        return "leaves the workspace"
    if target.is_dir() or kept_by_keeper(rel := target.relative_to(ROOT).as_posix()) or rel in UNSEEN:
        return "not shown in the prompt: it would be rewritten blind" if rel in UNSEEN else "protected"
    if "\0" in content or len(content.encode("utf-8", "replace")) > MAX_FILE:
        return "binary or too large"


def write_atomically(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.with_name(f".{path.name}.tmp").write_bytes(data)
    os.replace(path.with_name(f".{path.name}.tmp"), path)


def apply(answer, tasks, record):
    """Write the safe files; if a .py among them does not compile, put every one back and say why."""
    writes = {}
    for item in [f if isinstance(f, dict) else {} for f in answer.get("files") or []]:
        if why := refusal(item.get("path"), item.get("content")):
            record["refused"].append(f"{item.get('path')}: {why}")
        else:
            writes[(ROOT / item["path"]).resolve()] = item["content"].encode("utf-8", "replace")
    before = {path: path.read_bytes() if path.exists() else None for path in writes}
    [write_atomically(path, data) for path, data in writes.items()]
    for path in [path for path in writes if path.suffix == ".py"]:
        try:
            compile(writes[path], path.relative_to(ROOT).as_posix(), "exec")
        except (SyntaxError, ValueError) as error:
            for old_path, old in before.items():  # the whole answer goes back, byte for byte
                old_path.unlink() if old is None else write_atomically(old_path, old)
            raise Stop(0, f"compile error: {error}") from None
    done = sorted({n for n in answer.get("done") or [] if isinstance(n, int) and 1 <= n <= len(tasks)})
    changed = [path.relative_to(ROOT).as_posix() for path in writes if before[path] != writes[path]]
    record.update(outcome="applied", files=changed, done=[tasks[n - 1].splitlines()[0] for n in done],
                  reason="" if changed or not writes else f"its {len(writes)} file(s) are as they were")


def main():
    record, code = {"outcome": "started", "tasks": [], "done": [], "files": [], "refused": []}, 0
    try:
        if not API_BASE or not TOKEN:
            raise Stop(78, "GEMINI_API_BASE and GEMINI_API_KEY are not set: run  python fallback.py")
        facts = json.loads(read(FACTS) or "{}")  # the keeper's, valid JSON; or no file
        answer = ask(build_prompt(tasks := open_tasks(), facts), facts.get("again", 0))
        record["tasks"] = [str(task) for task in answer.get("tasks") or []][:10]
        apply(answer, tasks, record)
    except Stop as stop:  # its code, and why
        record.update(outcome="rejected" if (code := stop.args[0]) == 0 else "stopped", reason=stop.args[1])
    write_atomically(RECORD, json.dumps(record, indent=1).encode())
    print(f"seed: {record['outcome']}:", record.get("reason") or ", ".join(record["files"]) or "no files")
    return code


if __name__ == "__main__":
    sys.exit(main())
