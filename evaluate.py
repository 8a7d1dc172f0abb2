"""evaluate: how far the codebase has come toward goal.md, as a score you own and the model cannot edit.

The keeper runs this after a change passes its gate, in a read-only copy of the changed codebase (the current
folder), confined and with a time limit; the last line this file prints (not a process it starts) is JSON with a
number "score" (and any other named numbers). The score is in the log, on the console, charted in report.html and
shown to the model. With SEED_RATCHET=score in .env a change whose score falls is rolled back. This one scores the
starter goal: the fraction of the note keeper's commands (add, list, find) that work. It runs notes.py as a
process of its own and judges what it prints, never importing it: imported, the code it scores would run in this
process and could change what it prints. For your own goal, write your own, the same way.
"""
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def notes(folder, *args):
    """(exit code, output) of `python notes.py ARGS` in folder."""
    done = subprocess.run([sys.executable, "notes.py", *args], cwd=folder, capture_output=True, text=True, timeout=20)
    return done.returncode, done.stdout


def commands_that_work(here):
    """{command: 1 if it works, else 0}, tried on a copy of notes.py in a folder of its own."""
    works = {"add": 0, "list": 0, "find": 0}
    if not (here / "notes.py").is_file():
        return works
    with tempfile.TemporaryDirectory() as folder:
        shutil.copy(here / "notes.py", folder)
        try:
            works["add"] = int(all(notes(folder, "add", text)[0] == 0 for text in ("buy milk", "call Ann")))
            code, listed = notes(folder, "list")
            works["list"] = int(code == 0 and "buy milk" in listed and "call Ann" in listed)
            code, found = notes(folder, "find", "milk")
            works["find"] = int(code == 0 and "buy milk" in found and "call Ann" not in found)
        except (OSError, subprocess.SubprocessError):
            pass
    return works


if __name__ == "__main__":
    works = commands_that_work(Path.cwd())
    print(json.dumps({"score": round(sum(works.values()) / len(works), 3), **works}))
