"""Benchmark: what the run's record (backups/record.sqlite) costs. Prints figures; asserts nothing.

    python bench/record.py                      # about five minutes on 2 cores
    python bench/record.py --iterations 40 --big 1000 10000 100000 --kills 30
    python bench/record.py --parts 3            # the third part alone

1. Bytes stored per request on a grown workspace: bench/freeday.py's (about 100 KB of code in 40 modules with their
   tests), `python fallback.py` for --iterations against the tests' fake Gemini, each answer adding a module: the
   prompts are whole (the seed sends the code it can), so each request's body is about the codebase's size. Shown:
   the bytes of the exchanges as sent and received, as stored (a prompt as a zlib'd delta from the one before it),
   and the database's file over the requests.
2. The time one record takes to write: the run's iterations and exchanges written again into a new database, one
   transaction each (the delta of the prompt included), the median of them.
3. --status and report.html at each of --big iterations: the tests' synthetic workspace (supervisor/tests/
   test_report.py's grow) of up to 1,000 iterations with its snapshots, the record written as the keeper writes it,
   then grown to the size with iterations of every outcome and a request and a half each (150,000 at 100,000
   iterations, a year of days), as a keeper's start then finds it; the medians of three `python fallback.py
   --status` (a fresh process each) and of three write_report warm (in memory, as the loop draws the page after
   an iteration), and write_report cold (no cache, nothing in memory).
4. kill -9 at --kills random moments (supervisor/tests/test_record.py's), then PRAGMA integrity_check and the record against
   the folder, and how long it all took.
"""
import argparse
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "supervisor" / "tests"))
sys.path.insert(0, str(REPO / "bench"))
import fake_gemini as api  # noqa: E402  (the tests' fake server)
from conftest import TEST_MODELS, fresh_workspace  # noqa: E402
from freeday import KEY, codebase_bytes, grow as grow_code, make_workspace  # noqa: E402
from test_record import kill_at_random_moments  # noqa: E402
from test_report import grow, record, report  # noqa: E402


def keeper_env(fake):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "SEED_", "OPENAI_"))}
    env.update(GEMINI_API_BASE=fake.url, GEMINI_MODEL="gemini-3.5-flash", SEED_BACKOFF="0.01",
               GEMINI_LIMITS=",".join(f"{model}=1000/10000000/100000" for model in TEST_MODELS))
    return env


def module(n):
    code = "".join(f"def feature_{n}_{k}(items):\n    return [item for item in items if item % {k + 2}]\n\n\n"
                   for k in range(6))
    test = f"import extra_{n}\n\n\ndef test_it():\n    assert extra_{n}.feature_{n}_0([1, 2]) == [1]\n"
    return [(f"extra_{n}.py", code), (f"tests/test_extra_{n}.py", test)]


def bytes_per_request(iterations):
    """Run the keeper on a grown workspace; (its root, figures)."""
    root = make_workspace()
    grow_code(root)
    code = codebase_bytes(root)
    fake = api.FakeGemini()
    for n in range(iterations):
        fake.reply(api.answer(module(n)))
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "fallback.py", "--iterations", str(iterations), "--delay", "0"], cwd=root,
                          env=keeper_env(fake), capture_output=True, text=True)
    seconds = time.perf_counter() - began
    fake.close()
    db = sqlite3.connect(record.path_of(root))
    requests = db.execute("SELECT count(*) FROM requests").fetchone()[0]
    stored = db.execute("SELECT sum(length(prompt) + length(answer) + length(cleaned)) FROM exchanges").fetchone()[0]
    whole = sum(len(r["raw"]) + len(r["sent"]) for r in fake.requests if r["body"])
    files = sum(p.stat().st_size for p in root.glob("backups/record.sqlite*"))
    print(f"1. grown workspace: {code / 1024:.0f} KB of code; {iterations} iterations in {seconds:.0f} s "
          f"(exit {done.returncode}), {requests} requests")
    print(f"   per request: {whole / requests / 1024:.1f} KB as sent and received, {stored / requests / 1024:.2f} KB "
          f"stored (compressed), the database's files {files / requests / 1024:.1f} KB")
    return root


def write_time(root):
    """Write the run's iterations again, with their exchanges, into a new database; the median ms of a write."""
    rows, times = [row for row in record.iterations(root) if record.requests_of(root, row["number"])], []
    with tempfile.TemporaryDirectory() as folder:
        book = record.Writer(Path(folder) / "backups" / "record.sqlite")
        for row in rows * 3:
            calls = []
            for request, model, kind, prompt, output, thinking, latency, wasted in \
                    record.requests_of(root, row["number"]):
                found = record.exchange(root, request)
                calls.append({"model": model, "kind": kind, "day": "2026-11-24", "latency": latency,
                              "tokens": {"prompt": prompt, "output": output, "thinking": thinking},
                              "sent": found["prompt"], "received": found["answer"], "cleaned": found["cleaned"]})
            began = time.perf_counter()
            book.write({**row, "number": row["number"] + len(times)}, calls)
            times.append(time.perf_counter() - began)
    print(f"2. one record written (its row, its request and a whole prompt's delta, one transaction): median "
          f"{statistics.median(times) * 1000:.1f} ms, slowest {max(times) * 1000:.1f} ms, of {len(times)}")


GROWN = 1_000  # iterations of a bench workspace grown with snapshots; past it, rows only


def extend(root, iterations):
    """The record grown to `iterations` with rows of every outcome and a request and a half each, as written by the
    keeper (then its start, as it finds the record)."""
    rng, kinds = random.Random(3), [kind.value for kind in record.Outcome if kind is not record.Outcome.OTHER]
    book = record.Writer(record.path_of(root))
    with record.Transaction(book.db):
        for number in range(GROWN + 1, iterations + 1):
            kind = rng.choice(kinds)
            book.insert_row({"number": number, "ended": "2026-11-20 10:00:00 UTC", "kind": kind, "outcome": kind,
                             "model": "gemini-3.5-flash", "tasks": [f"Improve pkg{number % 12}/mod{number}.py"],
                             "files": [], "score": rng.random() if kind == "landed" else None, "seconds": 4.1,
                             "requests": 1 + number % 2, "prompt_tokens": 31_000, "output_tokens": 900,
                             "thinking_tokens": 400, "lines_added": 3, "lines_removed": 1,
                             "output": "collected 40 items\n40 passed in 0.31s\n" * 5})
            book.db.executemany(
                "INSERT INTO requests (iteration, day, model, kind, prompt_tokens, output_tokens, thinking_tokens, "
                "latency, wasted) VALUES (?, ?, ?, 'answer', 31000, 900, 400, 4.1, ?)",
                [(number, f"2026-{1 + number * 11 // iterations:02}-{1 + number % 28:02}", model,
                  None if kind == "landed" else "tests failed")
                 for model in ("gemini-3.5-flash", "gemini-3.5-flash-lite")[:1 + number % 2]])
    book.db.close()
    record.Writer(record.path_of(root)).db.close()


def median_seconds(action, runs=3):
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        action()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def at_scale(iterations):
    with tempfile.TemporaryDirectory(prefix="record-bench-") as folder:
        root = Path(folder) / "workspace"
        root.mkdir()
        began = time.perf_counter()
        grow(root, min(iterations, GROWN), files=30, keep=100, every=7)
        extend(root, iterations)
        built = time.perf_counter() - began
        for rel in ["fallback.py", *(p.relative_to(REPO).as_posix() for p in (REPO / "supervisor").rglob("*.py")
                                     if "tests" not in p.relative_to(REPO).parts)]:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, root / rel)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "SEED_", "OPENAI_"))}
        env["GEMINI_API_KEY"] = KEY
        status = subprocess.run([sys.executable, "fallback.py", "--status"], cwd=root, env=env, capture_output=True,
                                text=True)
        status_time = median_seconds(lambda: subprocess.run([sys.executable, "fallback.py", "--status"], cwd=root,
                                                            env=env, capture_output=True))
        began = time.perf_counter()
        report.write_report(root)
        cold = time.perf_counter() - began
        warm = median_seconds(lambda: report.write_report(root))
        size = record.path_of(root).stat().st_size
        requests = sqlite3.connect(record.path_of(root)).execute("SELECT count(*) FROM requests").fetchone()[0]
        print(f"3. {iterations:,} iterations, {requests:,} requests (built in {built:.0f} s, the record "
              f"{size / 1e6:.1f} MB): --status {status_time:.2f} s (exit {status.returncode}, "
              f"{status.stdout.splitlines()[1]!r}); report.html warm {warm * 1000:.0f} ms, cold {cold:.2f} s")


def kills(count):
    with tempfile.TemporaryDirectory(prefix="record-kills-") as folder:
        root = fresh_workspace(Path(folder) / "workspace")
        fake = api.FakeGemini()
        env = keeper_env(fake)
        env["GEMINI_API_KEY"] = KEY
        began = time.perf_counter()
        kill_at_random_moments(root, env, fake, count, seed=int(time.time()))
        rows = record.iterations(root)
        fake.close()
        print(f"4. kill -9 at {count} random moments: the record passed integrity_check after each and agrees with "
              f"the folder ({len(rows)} iterations, {sum(r['kind'] == 'landed' for r in rows)} landed) in "
              f"{time.perf_counter() - began:.0f} s")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=20, help="iterations of the grown run")
    parser.add_argument("--big", type=int, nargs="+", default=[1_000, 10_000, 100_000],
                        help="iterations of the synthetic record (each size in turn)")
    parser.add_argument("--kills", type=int, default=30)
    parser.add_argument("--parts", default="1234", help="the parts to run, by number")
    args = parser.parse_args(argv)
    if "1" in args.parts or "2" in args.parts:
        root = bytes_per_request(args.iterations)
        write_time(root)
        shutil.rmtree(root.parent, ignore_errors=True)
    for iterations in args.big if "3" in args.parts else []:
        at_scale(iterations)
    if "4" in args.parts:
        kills(args.kills)


if __name__ == "__main__":
    main()
