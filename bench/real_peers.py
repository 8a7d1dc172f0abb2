"""Benchmark: seed and Aider side by side on one real small model, goal, hidden evaluator and budget of requests.

    python bench/real_peers.py                          # goal "roman", 3 runs each of 10 requests, interleaved
    python bench/real_peers.py --goal wordcount --runs 1 --requests 3
    python bench/real_peers.py --systems seed --deadline 60   # start no run after 60 minutes

One llama-cpp-python server (Qwen2.5-Coder 1.5B, context 8,192, both cores; real_model.py installs both), and
for each run a recording relay of its own in front of it, which counts the run's chat requests. The runs take
turns (seed 1, aider 1, seed 2, ...), so a machine that slows down weighs on both.
- seed: a fresh workspace as real_model.workspace() makes it, with the keeper as committed (HEAD, never edits in
  progress in this tree), the goal as goal.md and no evaluate.py (the score is never shown to the model), run as
  `python fallback.py --iterations N --timeout 1800`: N requests' worth of iterations.
- aider: `aider-chat` from the package registry in a throwaway virtual environment (~/.cache/seed-bench/real-peers),
  in a fresh git folder, whole-file edits, --yes-always, --auto-test with pytest, the chat history kept from one
  invocation to the next, each invocation given the goal's text as its message, until the relay has counted N
  chat requests (its commit messages and history summaries count: the relay answers any request past N with a 400,
  after which Aider commits with a message of its own and stops).
The goal's evaluator (bench/goals/NAME/evaluate.py) is hidden from both: after the run it scores each landed state
(seed: each landed iteration's snapshot, through `fallback.py --materialise`; aider: each of its commits), and a
landing that keeps or raises the score is a useful change. Prints per run what landed and its score, then per
system the medians: requests, landings, useful changes, useful per 100 requests, best and final hidden score, the
model's tests passing at the end, wall time; and each system's characteristic failures (seed: its record's
reasons; aider: the lines of its output that say an edit or a request failed). Asserts nothing.
"""
import argparse
import collections
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import real_model
from real_servers import Relay, venv, versions

REPO = real_model.REPO
GOALS = REPO / "bench" / "goals"
MODULES = {"roman": "roman.py", "wordcount": "wc.py"}  # each goal's main module
CACHE = Path.home() / ".cache" / "seed-bench" / "real-peers"
AIDER = ["aider-chat==0.86.2"]
SEED_TIMEOUT = 1800  # seconds one seed run may take on this loaded machine (fallback.py --timeout)
AIDER_SECONDS = 3600  # seconds one Aider invocation may take before it is stopped
FAILED = re.compile(r"(malformed|did not conform|didn't conform|unable to|failed|error|exceeds|context window|"
                    r"only \d+ reflections|no changes|can't edit|cannot|retrying|warning)", re.I)


# --- scoring, the same for both -------------------------------------------------------------------------
def hidden_score(folder, goal):
    """The goal's hidden evaluator's score of the code in folder, or None when it printed none."""
    done = subprocess.run([sys.executable, str(GOALS / goal / "evaluate.py")], cwd=folder, capture_output=True,
                          text=True, timeout=600)
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])["score"]
    except (ValueError, IndexError, KeyError, TypeError):
        return None


def tests_pass(folder):
    """(passed, failed) of the model's tests in a copy of folder, as plain `python -m pytest -q` runs them."""
    with tempfile.TemporaryDirectory() as copy:
        shutil.copytree(folder, copy, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".git", ".aider*"))
        try:
            done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=copy,
                                  capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            return 0, 1
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    count = lambda *words: sum(int(n) for word in words for n in re.findall(rf"(\d+) {word}", last))
    return count("passed"), count("failed", "error")


def lines_of(folder, module):
    path = Path(folder) / module
    return len(path.read_text("utf-8", "replace").splitlines()) if path.is_file() else 0


def judged(states, goal, module):
    """The landings judged: each state (label, folder, files) scored; useful when it keeps or raises the score
    before it (0 before the first); the final state's tests and main module."""
    with tempfile.TemporaryDirectory() as empty:
        before, landings = hidden_score(empty, goal) or 0.0, []
    for label, folder, files in states:
        now = hidden_score(folder, goal)
        landings.append({"label": label, "files": files, "score": now, "useful": now is not None and now >= before,
                         "raised": now is not None and now > before})
        before = now if now is not None else before
    final = states[-1][1] if states else None
    return landings, (tests_pass(final) if final else (0, 0)), (lines_of(final, module) if final else 0)


# --- seed -----------------------------------------------------------------------------------------------
def run_seed(out, target, alias, goal, budget, land_on="tests"):
    """One run of seed: (facts of the run, landings, its per-iteration lines). With `land_on` "score", the goal's
    evaluator is the person's evaluate.py (the keeper never shows it to the model) and SEED_LAND_ON=score."""
    relay = Relay(target)
    settings = {"OPENAI_BASE_URL": relay.base, "OPENAI_MODEL": alias, "OPENAI_CONTEXT_TOKENS": 8192,
                "SEED_LAND_ON": land_on}
    root = real_model.workspace(out / "workspace", GOALS / goal / "goal.md", settings)
    for rel in set(real_model.WORKSPACE) - {"goal.md"}:  # the keeper as committed, never edits in progress here
        (root / rel).write_bytes(subprocess.run(["git", "show", f"HEAD:{rel}"], cwd=REPO, capture_output=True,
                                                check=True).stdout)
    (root / "evaluate.py").unlink()  # the score is hidden: the keeper has none to show the model
    if land_on == "score":  # the keeper scores each change with it, and the model never reads it
        (root / "evaluate.py").write_bytes((GOALS / goal / "evaluate.py").read_bytes())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "OPENAI_", "SEED_"))}
    env["PYTHONUNBUFFERED"] = "1"  # its console.txt as it goes
    started = time.monotonic()
    with (out / "console.txt").open("w") as console:
        code = subprocess.run([sys.executable, "fallback.py", "--iterations", str(budget), "--delay", "0",
                               "--timeout", str(SEED_TIMEOUT)], cwd=root, env=env, stdout=console,
                              stderr=subprocess.STDOUT).returncode
    seconds = time.monotonic() - started
    relay.server.shutdown()
    (out / "exchanges.json").write_text(json.dumps(relay.exchanges, indent=1))
    rows = real_model.iterations(root)
    states = []
    for row in rows:
        if row["kind"] == "landed" and row["snapshot_after"]:
            subprocess.run([sys.executable, "fallback.py", "--materialise", row["snapshot_after"]], cwd=root, env=env,
                           capture_output=True)
            files = [change[0] if isinstance(change, list) else change for change in json.loads(row["files"] or "[]")]
            states.append((f"iteration {row['number']}", root / "backups" / row["snapshot_after"], files))
    landings, tests, lines = judged(states, goal, MODULES[goal])
    scores = {landing["label"]: landing["score"] for landing in landings}
    detail = [f"  {row['number']:>3} {row['outcome'][:44]:<44} {row['seconds'] or 0:>7.1f}s prompt {prompt:>7} "
              f"out {row['output_tokens'] or 0:>5,}  hidden {scores.get('iteration %d' % row['number'], '-')}"
              + f"\n        files: {' '.join(str(f[0]) for f in json.loads(row['files'] or '[]'))[:100]}"
              + ("" if row["kind"] == "landed" else f"\n        why: {failure_of(row)}")
              for row, prompt in zip(rows, real_model.prompt_sizes(rows, relay.chats()))]
    failures = collections.Counter(failure_of(row) for row in rows if row["kind"] != "landed")
    facts = {"requests": len(relay.chats()), "iterations": len(rows), "seconds": seconds, "exit": code,
             "tests": tests, "lines": lines, "failures": failures, "where": str(out)}
    return facts, landings, detail


def failure_of(row):
    """An iteration that landed nothing, in a few words: its failure, and the error its output shows first."""
    error = re.search(r"^E\s+(\S.*)$", row["output"] or "", re.M)
    why = error.group(1) if error else re.split(r"[;(]", re.sub(r"\s+", " ", row["reason"] or ""))[0]
    return f"{row['failure'] or row['outcome']}: {why[:90]}"


# --- aider ----------------------------------------------------------------------------------------------
def run_aider(out, target, alias, goal, budget, python):
    """One run of Aider: (facts of the run, landings, its per-request lines)."""
    relay = Relay(target, limit=budget)
    repo = out / "repo"
    repo.mkdir(parents=True)
    git = lambda *args: subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout
    git("init", "-q")
    git("config", "user.name", "bench")
    git("config", "user.email", "bench@localhost")
    git("commit", "-q", "--allow-empty", "-m", "start")
    base = git("rev-parse", "HEAD").strip()
    metadata = out / "model-metadata.json"
    metadata.write_text(json.dumps({f"openai/{alias}": {"max_input_tokens": 8192, "max_output_tokens": 4096,
                                                        "max_tokens": 8192, "input_cost_per_token": 0,
                                                        "output_cost_per_token": 0, "litellm_provider": "openai",
                                                        "mode": "chat"}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "OPENAI_", "SEED_"))}
    env |= {"OPENAI_API_BASE": relay.base, "OPENAI_API_KEY": "sk-bench", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "PATH": f"{python.parent}:{env.get('PATH', '')}"}
    message = (GOALS / goal / "goal.md").read_text()
    started, turns = time.monotonic(), 0
    with (out / "console.txt").open("w") as console:
        while relay.asked < budget:
            asked, turns = relay.asked, turns + 1
            files = [f for f in git("ls-files").split() if f.endswith(".py")]
            command = [str(python.parent / "aider"), "--model", f"openai/{alias}", "--model-metadata-file",
                       str(metadata), "--edit-format", "whole", "--yes-always", "--no-check-update",
                       "--analytics-disable", "--no-show-release-notes", "--no-gitignore", "--no-pretty",
                       "--restore-chat-history", "--auto-test", "--test-cmd",
                       f"{sys.executable} -m pytest -q -p no:cacheprovider", "--message", message, *files]
            console.write(f"\n=== turn {turns}: {len(files)} file(s) in the chat, {asked} request(s) so far\n")
            console.flush()
            try:
                subprocess.run(command, cwd=repo, env=env, stdout=console, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, timeout=AIDER_SECONDS)
            except subprocess.TimeoutExpired:
                console.write(f"=== turn {turns} stopped after {AIDER_SECONDS} s\n")
            if relay.asked == asked:  # it asked nothing: it would not now
                break
    seconds = time.monotonic() - started
    relay.server.shutdown()
    (out / "exchanges.json").write_text(json.dumps(relay.exchanges, indent=1))
    commits = git("log", "--reverse", "--format=%H", f"{base}..HEAD").split()
    states = []
    for commit in commits:
        folder = out / "states" / commit[:10]
        folder.mkdir(parents=True)
        subprocess.run(f"git archive {commit} | tar -x -C {folder}", shell=True, cwd=repo, check=True)
        files = git("show", "--name-only", "--format=", commit).split()
        states.append((f"commit {commit[:10]} {git('log', '-1', '--format=%s', commit).strip()[:50]}", folder, files))
    landings, tests, lines = judged(states, goal, MODULES[goal])
    kinds = [kind_of(chat) for chat in relay.chats()]
    detail = [f"  {n:>3} {kind:<16} status {chat['status']}  prompt ~{size_of(chat):,}"
              for n, (kind, chat) in enumerate(zip(kinds, relay.chats()), 1)]
    output = (out / "console.txt").read_text("utf-8", "replace")
    failures = collections.Counter(re.sub(r"\d+", "N", line.strip())[:90] for line in output.splitlines()
                                   if FAILED.search(line) and not line.startswith("===") and "not a terminal" not in line)
    failures.update(f"an edit answer with no file: {' '.join(text.split())[:60]!r}" for kind, chat in
                    zip(kinds, relay.chats()) if kind == "edit" and "```" not in (text := answer_of(chat)))
    failures.update(f"landed a file outside the goal: {name}" for _, _, files in states for name in files
                    if not name.endswith(".py"))
    facts = {"requests": min(relay.asked, budget), "iterations": turns, "seconds": seconds, "exit": 0,
             "tests": tests, "lines": lines, "failures": failures, "where": str(out),
             "kinds": collections.Counter(kinds)}
    return facts, landings, detail


def kind_of(chat):
    """What Aider asked for: an edit, a commit message or a summary of the chat history (by its system prompt)."""
    try:
        messages = json.loads(chat["request"])["messages"]
    except (ValueError, KeyError, TypeError):
        return "?"
    system = " ".join(str(m.get("content", "")) for m in messages if m.get("role") == "system").lower()
    return ("commit message" if "one-line git commit message" in system else
            "summary" if "briefly* summarize" in system else "edit")


def answer_of(chat):
    """The text of an answer, streamed (its events' content joined) or whole."""
    try:
        events = [json.loads(line[6:]) for line in chat["answer"].splitlines() if line.startswith("data: {")]
        if events:
            return "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e.get("choices"))
        return json.loads(chat["answer"])["choices"][0]["message"]["content"] or ""
    except (ValueError, KeyError, IndexError, TypeError):
        return ""


def size_of(chat):
    """A request's prompt in tokens, as its characters / 3."""
    try:
        return sum(len(str(m.get("content", ""))) for m in json.loads(chat["request"])["messages"]) // 3
    except (ValueError, KeyError, TypeError):
        return 0


# --- the report -----------------------------------------------------------------------------------------
def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summary(runs):
    """The per-run figures of one system: {name: [value per run]}."""
    table = collections.defaultdict(list)
    for facts, landings in runs:
        scores = [landing["score"] for landing in landings if landing["score"] is not None]
        useful = sum(landing["useful"] for landing in landings)
        table["requests"].append(facts["requests"])
        table["landed"].append(len(landings))
        table["useful"].append(useful)
        table["raised"].append(sum(landing["raised"] for landing in landings))
        table["useful/100 req"].append(round(100 * useful / facts["requests"], 1) if facts["requests"] else 0.0)
        table["best score"].append(max(scores, default=0.0))
        table["final score"].append(scores[-1] if scores else 0.0)
        table["tests pass"].append(facts["tests"][0])
        table["tests fail"].append(facts["tests"][1])
        table["main lines"].append(facts["lines"])
        table["minutes"].append(round(facts["seconds"] / 60, 1))
    return table


def print_table(results):
    names = list(summary(next(iter(results.values()))) if results else [])
    print(f"\n{'system':<7} {'run':<7}" + "".join(f"{name:>15}" for name in names))
    for system, runs in results.items():
        table = summary(runs)
        for n in range(len(runs)):
            print(f"{system:<7} {n + 1:<7}" + "".join(f"{table[name][n]:>15}" for name in names))
        medians = [median(table[name]) for name in names]
        print(f"{system:<7} {'median':<7}" + "".join(f"{'-' if m is None else f'{m:.4g}':>15}" for m in medians))
    for system, runs in results.items():
        failures = sum((facts["failures"] for facts, _ in runs), collections.Counter())
        print(f"\n{system}: characteristic failures over {len(runs)} run(s)")
        for what, count in failures.most_common(8):
            print(f"  {count:>3} x {what}")
        kinds = sum((facts.get("kinds", collections.Counter()) for facts, _ in runs), collections.Counter())
        if kinds:
            print(f"  requests by kind: {', '.join(f'{kind} {count}' for kind, count in kinds.most_common())}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--goal", choices=sorted(MODULES), default="roman")
    parser.add_argument("--runs", type=int, default=3, help="runs of each system")
    parser.add_argument("--requests", type=int, default=10, help="each run's budget of requests to the server")
    parser.add_argument("--systems", default="seed,aider", help="which systems, in the order they take turns")
    parser.add_argument("--deadline", type=float, default=0, help="start no run after this many minutes (0: none)")
    parser.add_argument("--land-on", choices=["tests", "score"], default="tests",
                        help="seed's SEED_LAND_ON (score: the goal's evaluator is the person's evaluate.py)")
    args = parser.parse_args()
    systems = [s for s in args.systems.split(",") if s]
    began = time.monotonic()
    real_model.CACHE.mkdir(parents=True, exist_ok=True)
    llama = venv(real_model.CACHE, "llama", real_model.SERVER)
    gguf = real_model.weights(real_model.CACHE, "1.5b")
    aider = venv(CACHE, "aider", AIDER) if "aider" in systems else None
    alias = real_model.MODELS["1.5b"]["alias"]
    out = Path(tempfile.mkdtemp(prefix=f"seed-real-peers-{args.goal}-"))
    process, first = real_model.serve(llama, gguf, alias, 8192, out)
    first.server.shutdown()
    head = subprocess.run(["git", "log", "-1", "--format=%h %s"], cwd=REPO, capture_output=True, text=True).stdout
    print(f"goal {args.goal}; {args.runs} run(s) each of {args.requests} requests; model {alias}, context 8,192, "
          f"{os.cpu_count()} cores shared with other work; keeper at {head[:70].strip()}; output in {out}", flush=True)
    results = {system: [] for system in systems}
    try:
        for run in range(1, args.runs + 1):
            for system in systems:
                if args.deadline and time.monotonic() - began > args.deadline * 60:
                    print(f"deadline of {args.deadline:g} min reached: {system} run {run} not started", flush=True)
                    continue
                folder = out / f"{system}-{run}"
                folder.mkdir()
                if system == "seed":
                    facts, landings, detail = run_seed(folder, first.target, alias, args.goal, args.requests,
                                                       args.land_on)
                else:
                    facts, landings, detail = run_aider(folder, first.target, alias, args.goal, args.requests, aider)
                results[system].append((facts, landings))
                print(f"\n{system} run {run}: {facts['requests']} requests ({facts['iterations']} "
                      f"{'iterations' if system == 'seed' else 'invocations'}), {len(landings)} landed, "
                      f"{facts['seconds'] / 60:.1f} min; tests {facts['tests'][0]} pass, {facts['tests'][1]} fail; "
                      f"{MODULES[args.goal]} {facts['lines']} lines; {facts['where']}", flush=True)
                print("\n".join(detail))
                for landing in landings:
                    print(f"    landed {landing['label']}: {', '.join(landing['files'])[:90]} -> hidden "
                          f"{landing['score']}{' (useful)' if landing['useful'] else ''}", flush=True)
    finally:
        os.killpg(process.pid, 9)
    print_table({system: runs for system, runs in results.items() if runs})
    print(f"\nversions: {versions(llama, ['llama-cpp-python'])}"
          + (f" {versions(aider, ['aider-chat', 'litellm'])}" if aider else "")
          + f"; {(time.monotonic() - began) / 60:.0f} min in all; load average at the end "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
