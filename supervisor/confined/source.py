"""source: what the model's tests define, and what its conftest.py files may do, read from their source (never run).

The gate asks it twice, outside any process the model's code runs in. Before that code runs: whether each conftest.py
(at any depth, any case) keeps to what a model's conftest may do, an allow-list: it binds names that neither start
with `pytest_` nor are a module's own machinery (`__getattr__`, `__dir__`, ...) but for the hooks CONFTEST_HOOKS,
defined undecorated; it imports the standard library, pytest and the codebase's own modules, each by name. And
whether a test module or a conftest names plugins to load (`pytest_plugins`). After the tests ran: which test
functions each test file defines (its own `def`s, within classes as pytest names them), what the ratchet counts;
and whether a test pytest reported is defined anywhere at all: one that is not was made up. And where a name the
tests used without importing it is defined in the codebase, for the failing output (import_hints).
"""
import ast
import re
import sys
from functools import lru_cache

from .check import CONFTEST_HOOKS
from ..store.journal import NAME_ERROR
from .selection import installed, tree_of

IMPORTABLE = {"pytest"}  # besides the standard library and the codebase's own modules
RULE = ("A conftest.py may define fixtures, helpers and constants, import the standard library, pytest and the "
        f"codebase's own modules by name, and implement only these of pytest's hooks, undecorated: "
        f"{', '.join(sorted(CONFTEST_HOOKS))}. Hooks that change what pytest collects, runs or reports, plugins "
        "(pytest_plugins, or registered by code), pytest's internals (_pytest, pluggy) and changes to pytest's own "
        "code are the keeper's: the gate's verdict must stand for the tests as written.")


def refused(files):
    """The first way the candidate's conftest.py files or test modules step outside the allow-list, or ''.
    `files`: the candidate's {path: sha256}, its objects stored."""
    codebase = {part.removesuffix(".py") for rel in files for part in rel.split("/")}  # a helper beside the tests too
    for rel in sorted(files):
        name = rel.rsplit("/", 1)[-1].lower()
        if name == "conftest.py":
            why = conftest_refusal(files[rel], frozenset(codebase))
        elif rel.endswith(".py") and rel.startswith("tests/"):
            why = "pytest_plugins loads plugins" if "pytest_plugins" in bound_names(files[rel]) else ""
        else:
            continue
        if why:
            return f"{rel}: {why}"
    return ""


def parsed(sha):
    """A module's tree, or an empty one when it does not parse (the compile check and pytest say why)."""
    return tree_of(sha) or ast.Module(body=[], type_ignores=[])


@lru_cache(maxsize=4096)  # objects never change: a file is read once for as long as it is in the codebase
def conftest_refusal(sha, codebase):
    """Why a conftest.py steps outside the allow-list, or ''."""
    tree = parsed(sha)
    found = [import_refusal(node, codebase) for node in ast.walk(tree)]  # in a fixture too
    found += [binding_refusal(node) for node in module_level(tree.body)]
    return next((why for why in found if why), "")


def module_level(body):
    """The statements run when a module is imported, through the blocks (if, try, with, for) that hold them."""
    for node in body:
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                yield from module_level(getattr(node, field, None) or [])


def import_refusal(node, codebase):
    if not isinstance(node, (ast.Import, ast.ImportFrom)) or getattr(node, "level", 0):
        return ""
    if isinstance(node, ast.ImportFrom) and any(alias.name == "*" for alias in node.names):
        return f"from {node.module} import *: a conftest.py names what it imports"
    for module in [node.module] if isinstance(node, ast.ImportFrom) else [alias.name for alias in node.names]:
        top = (module or "").split(".")[0]
        if top not in sys.stdlib_module_names and top not in IMPORTABLE and (top not in codebase or installed(top)):
            return f"imports {module}, which is neither the standard library, pytest nor the codebase's"
    return ""  # (a folder of the codebase named like an installed package is not what that name imports)


def binding_refusal(node):
    for name, decorated in bindings(node):
        if name in CONFTEST_HOOKS and not decorated:
            continue
        if name in CONFTEST_HOOKS:
            return f"{name} is decorated: a conftest.py implements its hooks as plain functions"
        if name.startswith("pytest_"):
            return f"{name}: a conftest.py may implement only {', '.join(sorted(CONFTEST_HOOKS))} of pytest's hooks"
        if re.fullmatch(r"__\w+__", name) and name not in ("__all__", "__doc__"):
            return f"{name}: a conftest.py leaves its module's own machinery as Python makes it"
    return ""


def bindings(node):
    """(name, whether decorated) for each name a module-level statement binds."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [(node.name, bool(node.decorator_list))]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [((alias.asname or alias.name).split(".")[0], False) for alias in node.names]
    targets = {ast.Assign: "targets", ast.AnnAssign: "target", ast.AugAssign: "target", ast.For: "target",
               ast.AsyncFor: "target"}.get(type(node))
    found = getattr(node, targets, []) if targets else [item.optional_vars for item in getattr(node, "items", [])]
    found = found if isinstance(found, list) else [found]
    names = [n.id for target in found if target is not None for n in ast.walk(target) if isinstance(n, ast.Name)]
    names += [handler.name for handler in getattr(node, "handlers", []) if handler.name]
    names += [n.target.id for n in ast.walk(node) if isinstance(n, ast.NamedExpr)]
    return [(name, False) for name in names]


@lru_cache(maxsize=16384)
def bound_names(sha):
    """Every name a module binds at its top (through its blocks)."""
    tree = parsed(sha)
    return frozenset(name for node in module_level(tree.body) for name, _ in bindings(node))


@lru_cache(maxsize=16384)
def defined_names(sha):
    """The names a module defines at its top (def, class, assignment: not the names it imports)."""
    return frozenset(name for node in module_level(parsed(sha).body)
                     if not isinstance(node, (ast.Import, ast.ImportFrom)) for name, _ in bindings(node))


def import_hints(output, files):
    """The output with each NameError of a name that a top-level module of the codebase (not the seed) defines told
    where it is: the 1.5B's tests called add_note, defined in notes.py, without importing it, three times running."""
    def hinted(match):
        homes = [rel[:-3] for rel, sha in sorted(files.items()) if rel.endswith(".py") and "/" not in rel
                 and rel != "seed.py" and match[2] in defined_names(sha)]
        return f"{match[0]}. Did you forget 'from {homes[0]} import {match[2]}'?" if homes else match[0]
    return NAME_ERROR.sub(hinted, output)


@lru_cache(maxsize=16384)
def defined_tests(sha):
    """The tests a test file defines, as pytest names them after the file's path: `test_a`, `TestB::test_c`."""
    tree = parsed(sha)
    return frozenset(defs(tree.body, ""))


def may_hold_tests(sha):
    """Whether a test file defines a test, or a class named Test... that may inherit some (a file that does not
    compile is the compile check's)."""
    return bool(defined_tests(sha)) or any(name.startswith("Test") for name in bound_names(sha))


def defs(body, prefix):
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            yield prefix + node.name
        elif isinstance(node, ast.ClassDef):
            yield from defs(node.body, f"{prefix}{node.name}::")
        elif not isinstance(node, (ast.Import, ast.ImportFrom)):
            for field in ("body", "orelse", "finalbody", "handlers"):
                yield from defs(getattr(node, field, None) or [], prefix)


@lru_cache(maxsize=16384)
def every_name(sha):
    """Every name a module defines or binds anywhere: where a test pytest reports may come from (inherited from a
    class of another module, imported, assigned)."""
    tree = parsed(sha)
    names = {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                       ast.ClassDef))}
    names |= {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    names |= {(alias.asname or alias.name).split(".")[-1] for node in ast.walk(tree)
              if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
    return frozenset(names)


def key_of(test):
    """(its file, the test as its file names it, without parameters): 'tests/t.py::C::test_a[1]' gives
    ('tests/t.py', 'C::test_a')."""
    path, _, name = test.partition("::")
    return path, name.split("[", 1)[0]


def made_up(tests, files, run):
    """The tests (pytest's ids) that no source defines: not of a test file that ran, or named nowhere in the
    codebase. `run`: the test files that ran; `files`: the candidate's {path: sha256}."""
    found, known = [], None
    for test in dict.fromkeys(tests):
        path, name = key_of(test)
        if path in run and path in files and name in defined_tests(files[path]):
            continue
        if known is None:
            known = set().union(*(every_name(sha) for rel, sha in files.items() if rel.endswith(".py")))
        if path not in run or path not in files or not name or not set(name.split("::")) <= known:
            found.append(test)
    return found
