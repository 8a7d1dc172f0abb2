"""selection: which of the model's test files a change can affect, read from the code (never run it).

The cascade gate runs these first and, when the selection is sound, only these. A test file is affected when it
changed, or when a module of the codebase it imports changed, imports followed statically through the codebase
(`import a.b`, `from a import b`, relative imports; a name is looked up beside the importer too, as pytest's
append import mode finds a test's helpers). The selection is every test file when it cannot be sound:
- a changed file that is not a plain module: a conftest.py, an __init__.py of tests/, a file that is not .py
  (data) when some test reads files;
- a test, or a module it imports, that imports or runs code it names at run time (importlib, __import__, exec,
  eval, runpy, subprocess, os.system and the like): such a test is always selected.
A test that reads files (open, pathlib, os, shutil, glob, io) is selected whenever a file that is not .py changed.
"""
import ast
import sys
from functools import lru_cache

from .snapshots import object_path

RUNS_CODE = {"importlib", "runpy", "subprocess", "multiprocessing", "pkgutil", "ctypes"}  # modules that import or run
RUNS_CODE_CALLS = {"__import__", "exec", "eval", "compile"}
READS_FILES = {"pathlib", "os", "shutil", "glob", "io", "tempfile", "fileinput", "sqlite3", "zipfile", "tarfile"}
READS_FILES_CALLS = {"open"}


def affected(tests, changes, files):
    """(the test files `changes` can affect, in the order given, whether that selection is sound to run alone).
    `tests`: the test files; `files`: the candidate's {path: sha256}, its objects stored."""
    changed = {rel for rel, *_ in changes}
    if any(rel.rsplit("/", 1)[-1] == "conftest.py" for rel in changed):
        return list(tests), False
    importers, runs, reads = graph(files)
    chosen = reaching(changed, importers) | reaching(runs, importers)
    if any(not rel.endswith(".py") for rel in changed):
        chosen |= reaching(reads, importers)
    return [test for test in tests if test in chosen], True


def graph(files):
    """({file: the files that import it}, the files that run code they name at run time, the files that read files),
    over the candidate's .py files."""
    importers, runs, reads = {}, set(), set()
    for rel, sha in files.items():
        if not rel.endswith(".py"):
            continue
        names, calls = imports_of(sha, rel)
        if names & RUNS_CODE or calls & RUNS_CODE_CALLS:
            runs.add(rel)
        if names & READS_FILES or calls & READS_FILES_CALLS:
            reads.add(rel)
        for name in names:
            for path in paths_of(name, rel, files):
                importers.setdefault(path, set()).add(rel)
    return importers, runs, reads


def reaching(targets, importers):
    """The files whose imports, followed, reach one of `targets` (the targets among them)."""
    found, queue = set(), list(targets)
    while queue:
        rel = queue.pop()
        if rel not in found:
            found.add(rel)
            queue += importers.get(rel, ())
    return found


@lru_cache(maxsize=16384)  # objects never change: a file is parsed once for as long as it is in the codebase
def imports_of(sha, rel):
    """(the dotted names a file imports, relative ones made absolute; the names it calls), from its source."""
    try:
        tree = ast.parse(object_path(sha).read_bytes())
    except (SyntaxError, ValueError, OSError):
        return frozenset({"importlib"}), frozenset()  # cannot be read: treated as running anything
    package = rel.split("/")[:-1]
    names, calls = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[:len(package) - node.level + 1] + [node.module or ""]).strip(".") \
                if node.level else node.module or ""
            names |= {base} | {f"{base}.{alias.name}".strip(".") for alias in node.names}
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            calls.add(node.func.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os" \
                and node.attr in {"system", "popen", "spawnv", "spawnl", "execv", "execl", "execvp", "posix_spawn"}:
            names.add("subprocess")
    return frozenset(n.split(".")[0] if n.split(".")[0] in sys.stdlib_module_names else n for n in names), \
        frozenset(calls)


def paths_of(name, importer, files):
    """The codebase's files a dotted name may load: each package on the way and the module itself, looked up from
    the codebase's top and beside the importer."""
    parts, found = name.split("."), []
    for base in ["", importer.rsplit("/", 1)[0] + "/" if "/" in importer else ""]:
        for n in range(1, len(parts) + 1):
            stem = base + "/".join(parts[:n])
            found += [rel for rel in (f"{stem}.py", f"{stem}/__init__.py") if rel in files]
    return found
