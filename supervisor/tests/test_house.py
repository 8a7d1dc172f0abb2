"""The house's shape, read from the code: how deep its imports go, which rooms may import which, and that importing
the keeper does nothing (no file of the workspace read): the settings are read when fallback.py starts."""
import ast
import dataclasses
import functools
import importlib
import json
import subprocess
import sys

import pytest

from conftest import REPO, fresh_workspace, load_keeper

ROOMS = {p.stem: p for p in (REPO / "supervisor").rglob("*.py")
         if p.stem != "__init__" and p.relative_to(REPO / "supervisor").parts[0] != "tests"}
FLOORS = {p.parent.name for p in ROOMS.values() if p.parent.name != "supervisor"}  # its subpackages
ROOMS["fallback"] = REPO / "fallback.py"
LONGEST = 10  # rooms in the longest chain of imports, fallback.py's included
BASE = {"settings", "kinds", "events", "outcomes", "formats", "check", "sandbox", "envfile", "preloaded", "scoring"}
VIEWS = {"cli", "console", "report", "compare", "status", "history", "export"}  # what a person reads; the rooms
# below tell what happens through events.py, and the door (fallback.py) gives the console as their listener
STORE_AND_DOING = {"record", "snapshots", "journal", "ledger", "untrusted", "gate", "terrarium", "zygote",
                   "source", "selection", "evaluate", "blame"}


def imports_of(path):
    """The keeper's rooms a file imports, by name."""
    found = set()
    for node in ast.walk(ast.parse(path.read_bytes())):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("supervisor")):
            module = (node.module or "").removeprefix("supervisor").strip(".").split(".")[-1]
            found |= {module} if module and module not in FLOORS else {alias.name for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[-1] for a in node.names if a.name.startswith("supervisor.")}
    return found & set(ROOMS)


GRAPH = {room: imports_of(path) for room, path in ROOMS.items()}


@functools.cache
def chain(room):
    """The longest chain of imports from room down, room first."""
    return max(([room, *chain(below)] for below in GRAPH[room]), key=len, default=[room])


def test_no_chain_of_imports_is_longer_than_ten_rooms():
    longest = max((chain(room) for room in GRAPH), key=len)
    assert len(longest) <= LONGEST, " -> ".join(longest)


def test_the_reading_of_imports_sees_every_arrow():
    """The reader above is what the rules below stand on: it finds each form of import the keeper uses."""
    assert {"cli", "kinds", "iteration", "envfile"} <= GRAPH["fallback"]
    assert {"snapshots", "sandbox", "untrusted"} <= GRAPH["terrarium"] and "kinds" in GRAPH["record"]


def test_base_rooms_import_nothing_of_the_keeper_and_the_store_never_a_view_or_the_policy():
    assert {room: GRAPH[room] for room in BASE if GRAPH[room]} == {}
    wrong = {room: GRAPH[room] & (VIEWS | {"iteration", "gateway", "backends"}) for room in STORE_AND_DOING}
    assert {room: below for room, below in wrong.items() if below} == {}
    assert GRAPH["iteration"] & (VIEWS | {"gateway", "backends"}) == set()  # the policy is handed the gateway


def test_the_subpackages_stand_on_each_other_one_way_and_the_rooms_at_the_top_below_them_are_the_base():
    """store/ at the bottom; confined/ and gateway/ on it; experiments/ on those; views/ on all: no two subpackages
    import each other, directly or round about. At the top, beside the policy (iteration, recovery) that carries
    them out, stand the rooms every floor reads, which import no subpackage."""
    floor = {room: path.parent.name for room, path in ROOMS.items() if path.parent.name in FLOORS}
    above = {(floor[room], floor[below]) for room, rooms in GRAPH.items() if room in floor
             for below in rooms if below in floor and floor[below] != floor[room]}
    reach = set(above)
    while True:
        more = {(a, d) for a, b in reach for c, d in reach if b == c} - reach
        if not more:
            break
        reach |= more
    assert {pair for pair in reach if pair[0] == pair[1]} == set(), sorted(above)
    assert ("confined", "store") in above and ("views", "gateway") in above  # the reading sees the floors
    top = {room for room, path in ROOMS.items() if path.parent == REPO / "supervisor"} - {"iteration", "recovery"}
    assert {room: GRAPH[room] & set(floor) for room in top if GRAPH[room] & set(floor)} == {}


def test_importing_every_part_of_the_keeper_reads_no_file_of_the_workspace(tmp_path):
    """Not .env, not the log, the index or the record: only the keeper's own code is opened, to be imported."""
    root = fresh_workspace(tmp_path / "workspace")
    (root / ".env").write_text("GEMINI_API_KEY=AIzaSyIMPORT-ONLY-0000000000000000000\nSEED_LOG_MB=3\n")
    (root / "backups").mkdir()
    (root / "backups" / "index.json").write_text("{}")
    names = sorted(".".join(path.relative_to(REPO).with_suffix("").parts) for room, path in ROOMS.items()
                   if room != "fallback")  # every module of the keeper, its subpackages' too
    program = f"""
import importlib, importlib.util, json, os, sys
root = {str(root)!r}
names = {names!r}
opened = []
sys.addaudithook(lambda event, args: opened.append(str(args[0])) if event in ("open", "os.listdir", "os.scandir")
                 and isinstance(args[0], (str, bytes, os.PathLike)) else None)
spec = importlib.util.spec_from_file_location("supervisor", root + "/supervisor/__init__.py",
                                              submodule_search_locations=[root + "/supervisor"])
sys.modules["supervisor"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sys.modules["supervisor"])
for name in names:
    importlib.import_module(name)
print(json.dumps([path for path in opened if os.fsdecode(path).startswith(root)]))
"""
    done = subprocess.run([sys.executable, "-P", "-c", program], cwd=root, capture_output=True, text=True,
                          timeout=60, env={"PATH": "/usr/bin:/bin", "SEED_LOG_MB": "2"})
    assert done.returncode == 0, done.stderr
    opened = json.loads(done.stdout)
    folders = {str(root / "supervisor"), *(str(root / "supervisor" / floor) for floor in FLOORS)}
    code = [path for path in opened if path.startswith(str(root / "supervisor")) and (path.endswith(
        (".py", ".pyc", "/__pycache__")) or path in folders)]  # its modules, and their folders looked up
    assert code, "the hook saw the keeper's own modules opened"  # the audit is live
    assert sorted(set(opened) - set(code)) == []


def test_a_secret_written_into_env_while_the_keeper_runs_is_scrubbed_from_then_on(tmp_path):
    """.env is read for the settings once, at the start; the scrub reads it again whenever it changes, so a key a
    person pastes in while the loop runs never reaches a file or the console."""
    from test_iteration import keeper_in
    root = fresh_workspace(tmp_path / "workspace")
    scrub = importlib.import_module(keeper_in(root).kinds.__name__.rsplit(".", 1)[0] + ".scrub")
    secret = "sk-live-" + "7" * 24
    assert scrub.redact(f"token {secret}") == f"token {secret}"  # no .env yet: nothing to scrub
    (root / ".env").write_text(f"MY_SERVICE_TOKEN={secret}\n")
    assert scrub.redact(f"token {secret}") == "token [MY_SERVICE_TOKEN]"
    (root / ".env").write_text(f"MY_SERVICE_TOKEN={secret}\nOTHER_PASSWORD=hunter2-hunter2\n")  # a size of its own
    assert scrub.redact("hunter2-hunter2 and " + secret) == "[OTHER_PASSWORD] and [MY_SERVICE_TOKEN]"


def test_what_an_iteration_came_to_is_a_value_no_room_changes_after_it_is_built():
    kinds = load_keeper("kinds")
    for value, field in ((kinds.Result(kinds.Outcome.LANDED), "summary"), (kinds.Verdict(), "detail")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, field, "changed by a room after the policy built it")
