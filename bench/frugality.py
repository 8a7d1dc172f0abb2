"""Benchmark: what the free requests buy. Prints figures; asserts nothing.

    python bench/frugality.py                   # 50 iterations per mode; about 10 minutes (limits are real time)
    python bench/frugality.py --iterations 20   # a quicker look

Runs `python fallback.py --iterations 1` over and over in a fresh copy of the workspace, against a fake
Gemini that enforces free-tier limits (10 requests and 250,000 input tokens a minute and 20 requests a day per
model, two models; tokens counted at 4 characters each) and
answers from a script: most answers add a 70 KB module (the codebase grows to about 2 MB), every 7th
is lazy and every 11th is cut off. Two modes on the same script: as shipped, and with the seed's
quota memory and pacing switched off (its .seed/quota.json deleted before every iteration).
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
import fake_gemini as api  # noqa: E402  (the tests' fake server, reused)

MODELS = ["gemini-3.5-flash", "gemini-2.5-flash-lite"]
PER_MINUTE, TOKENS_PER_MINUTE, PER_DAY = 10, 250_000, 20
FUNCTIONS_PER_MODULE = 1500  # about 70 KB of code per landed module
WORKSPACE_FILES = ["seed.py", "fallback.py", "goal.md", "pending_tasks.md", "iteration_log.md"]


class FreeTier(api.FakeGemini):
    """Scripted answers behind free-tier limits; a refused request does not count against them."""

    def __init__(self):
        super().__init__()
        self.lock, self.minute, self.day, self.answered = threading.Lock(), {m: [] for m in MODELS}, Counter(), 0
        self.tokens = {m: [] for m in MODELS}  # (time, input tokens) of the answered requests
        self.seen = []  # (model, kind, prompt tokens)

    def next_reply(self, request):
        model, now = request["model"], time.monotonic()
        text = request["body"]["contents"][0]["parts"][0]["text"] + request["body"]["systemInstruction"]["parts"][0]["text"]
        tokens = len(text) // 4
        with self.lock:
            self.minute[model] = [t for t in self.minute[model] if now - t < 60]
            self.tokens[model] = [(t, n) for t, n in self.tokens[model] if now - t < 60]
            if self.day[model] >= PER_DAY:
                kind, reply = "429 per day", api.per_day(model)
            elif len(self.minute[model]) >= PER_MINUTE:
                kind, reply = "429 per minute", api.per_minute(f"{self.minute[model][0] + 60 - now:.1f}s")
            elif sum(n for _, n in self.tokens[model]) + tokens > TOKENS_PER_MINUTE:
                kind, reply = "429 per minute", api.per_minute(f"{self.tokens[model][0][0] + 60 - now:.1f}s")
            else:
                self.minute[model].append(now)
                self.tokens[model].append((now, tokens))
                self.day[model] += 1
                self.answered += 1
                kind, reply = "answer", scripted(self.answered, tokens)
            self.seen.append((model, kind, tokens))
        return (reply["error"]["code"] if "error" in reply else 200), reply, 0.0, None, False


def scripted(n, prompt_tokens):
    if n % 7 == 0:
        reply = api.answer([(f"mod_{n:03d}.py", "# ... existing code ...\n")])
    elif n % 11 == 0:
        reply = api.max_tokens(with_parts=False)
    else:
        code = "".join(f"def f_{n}_{i}(x):\n    return x * {i} + {n}\n\n\n" for i in range(FUNCTIONS_PER_MODULE))
        reply = api.answer([(f"mod_{n:03d}.py", code)])
    reply["usageMetadata"] = api.usage(prompt=prompt_tokens, output=5000, thinking=500)
    return reply


def run(mode, iterations):
    root = Path(tempfile.mkdtemp(prefix=f"seed-bench-{mode}-")) / "workspace"
    root.mkdir()
    for rel in WORKSPACE_FILES:
        shutil.copy2(REPO / rel, root / rel)
    fake = FreeTier()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "SEED_"))}
    env.update(GEMINI_API_KEY="AIzaBENCHMARK-not-a-real-key", GEMINI_API_BASE=fake.url,
               GEMINI_MODEL=",".join(MODELS), SEED_BACKOFF="1")
    growth, started = [], time.monotonic()
    for _ in range(iterations):
        if mode == "off":
            (root / ".seed" / "quota.json").unlink(missing_ok=True)
        before = len(fake.seen)
        subprocess.run([sys.executable, "fallback.py", "--iterations", "1", "--delay", "0"], cwd=root, env=env,
                       capture_output=True, timeout=1800)
        size = sum(p.stat().st_size for p in root.glob("*.py") if p.name != "fallback.py")
        answered = [tokens for _, kind, tokens in fake.seen[before:] if kind == "answer"]
        growth.append((size, answered[-1] if answered else None))
    fake.close()
    log = (root / "iteration_log.md").read_text()
    ledger = json.loads((root / "backups" / "usage.json").read_text())
    shutil.rmtree(root.parent)
    outcomes = Counter(re.findall(r"^## Iteration \d+ — .* UTC — (landed|no change|rolled back|waiting|stopped)",
                                  log, re.M))
    wasted = Counter()
    for day in ledger.values():
        for use in day.values():
            wasted.update(use["wasted"])
    return {"mode": mode, "iterations": iterations, "requests": len(fake.seen), "outcomes": outcomes,
            "kinds": Counter(kind for _, kind, _ in fake.seen), "wasted": wasted, "growth": growth,
            "minutes": (time.monotonic() - started) / 60}


def report(results):
    print(f"{'mode':<22}{'iter.':>6}{'requests':>9}{'req/iter':>9}{'landed':>7}{'req/landed':>11}{'wasted':>7}"
          f"{'429/min':>8}{'429/day':>8}{'minutes':>8}")
    for r in results:
        landed = r["outcomes"]["landed"]
        print(f"{r['mode']:<22}{r['iterations']:>6}{r['requests']:>9}{r['requests'] / r['iterations']:>9.2f}"
              f"{landed:>7}{(r['requests'] / landed if landed else float('nan')):>11.2f}{sum(r['wasted'].values()):>7}"
              f"{r['kinds']['429 per minute']:>8}{r['kinds']['429 per day']:>8}{r['minutes']:>8.1f}")
    for r in results:
        print(f"\nwasted requests by reason ({r['mode']}): "
              + (", ".join(f"{why} {n}" for why, n in r["wasted"].most_common()) or "none"))
    print("\nprompt tokens against the codebase's size (as shipped; budget SEED_PROMPT_TOKENS=60,000, "
          "estimated at 3 characters a token, counted here at 4):")
    for size, tokens in results[0]["growth"][::max(1, len(results[0]["growth"]) // 10)]:
        print(f"  codebase {size / 1e6:5.2f} MB  ->  prompt {tokens:>7,} tokens" if tokens else
              f"  codebase {size / 1e6:5.2f} MB  ->  no request")
    on, off = results
    print(f"\n429s avoided by pacing: {off['kinds']['429 per minute'] - on['kinds']['429 per minute']} per-minute; "
          f"by quota memory: {off['kinds']['429 per day'] - on['kinds']['429 per day']} per-day")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=50)
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]} on {os.uname().sysname} {os.uname().machine}, {os.cpu_count()} cores; "
          f"limits: {PER_MINUTE} requests and {TOKENS_PER_MINUTE:,} tokens a minute, {PER_DAY} requests a day, "
          f"for each of {', '.join(MODELS)}\n")
    report([run("as shipped", args.iterations), run("off", args.iterations)])


if __name__ == "__main__":
    main()
