"""export: the landed history as a git repository, so `git log -p`, gitk or a forge can browse the growth.

    export_git(root, dest)    a one-line summary; a ValueError with a one-line message for a dest it refuses

One commit per landed iteration, genesis first, each holding the codebase as that landing left it (from
the snapshots), dated with the iteration's time, its message the tasks and the outcome. Built in one pass
by `git fast-import` (each content streamed once from backups/objects) on a branch of its own, BRANCH, then
fast-forwarded into main, the branch checked out, so the files are there to look at. Each commit names
its iteration (`Iteration: N`); exporting again reads the last one and adds only the landings since. A
landing whose state is no longer kept (pruned) is folded into the next landing that is. It refuses the
workspace, a folder inside it, a repository it did not make, and a folder holding anything else.
"""
import re
import subprocess
import tempfile
from pathlib import Path

from . import history
from ..store.journal import one_line
from ..names import refusal
from ..scrub import printable
from ..settings import read_stamp
from ..store.snapshots import Reader
from .status import cut_at_a_word

# --- settings ---------------------------------------------------------------------------------
BRANCH = "refs/seed/landed"    # the exported history; main is fast-forwarded to it
MAKER = "seed.workspace"       # the git config key naming the workspace an export was made from
EMAIL = "seed@localhost"       # the authors' address (the author's name is the model that wrote the change)
COMMITTER = b"fallback.py <fallback@localhost>"
MENTIONED = 10                 # iterations that landed nothing, named in the message of the landing after them
SUBJECT = 72                   # characters of the first task's words kept in a commit's subject, at most


def export_git(root, dest):
    """Add the landings not exported yet to the repository in dest (made if new); what was done, in a line."""
    root, dest = Path(root).resolve(), Path(dest).resolve()
    earlier = check_destination(root, dest)
    sections, snapshots = history.read_iterations(root), Reader(root).snapshots()
    if not snapshots:
        raise ValueError(f"{root} has no snapshots to export: run some iterations first")
    if not earlier:
        make_repository(root, dest)
    last = exported_iteration(dest)
    commits, waiting = plan_commits(sections, snapshots, last)
    left_out = import_commits(root, dest, commits, incremental=last is not None) if commits else set()
    note = (fast_forward(dest) if commits else "") + (f"; {len(left_out)} file(s) left out, their names outside the "
                                                      f"allow-list (such as {sorted(left_out)[0]})" if left_out else "")
    return describe_export(dest, commits, waiting, last, note)


def check_destination(root, dest):
    """Whether dest holds an earlier export of this workspace; a ValueError for a dest refused."""
    if dest == root or root in dest.parents:
        raise ValueError(f"{dest} is the workspace or inside it: export to a folder outside {root}")
    if dest.exists() and not dest.is_dir():
        raise ValueError(f"{dest} is a file: export to a new or empty folder")
    if (dest / ".git").exists():
        maker = git(dest, "config", "--get", MAKER, check=False).strip()
        if not maker:
            raise ValueError(f"{dest} is a git repository this export did not make: export to a new or empty folder")
        if maker != str(root):
            raise ValueError(f"{dest} holds the export of another workspace ({maker}): export to a new folder")
        return True
    if dest.exists() and any(dest.iterdir()):
        raise ValueError(f"{dest} is not empty and holds no earlier export: export to a new or empty folder")
    return False


def git(repo, *args, check=True):
    """The output of a git command in repo; a ValueError if git is missing or (with check) the command fails."""
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True)
    except FileNotFoundError:
        raise ValueError("git is not installed: install it, then export again") from None
    if check and done.returncode:
        raise ValueError(f"git {args[0]} failed in {repo}: {one_line(done.stderr.decode(errors='replace'))}")
    return done.stdout.decode(errors="replace")


def make_repository(root, dest):
    dest.mkdir(parents=True, exist_ok=True)
    git(dest, "init", "-q")
    git(dest, "symbolic-ref", "HEAD", "refs/heads/main")
    git(dest, "config", MAKER, str(root))


def exported_iteration(dest):
    """The iteration the last export ended with (0 for genesis alone), or None if nothing is exported yet."""
    if not git(dest, "rev-parse", "--verify", "-q", BRANCH, check=False).strip():
        return None
    numbers = re.findall(r"^Iteration: (\d+)$", git(dest, "log", "-1", "--format=%B", BRANCH), re.M)
    return int(numbers[-1]) if numbers else 0


def plan_commits(sections, snapshots, last):
    """([(snapshot, [the sections it tells of: its landings, and the iterations before them that landed
    nothing])], [the landings after those, that no snapshot holds yet]): genesis first when nothing is
    exported yet, then the landings after iteration `last`."""
    pairs = history.pair_landings(sections, snapshots)
    genesis = next((e for e in snapshots if e["kind"] == "genesis"), snapshots[0])
    commits, waiting = ([] if last is not None else [(genesis, [])]), []
    for section in [s for s in sections if s["number"] > (last or 0)]:
        waiting.append(section)
        after = pairs[section["number"]][1] if section["kind"] == "landed" else None
        if after:
            commits.append((after, waiting))
            waiting = []
    return commits, [s for s in waiting if s["kind"] == "landed"]


def import_commits(root, dest, commits, incremental):
    """Stream the commits to `git fast-import`: each content once, each tree as the change from the last. A name
    outside the allow-list (names.py), which a snapshot of an older keeper may hold (a .git file: git would refuse
    to check the branch out), is left out; returns those left out."""
    marks, files, left_out = {}, None, set()  # sha256 of a content -> its mark; the files of the commit before
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(["git", "-C", str(dest), "fast-import", "--quiet", "--done"],
                                   stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=errors)
        try:
            for n, (entry, told) in enumerate(commits):
                now = Reader(root).files_of(entry)
                left_out |= {printable(rel) for rel in now if refusal(rel)}
                now = {rel: sha for rel, sha in now.items() if not refusal(rel)}
                write_blobs(root, process.stdin, now, files or {}, marks)
                process.stdin.write(commit_command(entry, told, incremental and n == 0))
                process.stdin.write(tree_changes(now, files, marks))
                files = now
            process.stdin.write(b"done\n")
            process.stdin.close()
        except BrokenPipeError:
            pass  # fast-import stopped: its own message says why
        if process.wait():
            errors.seek(0)
            raise ValueError(f"git fast-import failed in {dest}: {one_line(errors.read().decode(errors='replace'))}")
    return left_out


def write_blobs(root, stream, now, before, marks):
    for rel, sha in now.items():
        if before.get(rel) != sha and sha not in marks:
            marks[sha] = len(marks) + 1
            data = Reader(root).object_path(sha).read_bytes()
            stream.write(b"blob\nmark :%d\ndata %d\n%s\n" % (marks[sha], len(data), data))


def commit_command(entry, told, continues):
    """The header of a commit: author (the model), dates (the landing's), message, and its parent."""
    when = (told[-1]["time"] if told else None) or read_stamp(entry["time"])
    stamp = f"{int(when.timestamp())} +0000".encode() if when else b"0 +0000"
    model = (told[-1]["model"] if told else "") or "seed"
    author = re.sub(r"[<>]", "", printable(model)).encode() + f" <{EMAIL}>".encode()
    message = printable(commit_message(entry, told), keep="\n").encode()  # git log shows it on a terminal
    parent = f"from {BRANCH}^0\n".encode() if continues else b""
    return (b"commit %s\nauthor %s %s\ncommitter %s %s\ndata %d\n%s\n%s" %
            (BRANCH.encode(), author, stamp, COMMITTER, stamp, len(message), message, parent))


def tree_changes(now, before, marks):
    """The file commands that turn the tree before (None: start from nothing) into `now`."""
    lines = [b"deleteall"] if before is None else [b"D " + quoted(rel) for rel in before if rel not in now]
    lines += [b"M 100644 :%d %s" % (marks[sha], quoted(rel)) for rel, sha in now.items()
              if before is None or before.get(rel) != sha]
    return b"\n".join(lines) + b"\n\n"


def quoted(path):
    """A path in fast-import's C-style quotes (quotes, backslashes and control bytes escaped)."""
    out = bytearray(b'"')
    for byte in path.encode("utf-8", "surrogateescape"):
        out += b"\\" + bytes([byte]) if byte in b'"\\' else b"\\%03o" % byte if byte < 32 or byte == 127 \
            else bytes([byte])
    return bytes(out + b'"')


def commit_message(entry, told):
    """The subject (the iteration and its first task), each landing's outcome, tasks, done tasks and files,
    what the iterations before it that landed nothing came to, and the trailers."""
    if not told:
        return f"Genesis: the codebase before iteration 1\n\nSnapshot: {entry['id']}\nIteration: 0\n"
    landed = [s for s in told if s["kind"] == "landed"]
    numbers = [s["number"] for s in landed]
    subject = (f"Iterations {and_list(numbers)} — landed" if len(landed) > 1 else
               f"Iteration {numbers[0]}: {cut_at_a_word(landed[0]['tasks'][0], SUBJECT)}" if landed[0]["tasks"] else
               f"Iteration {numbers[0]} — {landed[0]['outcome']}")
    body = [describe_iteration(s) for s in landed]
    if len(landed) > 1:
        body.insert(0, "The snapshots between these landings are no longer kept: this commit holds them all.")
    others = [f"{s['number']} {s['outcome']}" for s in told if s["kind"] != "landed"]
    if others:
        body.append("Before it, iterations that landed nothing: " + "; ".join(others[:MENTIONED])
                    + (f"; and {len(others) - MENTIONED} more" if len(others) > MENTIONED else ""))
    return f"{subject}\n\n" + "\n\n".join(body) + f"\n\nIteration: {told[-1]['number']}\nSnapshot: {entry['id']}\n"


def describe_iteration(section):
    lines = [f"Iteration {section['number']} — {section['outcome']}"]
    lines += ["Tasks:"] + [f"{n}. {task}" for n, task in enumerate(section["tasks"], 1)] if section["tasks"] else []
    lines += [f"{label}: {value}" for label, value in section["facts"] if label in ("Done from pending_tasks.md",
                                                                                      "Files")]
    return "\n".join(lines)


def and_list(numbers):
    return ", ".join(map(str, numbers[:-1])) + f" and {numbers[-1]}"


def fast_forward(dest):
    """Bring main and the files in dest up to the export; a note if main went its own way."""
    merged = subprocess.run(["git", "-C", str(dest), "merge", "--ff-only", "-q", BRANCH], capture_output=True)
    return "" if merged.returncode == 0 else (f"; main has changes of its own, so it was left as it was (the "
                                              f"history is in {BRANCH})")


def describe_export(dest, commits, waiting, last, note):
    landed = [s["number"] for _, told in commits for s in told if s["kind"] == "landed"]
    pending = (f"; iteration {waiting[-1]['number']} landed but no snapshot holds it yet: the next export adds it"
               if waiting else "")
    if not commits:
        return f"{dest} is up to date (exported to iteration {last}){pending}"
    done = "exported" if last is None else "added"
    upto = f", to iteration {landed[-1]}" if landed else ""
    return (f"{done} {len(commits)} commit(s) to {dest} ({len(landed)} landed iteration(s){upto}); "
            f"browse with  git -C {dest} log -p{note}{pending}")
