"""What an iteration comes to, decided in one place (supervisor/iteration.py), tested in-process and fast.

Each test loads the keeper from a fresh workspace of its own (its paths are that workspace's), lays out snapshots
as the loop would have left them, and hands the policy a run as the seed and the gateway would have told it: the
walk-back, the world's fault, the same failure twice from a landed state, the dry spell, and the headlines people
read. The end-to-end tests of the same rules run `python fallback.py` (test_fallback.py).
"""
import importlib
import importlib.util
import re
import sys
from types import SimpleNamespace

import pytest

from conftest import ROOMS, fresh_workspace


def keeper_in(root):
    """The keeper's parts loaded from root by their path, under a package name of root's own (their paths are root's)."""
    name = "keeper_" + re.sub(r"\W", "_", str(root))
    spec = importlib.util.spec_from_file_location(name, root / "supervisor" / "__init__.py",
                                                  submodule_search_locations=[str(root / "supervisor")])
    sys.modules[name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sys.modules[name])
    parts = ("iteration", "kinds", "snapshots", "journal", "gate", "settings", "zygote")
    return SimpleNamespace(**{part: importlib.import_module(name + ROOMS[part].removeprefix("supervisor"))
                              for part in parts})


@pytest.fixture
def keeper(tmp_path):
    root = fresh_workspace(tmp_path / "workspace")
    (root / "notes.py").write_text("NOTES = []\n")
    k = keeper_in(root)
    k.root, k.index = root, k.snapshots.load_index()
    k.genesis = k.snapshots.snapshot(k.index, "genesis", 1)
    k.genesis["good"] = True
    yield k
    k.zygote.stop()  # the gate's preloaded process ends with the test, as it ends with the keeper's run
    for module in [m for m in sys.modules if m.startswith("keeper_")]:
        del sys.modules[module]


def landed(k, text, number, good=False):
    """A change landed in the folder, as the loop leaves it: the file written, a landed snapshot."""
    (k.root / "notes.py").write_text(text)
    entry = k.snapshots.snapshot(k.index, "landed", number)
    entry["good"] = good
    return entry


def said(k, requests=1, **told):
    """What the seed said of its run, with the gateway's account of it (as journal.account makes it)."""
    return k.kinds.Account(**{"outcome": "applied", "model": "m", "requests": requests, "answered": requests > 0,
                              **told})


def crash(k, output="Traceback (most recent call last):\n  File \"seed.py\", line 3, in main\nValueError: broke\n"):
    return k.iteration.Run(1, output, said(k, requests=0))


def test_a_seed_that_crashes_where_it_never_ran_well_walks_back_to_the_last_known_good_state(keeper):
    k, memory = keeper, keeper.iteration.Memory()
    broken = landed(k, "NOTES = None\n", 2)
    result = k.iteration.settle(3, k.index, broken, crash(k), memory)
    assert result.outcome is k.kinds.Outcome.ROLLED_BACK and result.failure is k.kinds.RunFailure.CRASHED
    assert result.headline() == "rolled back: seed.py crashed (exit 1)" and result.restored == k.genesis["id"]
    assert (k.root / "notes.py").read_text() == "NOTES = []\n" and broken["id"] in memory.bad
    assert "- [ ] Iteration 3 was rolled back: seed.py crashed (exit 1)" in (k.root / "pending_tasks.md").read_text()


OUT_OF_MEMORY = "Traceback (most recent call last):\n  File \"seed.py\", line 3, in main\nMemoryError\n"


def ran_well_with_other_limits(k, entry):
    """The state's record of what it ran well with, as it was before SEED_MEMORY_MB changed: a cause the keeper sees."""
    entry["world"] = {**k.iteration.blame.world(), "limits": {**k.iteration.blame.world()["limits"],
                                                              "SEED_MEMORY_MB": 1 << 40}}


def test_a_crash_where_the_seed_once_ran_well_with_a_cause_seen_outside_is_the_worlds_and_waits_longer_each_time(
        keeper):
    k, memory = keeper, keeper.iteration.Memory()
    good = landed(k, "NOTES = ['kept']\n", 2, good=True)
    ran_well_with_other_limits(k, good)
    first = k.iteration.settle(3, k.index, good, crash(k, OUT_OF_MEMORY), memory)
    second = k.iteration.settle(4, k.index, good, crash(k, OUT_OF_MEMORY), memory)
    assert first.outcome is second.outcome is k.kinds.Outcome.WAITING and first.until < second.until
    assert first.headline().endswith("seed.py crashed (exit 1) at the last known-good state too")
    assert "the limits a run gets (SEED_MEMORY_MB) changed since it ran well: the cause is outside the code" in \
        first.reason
    assert (k.root / "notes.py").read_text() == "NOTES = ['kept']\n" and not memory.bad
    assert "rolled back" not in (k.root / "pending_tasks.md").read_text()  # no task for the model


def test_a_crash_where_the_seed_once_ran_well_after_its_python_changed_is_the_worlds(keeper):
    """The state recorded what it ran well with; the limits a run gets are not what they were."""
    k, memory = keeper, keeper.iteration.Memory()
    good = landed(k, "NOTES = ['kept']\n", 2, good=True)
    good["world"] = {**k.iteration.blame.world(), "python": "3.11.0 at /usr/bin/python3.11"}
    result = k.iteration.settle(3, k.index, good, crash(k), memory)
    assert result.outcome is k.kinds.Outcome.WAITING
    assert "ValueError: broke; the same happens at the last known-good state, and the Python interpreter (3.11.0 at " \
           "/usr/bin/python3.11 then" in result.reason


def test_a_crash_where_the_seed_once_ran_well_with_nothing_seen_outside_is_the_codes_a_task_and_no_walk_back(keeper):
    """A seed that depends on the date fails where it once ran well; nothing outside the code changed: the model is
    told, the landed work stays, and the loop goes on (it used to wait here forever)."""
    k, memory = keeper, keeper.iteration.Memory()
    good = landed(k, "NOTES = ['kept']\n", 2, good=True)
    good["world"] = k.iteration.blame.world()
    result = k.iteration.settle(3, k.index, good, crash(k), memory)
    assert result.outcome is k.kinds.Outcome.ROLLED_BACK and result.restored == good["id"] and not memory.bad
    assert (k.root / "notes.py").read_text() == "NOTES = ['kept']\n"
    tasks = (k.root / "pending_tasks.md").read_text()
    assert "- [ ] Iteration 3 was rolled back: seed.py crashed (exit 1). It fails the same way at the last known-good " \
           "state, and nothing outside the code changed" in tasks and "ValueError: broke" in tasks


def test_a_crash_that_says_memory_ran_out_where_nothing_outside_changed_is_the_codes_a_task(keeper):
    """The attack on the cause: the code's own output claims it ("MemoryError"); the keeper sees nothing changed and
    enough memory and disk: the model is told, and the loop goes on (it used to wait for good)."""
    k, memory = keeper, keeper.iteration.Memory()
    good = landed(k, "NOTES = ['kept']\n", 2, good=True)
    good["world"] = k.iteration.blame.world()
    result = k.iteration.settle(3, k.index, good, crash(k, OUT_OF_MEMORY), memory)
    assert result.outcome is k.kinds.Outcome.ROLLED_BACK and "nothing outside the code changed" in \
        (k.root / "pending_tasks.md").read_text()


def test_a_failure_shown_to_be_the_worlds_undoes_the_walk_back_it_began_and_takes_back_its_task(keeper):
    k, memory = keeper, keeper.iteration.Memory()
    ran_well_with_other_limits(k, k.genesis)
    fresh = landed(k, "NOTES = ['new']\n", 2)
    k.iteration.settle(3, k.index, fresh, crash(k, OUT_OF_MEMORY), memory)  # walked back to genesis, known good
    assert (k.root / "notes.py").read_text() == "NOTES = []\n"
    result = k.iteration.settle(4, k.index, k.genesis, crash(k, OUT_OF_MEMORY), memory)  # the same there: the world's
    assert result.outcome is k.kinds.Outcome.WAITING and result.restored == fresh["id"]
    assert (k.root / "notes.py").read_text() == "NOTES = ['new']\n"
    assert "was rolled back" not in (k.root / "pending_tasks.md").read_text()


def test_the_same_failure_of_the_runs_own_doing_twice_from_a_landed_state_walks_back_at_once(keeper):
    """A seed that asks the model, then leaves what the keeper does not take (its record a link), fails every run:
    the second time from the same landed state goes back to the last known-good one, without a dry spell."""
    k, memory = keeper, keeper.iteration.Memory()
    saboteur = landed(k, "NOTES = ['sabotage']\n", 2)
    run = k.iteration.Run(0, "", said(k), untrusted=".seed/record.json: a symbolic link, not a file")
    first = k.iteration.settle(3, k.index, saboteur, run, memory)
    assert first.outcome is k.kinds.Outcome.ROLLED_BACK and first.restored == saboteur["id"]
    assert not saboteur["good"]  # it asked the model, but its run failed: not known good
    second = k.iteration.settle(4, k.index, saboteur, run, memory)
    assert second.outcome is k.kinds.Outcome.ROLLED_BACK and second.restored == k.genesis["id"]
    assert (k.root / "notes.py").read_text() == "NOTES = []\n" and saboteur["id"] in memory.bad


def test_a_change_the_gate_fails_rolls_back_to_where_it_started_and_becomes_a_task(keeper):
    k, memory = keeper, keeper.iteration.Memory()
    start = landed(k, "NOTES = ['landed']\n", 2, good=True)
    bad = k.snapshots.store_object(b"def test_fails():\n    assert 1 == 2\n")
    files = {**k.snapshots.files_of(start), "tests/test_fails.py": bad}
    run = k.iteration.Run(0, "", said(k), files=files, changes=[("tests/test_fails.py", "new", 2, 0)])
    result = k.iteration.settle(3, k.index, start, run, memory)
    assert result.outcome is k.kinds.Outcome.ROLLED_BACK and result.failure is k.kinds.Failure.TESTS
    assert result.restored == start["id"] and result.kept and not memory.bad
    assert not (k.root / "tests" / "test_fails.py").exists()
    assert "was rolled back: tests failed" in (k.root / "pending_tasks.md").read_text()


def test_a_dry_spell_becomes_a_task_and_twice_as_long_walks_back_one_known_good_state(keeper):
    k, memory = keeper, keeper.iteration.Memory()
    landed(k, "NOTES = ['one']\n", 2, good=True)
    nothing = k.kinds.Result(k.kinds.Outcome.NO_CHANGE, said=said(k))
    results = []
    for n in range(2 * k.settings.DRY_SPELL):
        k.index["iteration"] = 3 + n
        results.append(k.iteration.note_dry_spell(k.index, k.kinds.Result(k.kinds.Outcome.NO_CHANGE, said=said(k)),
                                                  memory))
    assert results[k.settings.DRY_SPELL - 1].stalled == f"nothing has landed in the last {k.settings.DRY_SPELL} iterations"
    assert "went back to snapshot" in results[-1].stalled and memory.dry == 0
    assert (k.root / "notes.py").read_text() == "NOTES = []\n"
    waits = k.kinds.Result(k.kinds.Outcome.WAITING, said=said(k, requests=0))
    assert k.iteration.note_dry_spell(k.index, waits, memory) == waits  # a wait asks nothing: no dry iteration
    assert k.iteration.note_dry_spell(k.index, nothing, memory) == nothing
    assert memory.dry == 1 and "Stalled:" in (k.root / "pending_tasks.md").read_text()


def test_headlines_are_rendered_from_the_outcome_and_never_read_back(keeper):
    it = keeper.iteration
    moment = __import__("datetime").datetime(2026, 11, 25, 18, 5, tzinfo=__import__("datetime").timezone.utc)
    kinds = keeper.kinds
    assert kinds.Result(kinds.Outcome.WAITING, "tests failed at the last known-good state too", until=moment).headline() \
        == "waiting until 2026-11-25 18:05 UTC: tests failed at the last known-good state too"
    assert kinds.Result(kinds.Outcome.LANDED, "2 file(s) changed").headline() == "landed: 2 file(s) changed"
    assert kinds.Result(kinds.Outcome.NO_CHANGE).headline() == "no change"
    assert it.headline_of(kinds.RunFailure.KILLED, "SIGXCPU (a resource limit, or a signal)") == \
        "seed.py was killed by SIGXCPU (a resource limit, or a signal)"
    assert it.headline_of(kinds.ScoreFailure.FELL, "1 to -3") == "score fell from 1 to -3"
    source = "".join((keeper.root / "supervisor" / name).read_text()
                     for name in ("iteration.py", "kinds.py", "recovery.py"))
    source += (keeper.root / "fallback.py").read_text()
    assert not re.search(r"(outcome|failure|reason|why|headline)\S*\.startswith|re\.\w+\([^)]*(outcome|failure)", source)


def test_a_module_nested_near_pythons_limit_is_read_as_the_compile_check_read_it_at_any_depth(keeper):
    """How deep Python reads depends on the stack it starts from: a module the gate's compile check took was parsed a
    few frames deeper by the tests' selection, and the RecursionError stopped the keeper (the red team: 2,954 to 2,963
    additions on one line, here). Every reader now uses the one parse the check made."""
    selection = importlib.import_module(k_name(keeper) + ROOMS["selection"].removeprefix("supervisor"))

    def deeper(frames, read):
        return read() if frames == 0 else deeper(frames - 1, read)

    for n in range(2_850, 3_050, 7):
        sha = keeper.snapshots.store_object(("x = 1" + " + 1" * n + "\n").encode())
        taken = not keeper.gate.compile_error("deep.py", sha)
        read = deeper(60, lambda: selection.read_module(sha, "deep.py"))  # no RecursionError, at any depth
        assert read[3] is not taken, (n, taken)  # what the check took is read; what it refused is opaque


def k_name(k):
    return k.iteration.__name__.rsplit(".", 1)[0]
