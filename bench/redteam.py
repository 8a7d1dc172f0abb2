"""Red team: every attack of the project's own red-team suites, run end to end, and whether each held.

    python bench/redteam.py            # prints one line per attack, then held/total and the run time

The attacks are tests (supervisor/tests/test_attacks.py: what a run leaves in the working copy and what the code the
gate runs does; supervisor/tests/test_confinement.py: the run's reach, its environment, its processes and its network;
supervisor/tests/test_allowlists.py: the names that land, recovery, secrets by value, control characters, /etc, UNIX
sockets; supervisor/tests/test_verdict.py: what forges the gate's verdict, the ratchet's count or the person's score;
supervisor/tests/test_redteam.py: what a red team that had not seen the change found: a record nested past Python's
reach, the modes and attributes Landlock does not check, changes shaped for difflib), each driving `python fallback.py`
against the fake Gemini and asserting what the person sees: the folder holds only what passed the gate, nothing outside
it changed, no secret reached a file or a prompt, no process is left, the loop went on. An attack held when its test
passed. Exit status 1 when one did not.
"""
import sys
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SUITES = ["supervisor/tests/test_attacks.py", "supervisor/tests/test_confinement.py",
          "supervisor/tests/test_allowlists.py", "supervisor/tests/test_verdict.py", "supervisor/tests/test_redteam.py"]


class Tally:
    """Each attack's outcome, as pytest reports it."""

    def __init__(self):
        self.outcomes = {}

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or report.outcome != "passed":
            self.outcomes[report.nodeid] = "held" if report.outcome == "passed" else report.outcome.upper()


def main():
    suites = [str(REPO / suite) for suite in SUITES if (REPO / suite).is_file()]
    tally, began = Tally(), time.monotonic()
    with tempfile.TemporaryDirectory(prefix="seed-redteam-") as temp:
        pytest.main(["-q", "-p", "no:cacheprovider", "--basetemp", temp, "--no-header", "-rN", *suites],
                    plugins=[tally])
    seconds = time.monotonic() - began
    for attack, outcome in tally.outcomes.items():
        print(f"{outcome:<8} {attack.split('::', 1)[1]}")
    held = sum(outcome == "held" for outcome in tally.outcomes.values())
    print(f"held {held}/{len(tally.outcomes)} attacks in {seconds:.0f} s ({', '.join(Path(s).name for s in suites)})")
    return 0 if held == len(tally.outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
