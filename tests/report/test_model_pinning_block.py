"""The pinned-model check over runs' wire models (evalq.analysis.pinning)."""

from __future__ import annotations

from types import SimpleNamespace

from evalq.analysis.pinning import allowed_models, describe, pinning_block, pinning_reasons
from evalq.models import Condition
from evalq.workers.agents.registry import validate_condition


def _run(condition, wire_models):
    return SimpleNamespace(condition=condition, counted_metrics={"wire_models": wire_models}
                           if wire_models is not None else {})


CONDITIONS = [{"name": "a", "model": "m1"},
              {"name": "b", "settings": {"model": "m2", "allowed_models": ["side"]}},
              {"name": "free", "agent": "x"}]


def test_allowed_models_are_the_pin_and_the_declared_extras():
    assert allowed_models(CONDITIONS[0]) == {"m1"}
    assert allowed_models(CONDITIONS[1]) == {"m2", "side"}
    assert allowed_models(CONDITIONS[2]) is None


def test_off_pin_runs_are_counted_unmetered_and_unpinned_ones_are_not_checked():
    runs = [_run("a", ["m1"]), _run("a", ["m1", "big"]), _run("a", None),
            _run("b", ["m2", "side"]), _run("free", ["anything"])]
    block = pinning_block(CONDITIONS, runs)
    assert block["a"] == {"allowed": ["m1"], "runs_checked": 2, "off_pin_runs": 1,
                          "off_pin_models": {"big": 1}}
    assert block["b"]["off_pin_runs"] == 0 and block["b"]["runs_checked"] == 1
    assert block["free"] == {"allowed": None, "runs_checked": 0, "off_pin_runs": 0,
                             "off_pin_models": {}}
    assert pinning_reasons(block) == [
        "1 run(s) of a asked the model gateway for a model the condition does not pin (big)"]
    assert describe(block) == "**not held**: a: 1 of 2 run(s) asked for big"
    assert describe(pinning_block(CONDITIONS, [])).startswith("unavailable")
    held = pinning_block(CONDITIONS, [_run("a", ["m1"])])
    assert pinning_reasons(held) == [] and describe(held).startswith("held (1 metered run")


def test_allowed_models_must_be_a_list_of_names():
    bad = Condition(name="c", agent="scripted", settings={"allowed_models": "m"})
    assert validate_condition(bad)[0] == "settings.allowed_models"
    good = Condition(name="c", agent="scripted", settings={"allowed_models": ["m"]})
    assert validate_condition(good) is None
