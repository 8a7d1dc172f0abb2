"""The policy's decisions on values alone (decide.py): every case there is, in milliseconds, held to what the loop
promises of a failure (the world is blamed only with a cause observed outside the code and a control; a broken seed
walks back; the gate's failures never do) and of a dry spell."""
import ast
import itertools
from dataclasses import fields, replace

import pytest

from conftest import REPO, load_keeper

decide = load_keeper("decide")
kinds = load_keeper("kinds")
FAILURES = [*kinds.RunFailure, *kinds.Failure, *kinds.ScoreFailure]
OWN = [f for f in kinds.RunFailure if f is not kinds.RunFailure.UNTRUSTED]  # the seed's run failed, not what it left
FLAGS = ("asked", "answered", "asking", "start_good", "start_landed", "fully_judged")


def every_case():
    """Every failure with every combination of what can be known of it: 43,776 cases."""
    for failure, flags, world, repeat, cause, same in itertools.product(
            FAILURES, itertools.product((False, True), repeat=len(FLAGS)), (None, "this"), (None, "this", "other"),
            ("", "the installed packages changed since it ran well"), (None, False, True)):
        yield decide.Case(failure, "it broke", "m1", **dict(zip(FLAGS, flags)), start="0007",
                          world=(failure.value, "it broke") if world else None,
                          repeat={"this": ("0007", "m1"), "other": ("0006", "m1")}.get(repeat), cause=cause, same=same)


CASES = list(every_case())


def final(case):
    """The decision once the control ran, where it was asked for (as iteration.py does)."""
    decision = decide.failed(case)
    return decide.failed(replace(case, same=bool(case.same))) if decision.fate is None else decision


def test_the_policy_is_decided_on_values_alone_it_imports_nothing_but_the_vocabulary():
    tree = ast.parse((REPO / "supervisor" / "decide.py").read_bytes())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert imported == {"dataclasses", "enum", "kinds"}, imported
    assert len(CASES) == 43_776 and all(f.name in {"failure", "detail", "mark", "start", "world", "repeat", "cause",
                                                 "same", *FLAGS} for f in fields(decide.Case))


def test_the_world_is_never_blamed_without_a_cause_observed_outside_the_code():
    for case in CASES:
        decision = final(case)
        if decision.fate in (decide.Fate.WORLD, decide.Fate.WAIT):
            assert decision.cause and (decision.cause == case.cause or decision.cause == decide.ASKING), case
        if not case.cause and not case.asking:
            assert decision.fate is decide.Fate.TASK, case


def test_before_an_answer_the_seeds_own_failure_is_the_worlds_only_where_a_control_stands():
    for case in CASES:
        if final(case).fate is decide.Fate.WORLD:
            assert case.failure in OWN and not case.asked and not case.answered, case
            assert case.start_good or case.world or case.asking, case  # the state, or the failure, ran well before


def test_the_gates_failure_is_the_worlds_only_when_it_fails_the_same_way_at_a_start_that_passed_every_test():
    for case in CASES:
        decision = final(case)
        if decision.fate is decide.Fate.WAIT:
            assert case.same and case.fully_judged and case.failure in decide.RECHECKED, case
        asked = decide.failed(replace(case, same=None)).fate is None
        assert asked == (case.failure in decide.RECHECKED and case.fully_judged and not decision.walk), case


def test_a_wait_never_walks_back_and_only_the_seeds_own_failures_ever_do():
    for case in CASES:
        decision = final(case)
        if decision.walk:
            assert isinstance(case.failure, kinds.RunFailure) and decision.fate is decide.Fate.TASK, case


@pytest.mark.parametrize("failure", OWN)
def test_a_seed_broken_before_an_answer_where_no_run_proved_the_state_walks_back(failure):
    base = next(c for c in CASES if c.failure is failure and not any(getattr(c, f) for f in FLAGS) and
                not c.world and not c.repeat and not c.cause and c.same is None)
    assert final(base).walk and final(base).fate is decide.Fate.TASK
    for proven in (dict(start_good=True), dict(asked=True), dict(answered=True)):  # the state, or the run, proven
        assert not final(replace(base, **proven)).walk, proven


def test_the_same_failure_of_a_runs_own_doing_twice_from_one_landed_state_walks_back():
    once = decide.Case(kinds.RunFailure.CRASHED, "boom", "m1", asked=True, answered=True, asking=False, start="0007",
                       start_good=True, start_landed=True, fully_judged=True, world=None, repeat=None, cause="")
    first = final(once)
    assert not first.walk and first.repeat == ("0007", "m1")
    assert final(replace(once, repeat=first.repeat)).walk  # the same, again, from the same landed state
    assert not final(replace(once, repeat=first.repeat, start_landed=False)).walk  # a person's edit, say
    assert not final(replace(once, repeat=("0007", "m2"))).walk  # another failure
    gate = replace(once, failure=kinds.Failure.TESTS, repeat=("0007", "m1"))
    assert not final(gate).walk and final(gate).repeat is None  # what the seed left: never walks back, forgets


def test_a_failure_at_the_known_good_state_with_nothing_changed_around_it_is_a_task_saying_so():
    case = decide.Case(kinds.Failure.TESTS, "test_date", "m1", asked=True, answered=True, asking=False, start="0007",
                       start_good=True, start_landed=True, fully_judged=True, world=None, repeat=None, cause="")
    assert decide.failed(case).fate is None  # the control is asked for
    assert final(replace(case, same=True)) == decide.Decision(decide.Fate.TASK, unproven=True)
    assert final(replace(case, same=False)) == decide.Decision(decide.Fate.TASK, unproven=False)
    waits = final(replace(case, same=True, cause="the disk is full"))
    assert waits.fate is decide.Fate.WAIT and waits.cause == "the disk is full"
    assert decide.failed(replace(case, fully_judged=False)).fate is decide.Fate.TASK  # landed on a selection


def test_a_dry_spell_is_said_every_spell_and_walks_back_at_twice_that_and_a_landing_ends_it():
    def stalls(counts):
        dry, found = 0, []
        for n, count in enumerate(counts, 1):
            dry, stall = decide.dry_spell(dry, count, spell=10)
            found += [(n, stall)] if stall else []
        return found
    waits = [True, False] * 30  # a wait (or a stop) between each two: they do not count
    assert stalls(waits) == [(19, decide.Stall.SAID), (39, decide.Stall.WALK_BACK), (59, decide.Stall.SAID)]
    assert stalls([True] * 30) == [(10, decide.Stall.SAID), (20, decide.Stall.WALK_BACK), (30, decide.Stall.SAID)]
    assert stalls([True] * 9 + [None] + [True] * 10) == [(20, decide.Stall.SAID)]  # a landing ends the spell
