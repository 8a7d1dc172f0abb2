"""selection: which of the model's test files a change can affect, read from the code (never run it).

The cascade gate runs these first and, when the selection is sound, only these. A test file is affected when it
changed, or when a file of the codebase it depends on changed, dependencies followed statically through the
codebase: what it imports (`import a.b`, `from a import b`, relative imports; a name is looked up from the
codebase's top and from each folder above the importer, as pytest's append import mode and a conftest.py find
a test's helpers), every name it spells out in a string (`importorskip("calc")`, `monkeypatch.setattr("calc.add",
...)`, `mock.patch("calc.add")`), and the conftest.py and __init__.py files of its folder and the folders above.
A file that imports or runs code it names at run time (importlib, __import__, exec, eval, runpy, subprocess,
os.system and the like, builtins, sys.path), or imports a name that is neither the codebase's, the standard
library's nor an installed package's, is a dependency of unknown reach: the tests that reach it always run.
Every test runs when a file that is not a .py module changed (data may be read by anything) or a conftest.py did.
"""
import ast
import importlib.util
import re
import sys
from functools import lru_cache

from ..store.snapshots import folders_above, object_path

RUNS_CODE = {"importlib", "runpy", "subprocess", "multiprocessing", "pkgutil", "ctypes", "builtins", "imp", "code",
             "zipimport"}  # modules that import or run code they are given by name
RUNS_CODE_CALLS = {"__import__", "exec", "eval", "compile", "execfile"}
DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def affected(tests, changes, files):
    """(the test files `changes` can affect, in the order given, whether that selection is sound to run alone).
    `tests`: the test files; `files`: the candidate's {path: sha256}, its objects stored."""
    changed = {rel for rel, *_ in changes}
    if any(not rel.endswith(".py") or rel.rsplit("/", 1)[-1] == "conftest.py" for rel in changed):
        return list(tests), False
    importers, unknown = graph(files)
    chosen = reaching(changed, importers) | reaching(unknown, importers)
    return [test for test in tests if test in chosen], True


def graph(files):
    """({file: the files that depend on it}, the files whose dependencies cannot be known), over the .py files."""
    importers, unknown = {}, set()
    folders = folders_above(files)
    for rel, sha in files.items():
        if not rel.endswith(".py"):
            continue
        names, strings, calls, opaque = read_module(sha, rel)
        found = {name: paths_of(name, rel, files) for name in names}
        if opaque or names & RUNS_CODE or calls & RUNS_CODE_CALLS or \
                any(not paths and not installed(name) and not is_folder(name, rel, folders)
                    for name, paths in found.items()):
            unknown.add(rel)
        depends = {path for paths in found.values() for path in paths}
        depends |= {path for name in strings for path in paths_of(name, rel, files)}
        depends |= {path for path in around(rel) if path in files}
        for path in depends - {rel}:
            importers.setdefault(path, set()).add(rel)
    return importers, unknown


def reaching(targets, importers):
    """The files whose dependencies, followed, reach one of `targets` (the targets among them)."""
    found, queue = set(), list(targets)
    while queue:
        rel = queue.pop()
        if rel not in found:
            found.add(rel)
            queue += importers.get(rel, ())
    return found


@lru_cache(maxsize=512)  # objects never change: read once, so every reader sees the tree the compile check saw
def tree_of(sha):
    """A stored module's tree, or None when it does not parse, for any reason (not Python, or nested deeper than
    Python reads here: how deep depends on the stack the parse starts from, so two readers parsing it apart could
    disagree, and one crash the keeper). The one parse of a module every reader of its tree uses."""
    try:
        return ast.parse(object_path(sha).read_bytes())
    except (SyntaxError, ValueError, RecursionError, MemoryError, OSError):
        return None


@lru_cache(maxsize=16384)  # objects never change: a file is read once for as long as it is in the codebase
def read_module(sha, rel):
    """(the dotted names a file imports, relative ones made absolute; the dotted names its strings spell; the names
    it calls; whether it reaches past what can be read: sys.path, __builtins__, a file that does not parse)."""
    tree = tree_of(sha)
    if tree is None:
        return frozenset(), frozenset(), frozenset(), True
    package = rel.split("/")[:-1]
    names, strings, calls, opaque = set(), set(), set(), False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[:len(package) - node.level + 1] + [node.module or ""]).strip(".") \
                if node.level else node.module or ""
            names |= {base} | {f"{base}.{alias.name}".strip(".") for alias in node.names}
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and DOTTED.fullmatch(node.value):
            strings.add(node.value)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            calls.add(node.func.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and (node.value.id, node.attr) in {
                ("sys", "path"), ("sys", "modules"), ("os", "system"), ("os", "popen"), ("os", "execv"),
                ("os", "execvp"), ("os", "spawnv"), ("os", "posix_spawn")}:
            opaque = True
        elif isinstance(node, ast.Name) and node.id == "__builtins__":
            opaque = True
    names.discard("")
    return frozenset(n.split(".")[0] if n.split(".")[0] in sys.stdlib_module_names else n for n in names), \
        frozenset(strings), frozenset(calls), opaque


def paths_of(name, importer, files):
    """The codebase's files a dotted name may load: each package on the way and the module itself, looked up from
    the codebase's top and from each folder above the importer."""
    parts, found = name.split("."), []
    folders = importer.split("/")[:-1]
    for base in [""] + ["/".join(folders[:n]) + "/" for n in range(len(folders), 0, -1)]:
        for n in range(1, len(parts) + 1):
            stem = base + "/".join(parts[:n])
            found += [rel for rel in (f"{stem}.py", f"{stem}/__init__.py") if rel in files]
    return found


def is_folder(name, importer, folders):
    """Whether a dotted name is a folder of the codebase (a namespace package: importing it loads no file)."""
    above = importer.split("/")[:-1]
    return any(base + name.replace(".", "/") in folders
               for base in [""] + ["/".join(above[:n]) + "/" for n in range(len(above), 0, -1)])


def around(rel):
    """The conftest.py and __init__.py files a test in `rel` depends on: its folder's and those above it."""
    folders = rel.split("/")[:-1]
    return {f"{'/'.join(folders[:n])}/{name}".lstrip("/") for n in range(len(folders) + 1)
            for name in ("conftest.py", "__init__.py")}


@lru_cache(maxsize=4096)
def installed(name):
    """Whether a top-level name is the standard library's or an installed package's (found without importing it)."""
    top = name.split(".")[0]
    if top in sys.stdlib_module_names or top in sys.builtin_module_names:
        return True
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return False
