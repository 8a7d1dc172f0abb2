"""The hidden evaluator of the bench's goal "roman": the fraction of its cases that `python roman.py ...` passes.

Never shown to the system under test. Run in the folder of the code to score (the current folder): it copies
roman.py into a folder of its own, runs each case as a process and judges what it prints and its exit status.
The last line is JSON: {"score": fraction, "passed": n, "cases": m}.
"""
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CASES = [  # (arguments, the output expected, or None for an error: status 2, nothing on stdout, a line on stderr)
    (["to", "1"], "I"), (["to", "4"], "IV"), (["to", "9"], "IX"), (["to", "14"], "XIV"), (["to", "40"], "XL"),
    (["to", "90"], "XC"), (["to", "400"], "CD"), (["to", "1994"], "MCMXCIV"), (["to", "3999"], "MMMCMXCIX"),
    (["from", "MCMXCIV"], "1994"), (["from", "XLII"], "42"), (["from", "MMMCMXCIX"], "3999"), (["from", "IV"], "4"),
    (["to", "0"], None), (["to", "4000"], None), (["to", "abc"], None), (["from", "ABC"], None), (["to"], None),
]


def passes(folder, args, expected):
    try:
        done = subprocess.run([sys.executable, "roman.py", *args], cwd=folder, capture_output=True, text=True,
                              timeout=20)
    except (OSError, subprocess.SubprocessError):
        return False
    if expected is None:
        return done.returncode == 2 and done.stderr.strip() != "" and done.stdout.strip() == ""
    return done.returncode == 0 and done.stdout.strip() == expected


if __name__ == "__main__":
    passed = 0
    if Path("roman.py").is_file():
        with tempfile.TemporaryDirectory() as folder:
            shutil.copy("roman.py", folder)
            passed = sum(passes(folder, args, expected) for args, expected in CASES)
    print(json.dumps({"score": round(passed / len(CASES), 3), "passed": passed, "cases": len(CASES)}))
