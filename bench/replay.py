"""How long a replay takes against the keeper's own work for the iterations it replays.

    python bench/replay.py                    # records 100 iterations against the fake Gemini, then replays them
    python bench/replay.py --iterations 20

Records a run in a throwaway copy of this workspace (the tests' fresh copy: seed.py and the keeper), against the
tests' fake Gemini server on loopback, its answers cycling through a landing, a rollback, a fix and a no-change.
The keeper's own work is the recorded run timed whole (`python fallback.py --iterations N`, from its start to
its exit: every iteration with its record, log and page) less its requests' latency in the record (the model's
time, which a replay does not spend); the replay is `python fallback.py --replay` timed whole (the copy made,
every iteration run and compared, the copy removed). Prints both and their ratio, and the iterations' own
seconds as the record has them; the replay must take at most the keeper's work. Needs no key or network.
"""
import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "supervisor" / "tests"))
import fake_gemini as api  # noqa: E402  (the tests' fake server, reused)
from conftest import fresh_workspace, user_env  # noqa: E402

DEMO = json.loads((REPO / "supervisor" / "demo.json").read_text())


def answers(count):
    """The demo's landing, rollback and fix, a no-change, and a landing of a module of its own, over and over."""
    found = []
    while len(found) < count:
        n = len(found)
        found += DEMO["answers"] + [{"tasks": ["rest"], "files": []},
                                    {"tasks": ["grow"], "files": [{"path": f"part{n}.py", "content": f"N = {n}\n"}]}]
    return found[:count]


def keeper_work(root):
    """(seconds the iterations took, seconds of that the model took) from the record."""
    db = sqlite3.connect(root / "backups" / "record.sqlite")
    total = db.execute("SELECT total(seconds) FROM iterations").fetchone()[0]
    model = db.execute("SELECT total(latency) FROM requests").fetchone()[0]
    db.close()
    return total, model


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=100)
    args = parser.parse_args(argv)
    root = fresh_workspace(Path(tempfile.mkdtemp(prefix="bench-replay-")) / "workspace")
    (root / "goal.md").write_text(DEMO["goal"])
    fake = api.FakeGemini()
    for answer in answers(args.iterations):
        fake.reply(api.text_answer(json.dumps(answer)))
    env, began = user_env(fake), time.monotonic()
    recorded = subprocess.run([sys.executable, "fallback.py", "--iterations", str(args.iterations), "--delay", "0"],
                              cwd=root, env=env, capture_output=True, text=True)
    whole = time.monotonic() - began
    fake.close()
    assert recorded.returncode == 0, recorded.stderr
    total, model = keeper_work(root)
    work = whole - model
    began = time.monotonic()
    replayed = subprocess.run([sys.executable, "fallback.py", "--replay"], cwd=root, env=env, capture_output=True,
                              text=True)
    took = time.monotonic() - began
    print(replayed.stdout.splitlines()[-1] if replayed.stdout else replayed.stderr)
    print(f"{args.iterations} iterations recorded in {root}: the run took {whole:.1f} s, of which the model "
          f"{model:.1f} s: the keeper's own work {work:.1f} s ({work / args.iterations:.2f} s an iteration; the "
          f"iterations' own seconds in the record: {total:.1f} s)")
    print(f"the replay took {took:.1f} s ({took / args.iterations:.2f} s an iteration): {took / work:.2f} times the "
          f"keeper's work; exit {replayed.returncode}")
    return 0 if replayed.returncode == 0 and took <= work else 1


if __name__ == "__main__":
    sys.exit(main())
