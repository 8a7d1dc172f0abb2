"""evaluate: the person's score of the codebase, from an optional evaluate.py beside goal.md.

    found = score_of(files)    # {"score": 0.67, ...} or {"problem": one line, "output": its output}

evaluate.py is a keeper's file (settings.GUARDED): the model can never write or land it. After a change passes the
gate, the keeper lays the candidate out in the judged copy (.seed/judged/, read-only) and runs evaluate.py there,
confined like the gate's checks and within SEED_EVALUATE_SECONDS; the last line it prints is JSON with a number
"score" (and any other named numbers). With SEED_RATCHET=score a change whose score falls below the known-good
state's by more than SEED_SCORE_TOLERANCE is rolled back (see fallback.judge_score).
"""
import json
import math
import os
import sys

from . import terrarium
from .settings import JUDGED, PROBLEMS, ROOT, number

EVALUATOR = ROOT / "evaluate.py"
SECONDS = number("SEED_EVALUATE_SECONDS", 120, 1)  # the evaluator's time limit
TOLERANCE = number("SEED_SCORE_TOLERANCE", 0.0, 0, float)  # how far a score may fall under the ratchet
RATCHET = os.environ.get("SEED_RATCHET", "").strip() == "score"  # a change whose score falls is rolled back
if os.environ.get("SEED_RATCHET", "").strip() not in ("", "score"):
    PROBLEMS.append(f"SEED_RATCHET={os.environ['SEED_RATCHET']!r}: the one value it takes is  score  (or leave it "
                    "unset: the score is then only recorded)")
RUN = """import sys
source = sys.argv.pop(1)
sys.path.append(".")
sys.argv[0] = "evaluate.py"
exec(compile(source, "evaluate.py", "exec"), {"__name__": "__main__", "__file__": "evaluate.py"})
"""  # the person's evaluate.py, run in the judged copy (its folder the candidate's), its modules after the stdlib


def present():
    return EVALUATOR.is_file()


def score_of(files):
    """The scores evaluate.py gives the codebase `files` ({path: sha256}): {"score": n, other names: n}, or
    {"problem": one line, "output": the output that shows it}."""
    try:
        source = EVALUATOR.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        return {"problem": f"evaluate.py cannot be read ({getattr(error, 'strerror', None) or error})", "output": ""}
    terrarium.judged_copy(files)
    code, output = terrarium.run_bounded([sys.executable, "-P", "-c", RUN, source],
                                         terrarium.clean_env(GEMINI_API_BASE="http://127.0.0.1:9"), SECONDS,
                                         terrarium.policy(own_servers=True, judged=JUDGED), cwd=JUDGED)
    if code is None:
        return {"problem": f"evaluate.py took longer than {SECONDS} s (SEED_EVALUATE_SECONDS)", "output": output}
    lines = [line for line in output.splitlines() if line.strip()]
    try:
        found = json.loads(lines[-1]) if lines else None
    except ValueError:
        found = None
    if code != 0 or not isinstance(found, dict) or not number_like(found.get("score")):
        why = f"exit {code}" if code else "its last line is not JSON with a number \"score\""
        return {"problem": f"evaluate.py failed ({why})", "output": output}
    return {name: float(value) for name, value in found.items() if isinstance(name, str) and number_like(value)}


def number_like(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
