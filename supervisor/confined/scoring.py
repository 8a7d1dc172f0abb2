"""scoring: the person's evaluate.py, run by this file's path in one confined child in the judged copy (evaluate.py).

    python -P scoring.py SOURCE SCORE TOKEN

SOURCE (evaluate.py's text) runs as `python evaluate.py` would there, the folder's modules after the standard
library. When its code has run to its end, the last line it printed through print or sys.stdout is what it said,
and is told on the keeper's own channel: descriptor SCORE, the line signed with the token read once from descriptor
TOKEN (check.teller). What is printed after that (at exit, by a module of the model's, or by a process it left)
reaches the output and never that channel. Imports only the standard library and check.py, by its path.

The token is held where the scored code cannot read it: this process makes itself non-dumpable (Linux's
PR_SET_DUMPABLE) before it reads the token, so a process evaluate.py starts (the candidate, run from outside as the
starter does) can neither read its memory (/proc/PID/mem, process_vm_readv, ptrace) nor open its descriptors
(/proc/PID/fd/N); the channel is not inherited by anything it starts; and the keeper takes exactly one signed line
(evaluate.score_of). Code that evaluate.py imports runs in this process and can say what it likes: a score the model
cannot forge comes from an evaluate.py that runs the candidate as a subprocess.
"""
import ctypes
import importlib.util
import os
import sys

PR_SET_DUMPABLE = 4  # linux/prctl.h


def hold_privately():
    """No process of the same user may read this one's memory or descriptors from now on (Linux; elsewhere a no-op:
    macOS's sandbox denies the scored code other processes' memory)."""
    if sys.platform.startswith("linux") and ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0):
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


class LastLine:
    """sys.stdout as evaluate.py prints to it, keeping the last line that is not blank."""

    def __init__(self, stream):
        self.stream, self.line, self.open = stream, "", ""

    def write(self, text):
        *done, self.open = (self.open + text).split("\n")
        self.line = next((line for line in reversed(done) if line.strip()), self.line)
        return self.stream.write(text)

    def said(self):
        return self.open if self.open.strip() else self.line

    def __getattr__(self, name):
        return getattr(self.stream, name)


def main(source, score, token):
    """Run evaluate.py's text as __main__, then tell the last line it printed; exit as it asked to."""
    hold_privately()
    spec = importlib.util.spec_from_file_location("check", os.path.join(os.path.dirname(__file__), "check.py"))
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    tell = check.teller(int(score), int(token))
    printed = sys.stdout = LastLine(sys.stdout)
    sys.argv[:] = ["evaluate.py"]
    sys.path.append(".")
    try:
        exec(compile(source, "evaluate.py", "exec"), {"__name__": "__main__", "__file__": "evaluate.py"})
    except SystemExit as done:
        if done.code not in (None, 0):
            raise
    printed.flush()
    tell(said=printed.said())


if __name__ == "__main__":
    main(*sys.argv[1:])
