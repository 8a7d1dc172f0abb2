"""evaluate: the person's score of the codebase, from an optional evaluate.py beside goal.md.

    found = score_of(files)    # {"score": 0.67, ...} or {"problem": one line, "output": its output}

evaluate.py is a keeper's file (settings.GUARDED): the model can never write or land it. After a change passes the
gate, the keeper lays the candidate out in the judged copy (.seed/judged/, read-only) and runs evaluate.py there
(scoring.py), confined like the gate's checks and within SEED_EVALUATE_SECONDS. What it says is the last line it
printed itself (print, sys.stdout) by the end of its code, JSON with a number "score" (and any other named numbers),
and it comes back on a channel of the keeper's own, not from the output its children share: a line on that channel
the child did not sign, or a score printed after evaluate.py's own, is the scored code tampering with its score.
With SEED_RATCHET=score a change whose score falls below the known-good state's by more than SEED_SCORE_TOLERANCE is
rolled back (see fallback.judge_score).
"""
import json
import math
import os
import sys
from pathlib import Path

from . import terrarium
from .check import listen
from ..kinds import Failure
from ..settings import JUDGED, PROBLEMS, ROOT, number

EVALUATOR = ROOT / "evaluate.py"
SECONDS = number("SEED_EVALUATE_SECONDS", 120, 1)  # the evaluator's time limit
TOLERANCE = number("SEED_SCORE_TOLERANCE", 0.0, 0, float)  # how far a score may fall under the ratchet
RATCHET = os.environ.get("SEED_RATCHET", "").strip() == "score"  # a change whose score falls is rolled back
if os.environ.get("SEED_RATCHET", "").strip() not in ("", "score"):
    PROBLEMS.append(f"SEED_RATCHET={os.environ['SEED_RATCHET']!r}: the one value it takes is  score  (or leave it "
                    "unset: the score is then only recorded)")
LAND_ON = os.environ.get("SEED_LAND_ON", "").strip() or "tests"  # the selection rule: every test passes (the
# default), or the person's score decides (iteration.settle: tests a change adds that fail are left out, the score
# must not fall); recorded with the run's settings
if LAND_ON not in ("tests", "score"):
    PROBLEMS.append(f"SEED_LAND_ON={os.environ['SEED_LAND_ON']!r}: it takes  tests  (the default: every test passes) "
                    "or  score  (evaluate.py decides; a test the change adds that fails is left out)")
SCORING = Path(__file__).with_name("scoring.py")  # the child that runs evaluate.py and tells what it said


def present():
    return EVALUATOR.is_file()


def score_of(files):
    """The scores evaluate.py gives the codebase `files` ({path: sha256}): {"score": n, other names: n}, or
    {"problem": one line, "output": the output that shows it}, with "tampered": what was found, when the code it
    scored reached for the score's channel or printed a score after evaluate.py's own."""
    try:
        source = EVALUATOR.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        return {"problem": f"evaluate.py cannot be read ({getattr(error, 'strerror', None) or error})", "output": ""}
    terrarium.judged_copy(files)
    rules = terrarium.policy(own_servers=True, judged=JUDGED)
    rules["read"] += [str(SCORING), str(SCORING.with_name("check.py"))]  # the keeper's files the child reads
    heard, (code, output) = listen(lambda channel, token: terrarium.run_bounded(
        [sys.executable, "-P", str(SCORING), source, str(channel), str(token)],
        terrarium.clean_env(GEMINI_API_BASE="http://127.0.0.1:9"), SECONDS, rules, cwd=JUDGED,
        pass_fds=(channel, token)))
    told = [fact["said"] for fact in heard.facts if "said" in fact]
    said = told[0] if len(told) == 1 else None
    tampered = forged(heard, told, output)
    if tampered:
        return {"problem": f"{Failure.TAMPERED.value}: {tampered}", "tampered": tampered, "output": output}
    if code is None:
        return {"problem": f"evaluate.py took longer than {SECONDS} s (SEED_EVALUATE_SECONDS)", "output": output}
    found = scores_in(said)
    if code != 0 or found is None:
        why = f"exit {code}" if code else "its last line is not JSON with a number \"score\""
        return {"problem": f"evaluate.py failed ({why})", "output": output}
    return found


def forged(heard, told, output):
    """What shows the scored code reached for the score, or '': lines on the channel that the child did not sign,
    more than one signed verdict (the one scoring.py tells when evaluate.py has run to its end: another came from
    code that found the means to sign), or a score printed after evaluate.py's own (the last line of the output,
    where evaluate.py's should be)."""
    if heard.foreign:
        return f"{heard.foreign} line(s) on the score's channel that evaluate.py did not write"
    if len(told) > 1:
        return f"{len(told)} signed scores on the score's channel where evaluate.py tells one"
    said = told[0] if told else None
    lines = [line for line in output.splitlines() if line.strip()]
    last = scores_in(lines[-1]) if lines else None
    if said is not None and last is not None and last != scores_in(said):
        return f"a score of {last['score']:g} was printed after evaluate.py's own ({said.strip()[:200]})"
    return ""


def scores_in(line):
    """{"score": n, other names: n} from a line of JSON with a number "score", or None."""
    try:
        found = json.loads(line) if line else None
    except ValueError:
        return None
    if not isinstance(found, dict) or not number_like(found.get("score")):
        return None
    return {name: float(value) for name, value in found.items() if isinstance(name, str) and number_like(value)}


def number_like(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
