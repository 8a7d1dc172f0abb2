"""Benchmark: a free day, scaled: how many of the free tier's daily requests become landed changes.
Prints figures; asserts nothing.

    python bench/freeday.py                                # scale 500: 5 requests; about 4 minutes on 2 cores
    python bench/freeday.py --scale 100 --timeout 1500     # 21 requests; about 20 minutes (Gemma: one a minute)
    python bench/freeday.py --scale 10 --timeout 12000     # the issue's 202 requests; about 3 hours
    python bench/freeday.py --gate-runs 3                  # fewer timings of the gate

A fake Gemini on loopback (supervisor/tests/fake_gemini.py's server) plays the free tier of late 2026 for a Flash, a
Flash-Lite and a Gemma 4 model as the real API enforces it: requests a day (divided by --scale, at least one);
requests and input tokens a minute (a sliding minute of real time: minutes are not scaled; input tokens counted
at 3 characters each, as code tokenizes); a request over the model's tokens a minute answered with the recorded
429 every time, whatever its retryDelay says; a spent day answered with the recorded per-day 429 and its lying
38 s retryDelay; a thinking budget refused by Gemma with its recorded 400. A request refused with a 429 counts
against nothing; any other counts against the minute and the day. Every request within the limits gets a good
scripted answer adding a small module and its passing test, so every answer could land: Gemma's as JSON in a
Markdown fence after a space and a line of prose, with a thought part; the others' as clean JSON with a
thoughtSignature.

The day: `python fallback.py --delay 0` in a temporary workspace with about 100 KB of grown code (40 modules
with their tests, and a log), GEMINI_MODEL set to the three models and GEMINI_LIMITS to the scaled days only
(`model=//RPD`: the minute figures are the keeper's own), until the keeper says it waits with every model's
day spent (for midnight Pacific): then Ctrl+C, as a person would. It is stopped sooner by --timeout, or when
its last 30 iterations neither asked the model nor waited. Per model: requests available, used (received by
the fake), answered, landed (the log's landed iterations); the waste by reason (the fake's verdict on each
request it received; answers thrown away, with the ledger's reasons), cross-checked with the ledger
(the record's requests) and the log; the iterations a real day implies, as landed x scale, and as what 24 hours
hold at the pace seen (Gemma's 16,000 tokens a minute take about one full prompt a minute).
Also: the genesis prompt (one iteration in a fresh clone's workspace: seed.py and the starter goal) and the
seed's share of it (characters of seed.py in the request the fake received over all the characters of its
system instruction and prompt), and the same for the day's prompts; the output an answer rewriting seed.py
whole costs; the gate's time with and without a seed change: --gate-runs iterations of `python fallback.py`
for each, in a small workspace, with the keeper's gate.gate wrapped in a timer (the gate's own work in a real
iteration: the compile check, and the child that imports the modules and runs pytest).
"""
import argparse
import contextlib
import json
import math
import os
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from string import Template

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "supervisor" / "tests"))
import fake_gemini as api  # noqa: E402  (the tests' fake server, reused)

# --- settings ---------------------------------------------------------------------------------------------
FREE_TIER = {  # requests a minute, input tokens a minute, requests a day: late 2026 (perishable)
    "gemini-3.5-flash": (5, 250_000, 20),
    "gemini-3.5-flash-lite": (15, 250_000, 500),
    "gemma-4-26b-a4b-it": (15, 16_000, 1_500),
}
MODELS = list(FREE_TIER)  # GEMINI_MODEL, in this order
FENCED = {"gemma-4-26b-a4b-it"}  # answers fenced JSON after a space and prose, and accepts no thinking budget
CHARS_PER_TOKEN = 3       # how the fake counts input tokens (code tokenizes denser than prose's 4)
UNLIMITED = (1_000, 10_000_000, 100_000)  # the genesis and gate runs: no limit in the way
GROWN = 40                # modules (each with its test) in the day's workspace: about 100 KB
SCALE, TIMEOUT, GATE_RUNS = 500, 480, 7  # defaults of --scale, --timeout (seconds) and --gate-runs
STALL = 30                # iterations in a row that ask nothing and wait for nothing: the day is stopped
GATE_TARGET, SHARE_TARGET, LANDED_TARGET = 1.5, 0.25, 0.95  # the targets
KEY = "AQ.Ab8RN6bench-not-a-real-key-0123456789"
KEEPER_FILES = ["seed.py", "fallback.py", "goal.md", "supervisor/tests/conftest.py",
                "supervisor/tests/fake_gemini.py",
                *(p.relative_to(REPO).as_posix() for p in sorted((REPO / "supervisor").rglob("*.py"))
                  if "tests" not in p.relative_to(REPO).parts)]
MINUTE, DAY_SECONDS = 60.0, 86_400
COLUMNS = [("available", 10), ("used", 6), ("answered", 9), ("landed", 7), ("wasted", 7), ("landed/avail", 13),
           ("s/request", 10), ("x scale", 9), ("in 24 h", 9)]  # the day's table
QUOTAS = {  # a 429's quotaId and metric, as recorded
    "rpd": ("GenerateRequestsPerDayPerProjectPerModel-FreeTier", "generate_content_free_tier_requests"),
    "rpm": ("GenerateRequestsPerMinutePerProjectPerModel-FreeTier", "generate_content_free_tier_requests"),
    "tpm": ("GenerateContentInputTokensPerModelPerMinute-FreeTier", "generate_content_free_tier_input_token_count"),
}
RATE_LIMITS = "https://ai.google.dev/gemini-api/docs/rate-limits"  # named in every 429
LYING_DELAYS = {"rpd": 38.90923309, "tpm": 14.389133285}  # a spent day's and a too-big request's retryDelay
TOPICS = ("archive backup calendar colors config digest drafts due export filters folders formats history hooks "
          "importer index labels links locks markdown merge migrate paging pins priority query ranking recent "
          "render reminders search sessions sharing sort stats summary sync tags templates trash").split()
GROWN_CODE = Template('''"""$name: the $topic of the note keeper, parsed, checked and shown."""
import json
import re

DEFAULTS = {"limit": $limit, "separator": ", ", "pattern": r"[a-z0-9_-]+"}


def parse(text):
    """The $topic entries of a text, one a line, without blanks and comments."""
    entries = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            entries.append(line)
    return entries


def valid(entry):
    """Whether an entry is a well-formed $topic name."""
    return bool(re.fullmatch(DEFAULTS["pattern"], entry))


def shown(entries, separator=DEFAULTS["separator"]):
    """The valid entries as one line, at most the limit of them."""
    kept = [entry for entry in entries if valid(entry)]
    return separator.join(kept[:DEFAULTS["limit"]])


def load(path):
    """The $topic saved in a JSON file, or none when it is missing or unreadable."""
    try:
        with open(path, encoding="utf-8") as file:
            value = json.load(file)
    except (OSError, ValueError):
        return []
    return [str(item) for item in value] if isinstance(value, list) else []


def save(path, entries):
    """Write the $topic to a JSON file, whole."""
    with open(path, "w", encoding="utf-8") as file:
        json.dump(sorted(set(entries)), file, indent=1)


def merged(first, second):
    """Both lists of entries, once each, in the order first seen."""
    return list(dict.fromkeys([*first, *second]))


def counts(entries):
    """How often each entry occurs, most frequent first."""
    found = {}
    for entry in entries:
        found[entry] = found.get(entry, 0) + 1
    return dict(sorted(found.items(), key=lambda item: (-item[1], item[0])))


def renamed(entries, old, new):
    """The entries with one renamed in its place; the same when it is not there."""
    return [new if entry == old else entry for entry in entries]


def grouped(entries):
    """The entries grouped by their first letter, each group sorted."""
    groups = {}
    for entry in entries:
        groups.setdefault(entry[:1], []).append(entry)
    return {letter: sorted(group) for letter, group in sorted(groups.items())}
''')  # a module the model might have grown: $name, $topic and $limit vary
GROWN_TEST = Template('''from $name import counts, merged, parse, shown, valid


def test_parse_skips_blanks_and_comments():
    assert parse("a\\n\\n# note\\nb  # why\\n") == ["a", "b"]


def test_shown_keeps_valid_entries():
    assert shown(["ok", "Not OK", "fine"]) == "ok, fine" and not valid("x y")


def test_merged_and_counts():
    assert merged(["a", "b"], ["b", "c"]) == ["a", "b", "c"]
    assert counts(["b", "a", "b"]) == {"b": 2, "a": 1}
''')
GROWN_LOG = Template("""
## Iteration $n — 2026-11-20 10:00:00 UTC — landed: 2 file(s) changed

- Tasks:
  1. Add notes_$topic
- Files: notes_$topic.py (new) +71 −0, tests/test_notes_$topic.py (new) +14 −0
- Model: gemini-3.5-flash-lite, 1 request(s), tokens 31,000 prompt + 900 output + 400 thinking; 4.1 s
""")
GATE_TIMER = """import runpy, sys, time
sys.argv[0] = "fallback.py"
keeper = runpy.run_path("fallback.py")
gate = sys.modules["supervisor.confined.gate"]
def timed(*args, untimed=gate.gate):
    started = time.perf_counter()
    try:
        return untimed(*args)
    finally:
        print(f"bench: the gate took {time.perf_counter() - started:.3f} s", flush=True)
gate.gate = timed
sys.exit(keeper["main"]())
"""  # `python fallback.py ARGS` with the keeper's own gate.gate timed in place


class FreeDay(api.FakeGemini):
    """The free tier's rules per model, enforced; a good scripted answer to every request within them; a verdict
    on each request received."""

    def __init__(self, limits, script):
        super().__init__()
        self.limits, self.script = limits, script  # model -> (rpm, tpm, rpd); n -> [(path, text)] of answer n
        self.lock, self.day, self.minute, self.seen = threading.Lock(), Counter(), defaultdict(list), []

    def next_reply(self, request):
        model, body, now = request["model"], request["body"], time.monotonic()
        tokens = count_tokens(body)
        with self.lock:
            verdict, reply = self.over_limit(model, tokens, now) or self.admit(model, body, tokens, now)
            retry = re.search(r"retry in ([\d.]+)s", reply.get("error", {}).get("message", ""))
            self.seen.append({"model": model, "tokens": tokens, "verdict": verdict, "at": now, "body": body,
                              "retry in": float(retry.group(1)) if retry else None})
        return (reply["error"]["code"] if "error" in reply else 200), reply, 0.0, None, False

    def over_limit(self, model, tokens, now):
        """(verdict, 429 body) for a request the model's day or minute does not take, else None."""
        rpm, tpm, rpd = self.limits[model]
        window = self.minute[model] = [(t, n) for t, n in self.minute[model] if now - t < MINUTE]
        frees_in = window[0][0] + MINUTE - now if window else 0.0
        if self.day[model] >= rpd:
            return "to a spent model", quota_429(model, "rpd", rpd, LYING_DELAYS["rpd"])
        if tokens > tpm:
            return "too big for its minute", quota_429(model, "tpm", tpm, LYING_DELAYS["tpm"])
        if len(window) >= rpm:
            return "over requests a minute", quota_429(model, "rpm", rpm, frees_in)
        if sum(n for _, n in window) + tokens > tpm:
            return "over tokens a minute", quota_429(model, "tpm", tpm, frees_in)
        return None

    def admit(self, model, body, tokens, now):
        """Count the request against the minute and the day, then refuse its feature or answer it."""
        self.minute[model].append((now, tokens))
        self.day[model] += 1
        if model in FENCED and "thinkingBudget" in json.dumps(body.get("generationConfig") or {}):
            return "refused for a feature", api.error(400, "INVALID_ARGUMENT",
                                                      "Thinking budget is not supported for this model.")
        answered = sum(seen["verdict"] == "answered" for seen in self.seen)
        return "answered", answer(model, self.script(answered + 1), tokens)


# --- the fake's bodies ----------------------------------------------------------------------------------------
def count_tokens(body):
    """Input tokens as the fake counts them: all the text of the system instruction and contents."""
    return text_chars(body) // CHARS_PER_TOKEN


def text_chars(body):
    contents = body["contents"] + [body.get("systemInstruction") or {"parts": []}]
    return sum(len(part.get("text", "")) for content in contents for part in content["parts"])


def quota_429(model, scope, limit, delay):
    """A free-tier 429 in the recorded shape: the limit in the message and in QuotaFailure, and a RetryInfo."""
    quota_id, metric = QUOTAS[scope]
    name = model.removesuffix("-it")  # as recorded: "model: gemma-4-31b" for gemma-4-31b-it
    message = ("You exceeded your current quota, please check your plan and billing details. For more information "
               f"on this error, head to: {RATE_LIMITS}. To monitor your current usage, head to: https://ai.dev/rate-"
               f"limit. \n* Quota exceeded for metric: generativelanguage.googleapis.com/{metric}, limit: {limit}, "
               f"model: {name}\nPlease retry in {delay:.9f}s.")
    return api.error(429, "RESOURCE_EXHAUSTED", message, [
        {"@type": "type.googleapis.com/google.rpc.Help", "links": [{
            "description": "Learn more about Gemini API quotas", "url": RATE_LIMITS}]},
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{
            "quotaMetric": f"generativelanguage.googleapis.com/{metric}", "quotaId": quota_id,
            "quotaDimensions": {"location": "global", "model": name}, "quotaValue": str(limit)}]},
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{int(delay)}s"}])


def answer(model, files, prompt_tokens):
    """A good answer in the model's shape: Gemma's fenced after a space and prose, with a thought part; the others'
    clean JSON with a thoughtSignature."""
    payload = json.dumps({"tasks": [f"Add {files[0][0]}", "Test it", "Keep the log tidy"], "done": [],
                          "files": [{"path": path, "content": text} for path, text in files]}, indent=1)
    if model in FENCED:
        reply = api.text_answer(f" Here is the JSON you asked for:\n```json\n{payload}\n```", model=model)
    else:
        reply = api.text_answer(payload, model=model)
        del reply["candidates"][0]["content"]["parts"][0]  # no thought part: the JSON, with its thoughtSignature
    reply["usageMetadata"] = api.usage(prompt=prompt_tokens, output=len(payload) // 4, thinking=400)
    return reply


# --- the scripted answers and the workspaces ---------------------------------------------------------------------
def new_module(n):
    """Answer n of the day: a small module and its passing test."""
    name = f"tally_{n:04d}"
    code = (f'"""{name}: how often each word occurs in the notes (step {n})."""\n\n\n'
            f"def count_words(notes):\n    counts = {{}}\n    for note in notes:\n        for word in note.lower()"
            f".split():\n            counts[word] = counts.get(word, 0) + 1\n    return counts\n")
    test = (f"from {name} import count_words\n\n\ndef test_words_are_counted_across_notes():\n"
            f"    assert count_words(['A b', 'b']) == {{'a': 1, 'b': 2}}\n")
    return [(f"{name}.py", code), (f"tests/test_{name}.py", test)]


def changed_notes(n):
    """Answer n of the gate runs without a seed change: notes.py and its test, changed."""
    code = (f'"""notes: the notes, newest first (version {n})."""\n\n\ndef newest_first(notes):\n'
            f"    return sorted(notes, key=lambda note: note['at'], reverse=True)[:{n + 10}]\n")
    test = ("from notes import newest_first\n\n\ndef test_newest_first_and_at_most_the_limit():\n"
            "    assert newest_first([{'at': 1}, {'at': 2}]) == [{'at': 2}, {'at': 1}]\n"
            f"    assert len(newest_first([{{'at': t}} for t in range(99)])) == {n + 10}\n")
    return [("notes.py", code), ("tests/test_notes.py", test)]


def changed_seed(n):
    """Answer n of the gate runs with a seed change: seed.py, one comment changed."""
    return [("seed.py", (REPO / "seed.py").read_text() + f"# rewrite {n}\n")]


def grown_module(n, topic):
    """Grown module n of the day's workspace (about 2.5 KB) and its test."""
    name = f"notes_{topic}"
    return [(f"{name}.py", GROWN_CODE.substitute(name=name, topic=topic, limit=n + 5)),
            (f"tests/test_{name}.py", GROWN_TEST.substitute(name=name))]


def make_workspace(files=()):
    """A temporary workspace: the keeper's files, `files` ([(path, text)]), and a .env with a fake key."""
    root = Path(tempfile.mkdtemp(prefix="seed-freeday-")) / "workspace"
    for rel in KEEPER_FILES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, root / rel)
    (root / "pending_tasks.md").write_text("# Pending tasks\n\n")  # as a first start makes them (a clone has none)
    (root / "iteration_log.md").write_text("# Iteration log\n")
    for rel, text in files:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / ".env").write_text(f"GEMINI_API_KEY={KEY}\n")
    return root


def grow(root):
    """The day's workspace: GROWN modules with their tests, and the log of the iterations that wrote them."""
    for n, topic in enumerate(TOPICS[:GROWN], 1):
        for rel, text in grown_module(n, topic):
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
    with (root / "iteration_log.md").open("a") as log:
        log.write("".join(GROWN_LOG.substitute(n=n, topic=topic) for n, topic in enumerate(TOPICS[:GROWN], 1)))


def codebase_bytes(root):
    return sum(p.stat().st_size for p in root.rglob("*.py") if p.relative_to(root).parts[0] != "supervisor"
               and p.name not in ("fallback.py", "conftest.py", "fake_gemini.py"))


# --- running the keeper ---------------------------------------------------------------------------------------
def keeper_env(fake, limits):
    """The environment for fallback.py: the fake's address, the models, and GEMINI_LIMITS (its key is in .env)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "SEED_", "OPENAI_"))}
    return {**env, "GEMINI_API_BASE": fake.url, "GEMINI_MODEL": ",".join(limits),
            "GEMINI_LIMITS": limits_setting(limits)}


def limits_setting(limits):
    """GEMINI_LIMITS for the keeper: the day only when the minute is the free tier's, else all three figures."""
    return ",".join(f"{model}=//{rpd}" if (rpm, tpm) == FREE_TIER[model][:2] else f"{model}={rpm}/{tpm}/{rpd}"
                    for model, (rpm, tpm, rpd) in limits.items())


def run_keeper(root, env, *args):
    """`python fallback.py --delay 0 ARGS` with the keeper's gate timed; its output."""
    done = subprocess.run([sys.executable, "-c", GATE_TIMER, "--delay", "0", *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=900)
    return done.stdout + done.stderr


def run_until_spent(root, env, timeout):
    """Run the keeper until it waits with every model's day spent, or goes nowhere, or `timeout` passes; then
    Ctrl+C it. Its output lines, and how the day ended."""
    keeper = subprocess.Popen([sys.executable, "fallback.py", "--delay", "0"], cwd=root, env=env, text=True,
                              encoding="utf-8", errors="replace", stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    ending = {"how": f"stopped by --timeout after {timeout:.0f} s: the keeper had not said every day was spent",
              "over": False}
    deadline = threading.Timer(timeout, interrupt, [keeper])
    deadline.daemon = True
    deadline.start()
    lines = watch(keeper, ending)
    deadline.cancel()
    keeper.wait()
    return lines, ending["how"]


def watch(keeper, ending):
    """The keeper's output lines, read as they come; Ctrl+C for it as soon as its day is over."""
    lines = []
    for line in keeper.stdout:
        lines.append(line.rstrip("\n"))
        why = None if ending["over"] else day_over(lines)
        if why:
            ending.update(how=why, over=True)
            interrupt(keeper)
    return lines


def day_over(lines):
    """Why the keeper's day is over after its latest line, or None."""
    if "waiting until" in lines[-1] and all(f"{model}: daily quota spent" in lines[-1] for model in MODELS):
        return "every model's day spent: the keeper said it waits (for midnight Pacific); Ctrl+C"
    if re.match(r"\S+ #\d+ ", lines[-1]) and asked_nothing(lines):
        return f"stopped: the keeper's last {STALL} iterations neither asked the model nor waited; Ctrl+C"
    return None


def asked_nothing(lines):
    """Whether the keeper's last STALL iterations neither asked the model nor waited: a loop going nowhere."""
    last = [line for line in lines if re.match(r"\S+ #\d+ ", line)][-STALL:]
    return len(last) == STALL and all(", 0 request(s)," in line and " waiting until" not in line for line in last)


def interrupt(keeper):
    """Ctrl+C for the keeper (this process only, as a person would); SIGKILL if it still runs a minute later."""
    if keeper.poll() is None:
        keeper.send_signal(signal.SIGINT)
        killer = threading.Timer(60, lambda: keeper.poll() is None and keeper.kill())
        killer.daemon = True
        killer.start()


def new_log(root, before):
    """(outcome, model, seconds) of each iteration the log gained after its first `before` characters."""
    text = (root / "iteration_log.md").read_text()[before:]
    found = []
    for section in re.split(r"^## Iteration \d+ — [^—\n]+ — ", text, flags=re.M)[1:]:
        model = re.search(r"^- Model: (\S+), \d+ request\(s\).*; ([\d.]+) s$", section, re.M)
        found.append((section.splitlines()[0], model.group(1) if model else "none",
                      float(model.group(2)) if model else 0.0))
    return found


def read_ledger(root):
    """The ledger's counts per model (the record's requests), summed over the Pacific days the run spanned."""
    totals = defaultdict(lambda: {"requests": 0, "kinds": Counter(), "wasted": Counter()})
    path = root / "backups" / "record.sqlite"
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) if path.exists() else \
            contextlib.nullcontext() as db:
        for model, kind, wasted, count in db.execute("SELECT model, kind, wasted, count(*) FROM requests GROUP BY "
                                                     "model, kind, wasted") if db else ():
            totals[model]["requests"] += count
            totals[model]["kinds"][kind] += count
            if wasted:
                totals[model]["wasted"][wasted] += count
    return totals


# --- the measurements -------------------------------------------------------------------------------------------
def scaled_limits(scale):
    return {model: (rpm, tpm, math.ceil(rpd / scale)) for model, (rpm, tpm, rpd) in FREE_TIER.items()}


def spend_the_day(scale, timeout):
    """The scaled free day on the 100 KB workspace: what the fake saw, the ledger, the log, how it ended."""
    root = make_workspace()
    grow(root)
    limits, size, log_before = scaled_limits(scale), codebase_bytes(root), len((root / "iteration_log.md").read_text())
    fake = FreeDay(limits, new_module)
    started = time.monotonic()
    lines, ending = run_until_spent(root, keeper_env(fake, limits), timeout)
    fake.close()
    return {"root": root, "limits": limits, "size": size, "seen": fake.seen, "ledger": read_ledger(root),
            "log": new_log(root, log_before), "ending": ending, "lines": lines,
            "minutes": (time.monotonic() - started) / 60, "seed": (root / "seed.py").read_text()}


def measure_genesis():
    """One iteration in a fresh clone's workspace (seed.py and the starter goal): the figures of the request the
    fake received, or the keeper's output when it received none."""
    root = make_workspace()
    fake = FreeDay({MODELS[0]: UNLIMITED}, new_module)
    output = run_keeper(root, keeper_env(fake, {MODELS[0]: UNLIMITED}), "--iterations", "1")
    fake.close()
    shutil.rmtree(root.parent)
    return prompt_figures(fake.seen[0]["body"], (REPO / "seed.py").read_text()) if fake.seen else {"output": output}


def prompt_figures(body, seed):
    """Characters and tokens (the fake's count) of a request's text, and the share of them seed.py's text is."""
    chars, prompt = text_chars(body), "".join(part.get("text", "") for c in body["contents"] for part in c["parts"])
    shown = len(seed) if seed in prompt else 0
    return {"chars": chars, "system": chars - len(prompt), "tokens": count_tokens(body), "seed": shown,
            "share": shown / chars}


def time_gate(runs, script):
    """--gate-runs iterations in a small workspace (seed.py, notes.py, their tests and the seed's contract) whose
    answers `script` writes: the gate's seconds, each iteration's seconds, and the outcomes."""
    root = make_workspace([("supervisor/tests/test_seed.py", (REPO / "supervisor/tests/test_seed.py").read_text()), *changed_notes(0)])
    fake, load = FreeDay({MODELS[0]: UNLIMITED}, script), os.getloadavg()[0]
    output = run_keeper(root, keeper_env(fake, {MODELS[0]: UNLIMITED}), "--iterations", str(runs))
    fake.close()
    log = new_log(root, 0)
    shutil.rmtree(root.parent)
    return {"gate": [float(s) for s in re.findall(r"bench: the gate took ([\d.]+) s", output)], "load": load,
            "iterations": [seconds for _, _, seconds in log], "outcomes": Counter(o.split(":")[0] for o, _, _ in log)}


# --- the figures -------------------------------------------------------------------------------------------------
def tally(day):
    """Per model: available, used, answered, landed, waste by reason, the cross-checks, the implied real day."""
    rows = {}
    for model in MODELS:
        seen = [s for s in day["seen"] if s["model"] == model]
        verdicts, ledger = Counter(s["verdict"] for s in seen), day["ledger"][model]
        landed = sum(outcome.startswith("landed") for outcome, m, _ in day["log"] if m == model)
        upstream = Counter({kind: n for kind, n in ledger["kinds"].items() if kind != "answer"})
        rows[model] = {"available": day["limits"][model][2], "used": len(seen), "answered": verdicts["answered"],
                       "landed": landed, "waste": verdicts - Counter(answered=verdicts["answered"]),
                       "thrown": verdicts["answered"] - landed, "thrown why": ledger["wasted"] - upstream,
                       "ledger": ledger, "tokens": [s["tokens"] for s in seen],
                       "early": [f"{s['retry in']:.3f}" for s in seen if s["verdict"].startswith("over")],
                       "seconds": seconds_each(model, seen),
                       "outcomes": Counter(o.split(":")[0] for o, m, _ in day["log"] if m == model)}
    fill_real_day(rows)
    return rows


def seconds_each(model, seen):
    """Seconds a request of the model took: the mean gap between its requests, at least what its minute allows
    at the prompts the fake counted; None when it got none."""
    if not seen:
        return None
    gap = (seen[-1]["at"] - seen[0]["at"]) / (len(seen) - 1) if len(seen) > 1 else 0.0
    rpm, tpm, _ = FREE_TIER[model]
    return max(gap, MINUTE / rpm, MINUTE * statistics.mean(s["tokens"] for s in seen) / tpm)


def fill_real_day(rows):
    """Landed changes a real day implies, two ways: landed x scale (landed / available x the real quota); and in
    24 hours, each model in GEMINI_MODEL's order taking its scaled-up requests as far as the seconds left allow."""
    left = DAY_SECONDS
    for model, row in rows.items():
        real = FREE_TIER[model][2] / row["available"]  # real requests for each scaled one
        row["x scale"] = int(row["landed"] * real)
        requests = min(row["used"] * real, left / row["seconds"]) if row["used"] else 0
        row["in 24 h"] = int(requests * row["landed"] / row["used"]) if row["used"] else 0
        left -= requests * (row["seconds"] or 0)


def show_header(args):
    limits = scaled_limits(args.scale)
    print(f"python {sys.version.split()[0]} on {os.uname().sysname} {os.uname().machine}, {os.cpu_count()} cores "
          f"(load average {os.getloadavg()[0]:.1f}); scale {args.scale}: "
          + ", ".join(f"{m} {FREE_TIER[m][2]:,} -> {limits[m][2]:,} a day" for m in MODELS))
    print("per minute (not scaled): " + ", ".join(f"{m} {rpm} requests, {tpm:,} input tokens"
                                                 for m, (rpm, tpm, _) in FREE_TIER.items())
          + f"; the fake counts a token per {CHARS_PER_TOKEN} characters\n")


def show_genesis(genesis):
    if "output" in genesis:
        print("genesis prompt: the fake received no request; the keeper said:\n  "
              + "\n  ".join(genesis["output"].splitlines()[-10:]))
        return
    print(f"genesis prompt (a fresh clone: seed.py and the starter goal): {genesis['chars']:,} characters "
          f"({genesis['system']:,} of them the system instruction), {genesis['tokens']:,} tokens; seed.py "
          f"{genesis['seed']:,} characters = {genesis['share']:.0%} of it (target < {SHARE_TARGET:.0%}: "
          f"{verdict(genesis['share'] < SHARE_TARGET)})")


def show_rewrite_cost():
    seed = (REPO / "seed.py").read_text()
    payload = json.dumps({"tasks": ["a", "b", "c"], "done": [], "files": [{"path": "seed.py", "content": seed}]})
    print(f"an answer rewriting seed.py whole: {len(payload):,} characters of JSON ({len(seed):,} of seed.py, "
          f"{sum(1 for line in seed.splitlines() if line.strip())} non-blank lines) = {len(payload) // 4:,} output "
          f"tokens at 4 characters a token, {len(payload) // 3:,} at 3")


def show_gate(without, with_seed):
    for label, runs in (("without a seed change (notes.py and its test)", without),
                        ("with a seed change (seed.py: the seed's contract runs too)", with_seed)):
        times = ", ".join(f"{seconds:.2f}" for seconds in runs["gate"])
        gate = f"median {statistics.median(runs['gate']):.2f} s ({times})" if runs["gate"] else "never ran"
        iteration = f"{statistics.median(runs['iterations']):.1f} s" if runs["iterations"] else "-"
        print(f"gate {label}: {gate}; whole iteration median {iteration}; {counted(runs['outcomes'])} "
              f"(load average {runs['load']:.1f} before)")
    if without["gate"]:
        median = statistics.median(without["gate"])
        print(f"  target: the gate's median without a seed change <= {GATE_TARGET} s: {verdict(median <= GATE_TARGET)}")


def show_day(day, rows, scale):
    print(f"\nthe day: {day['ending']}; {day['minutes']:.1f} min; {day['size'] / 1000:.0f} KB of code at the start")
    print(f"{'model':<24}" + "".join(f"{name:>{width}}" for name, width in COLUMNS))
    for model, row in rows.items():
        show_row(model, {**row, "wasted": sum(row["waste"].values()) + row["thrown"]})
    total = {name: sum(row[name] for row in rows.values()) for name in ("available", "used", "answered", "landed",
                                                                         "thrown", "x scale", "in 24 h")}
    total["wasted"] = sum(sum(row["waste"].values()) for row in rows.values()) + total["thrown"]
    show_row("all", {**total, "seconds": None})
    print(f"  iterations a real day implies (of the real quotas' {sum(t[2] for t in FREE_TIER.values()):,} requests): "
          f"x scale = landed / available x the real quota (scale {scale}); in 24 h = the same as far as 86,400 s hold "
          "at s/request (the mean gap between the model's requests, at least what its minute allows at the prompts "
          "seen), the models taken in GEMINI_MODEL's order")
    return total


def show_row(name, row):
    cells = {**row, "landed/avail": f"{row['landed'] / row['available']:.0%}",
             "s/request": f"{row['seconds']:.1f}" if row["seconds"] else "-"}
    print(f"{name:<24}" + "".join(f"{cells[column]:>{width},}" if isinstance(cells[column], int) else
                                  f"{cells[column]:>{width}}" for column, width in COLUMNS))


def show_waste(rows):
    print("\nwasted requests, by reason (the fake's verdict on what it received; answers thrown away: answered "
          "but not landed, with the ledger's reasons):")
    for model, row in rows.items():
        reasons = [f"{why} {n}" + (f" (the minute freed {', '.join(row['early'])} s later)" if "minute" in why else "")
                   for why, n in row["waste"].items()]
        if row["thrown"]:
            reasons.append(f"answer thrown away {row['thrown']} ({counted(row['thrown why'])})")
        print(f"  {model}: " + (", ".join(reasons) or "none"))


def show_cross_checks(day, rows):
    print("\ncross-checks (the fake / the ledger, the record's requests / the log):")
    for model, row in rows.items():
        ledger = row["ledger"]
        print(f"  {model}: requests {row['used']} / {ledger['requests']}{mismatch(row['used'], ledger['requests'])}; "
              f"answers {row['answered']} / {ledger['kinds']['answer']}"
              f"{mismatch(row['answered'], ledger['kinds']['answer'])}; the ledger's kinds: "
              f"{counted(ledger['kinds'])}, wasted: {counted(ledger['wasted'])}; the log: {counted(row['outcomes'])}")
    asked_none = Counter(outcome.split(":")[0] for outcome, model, _ in day["log"] if model == "none")
    print(f"  iterations that asked no model (the log): {counted(asked_none)}")


def show_day_prompts(day, rows):
    print(f"\nthe day's prompts ({day['size'] / 1000:.0f} KB workspace), as the fake counted them:")
    for model, row in rows.items():
        bodies = [s["body"] for s in day["seen"] if s["model"] == model]
        shares = [prompt_figures(body, day["seed"])["share"] for body in bodies]
        print(f"  {model}: " + (f"{statistics.mean(row['tokens']):,.0f} tokens on average, {max(row['tokens']):,} "
                                f"at most (limit {FREE_TIER[model][1]:,} a minute); seed.py "
                                f"{statistics.mean(shares):.0%} of it" if bodies else "no request"))


def show_targets(rows, total):
    spent = sum(row["waste"]["to a spent model"] for row in rows.values())
    big = sum(row["waste"]["too big for its minute"] for row in rows.values())
    share = total["landed"] / total["available"]
    print(f"\ntargets: landed / available {total['landed']}/{total['available']} = {share:.0%} (>= "
          f"{LANDED_TARGET:.0%}: {verdict(share >= LANDED_TARGET)}); requests to spent models {spent} (0: "
          f"{verdict(spent == 0)}); requests too big for their model's minute {big} (0: {verdict(big == 0)})")
    return share >= LANDED_TARGET and spent == 0 and big == 0


def verdict(met):
    return "met" if met else "MISSED"


def mismatch(a, b):
    return "" if a == b else "  (DIFFER)"


def counted(counts):
    return ", ".join(f"{name} {n}" for name, n in counts.items()) or "none"


def show_the_day(day, scale):
    """The day's figures; its workspace is removed when every target is met, else kept for a look."""
    rows = tally(day)
    total = show_day(day, rows, scale)
    show_waste(rows)
    show_cross_checks(day, rows)
    show_day_prompts(day, rows)
    if show_targets(rows, total):
        shutil.rmtree(day["root"].parent)
    else:
        print(f"the day's workspace is kept for a look: {day['root']}; the keeper's output ends:\n  "
              + "\n  ".join(day["lines"][-12:]))


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=int, default=SCALE, help=f"divide each daily quota by this (default {SCALE})")
    parser.add_argument("--timeout", type=float, default=TIMEOUT, help="seconds the scaled day may run before it is "
                                                                       f"stopped (default {TIMEOUT})")
    parser.add_argument("--gate-runs", type=int, default=GATE_RUNS, help="iterations timed for each gate case "
                                                                         f"(default {GATE_RUNS})")
    return parser.parse_args()


def main():
    args = parse_args()
    show_header(args)
    show_genesis(measure_genesis())
    show_rewrite_cost()
    show_gate(time_gate(args.gate_runs, changed_notes), time_gate(args.gate_runs, changed_seed))
    show_the_day(spend_the_day(args.scale, args.timeout), args.scale)


if __name__ == "__main__":
    main()
