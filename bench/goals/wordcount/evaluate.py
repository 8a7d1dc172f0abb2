"""The hidden evaluator of the bench's goal "wordcount": the fraction of its cases that `python wc.py ...` passes.

Never shown to the system under test. Run in the folder of the code to score (the current folder): it copies
wc.py into a folder of its own with two text files, runs each case as a process and judges what it prints and its
exit status. The last line is JSON: {"score": fraction, "passed": n, "cases": m}.
"""
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

TEXTS = {"a.txt": "the cat sat\non the mat\nThe end\n", "b.txt": "Bee bee ant, ant! cow\nbee\n"}
CASES = [  # (arguments, the output expected, or None for an error: status 1, a line on stderr)
    (["a.txt"], "3 8 31"), (["b.txt"], "2 6 26"),
    (["--top", "1", "a.txt"], "the 3"), (["--top", "2", "a.txt"], "the 3\ncat 1"),
    (["--top", "2", "b.txt"], "bee 3\nant 2"), (["--top", "3", "b.txt"], "bee 3\nant 2\ncow 1"),
    (["missing.txt"], None), (["--top", "1", "missing.txt"], None),
]


def passes(folder, args, expected):
    try:
        done = subprocess.run([sys.executable, "wc.py", *args], cwd=folder, capture_output=True, text=True,
                              timeout=20)
    except (OSError, subprocess.SubprocessError):
        return False
    if expected is None:
        return done.returncode == 1 and done.stderr.strip() != ""
    return done.returncode == 0 and [line.strip() for line in done.stdout.strip().splitlines()] == expected.split("\n")


if __name__ == "__main__":
    passed = 0
    if Path("wc.py").is_file():
        with tempfile.TemporaryDirectory() as folder:
            shutil.copy("wc.py", folder)
            for name, text in TEXTS.items():
                Path(folder, name).write_text(text)
            passed = sum(passes(folder, args, expected) for args, expected in CASES)
    print(json.dumps({"score": round(passed / len(CASES), 3), "passed": passed, "cases": len(CASES)}))
