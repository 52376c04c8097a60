"""The report's JSON writer must give exactly json.dumps(indent=2, allow_nan=False): report.json
is compared and hashed by people, so the fast path may change its speed, never a byte; and
what strict JSON cannot hold (NaN, the infinities) is refused on every path, as json.dumps
refuses it."""

from __future__ import annotations

import json
import random

import pytest

from evalq.report.json_text import dumps_indented

AWKWARD = [None, True, False, 0, -3, 2**70, 1.5, 1e-7, float("nan"), float("inf"),
           -float("inf"), "", 'a"b\\c\n}{,\n  {', "é☃\x00\x01", "},\n      {", "[\n  ]"]


class Label(str):
    """A str subclass, as enum values are."""


def _value(rng: random.Random, depth: int):
    roll = rng.random()
    if depth > 4 or roll < 0.5:
        return rng.choice(AWKWARD)
    if roll < 0.75:
        keys = ["k", "é", "},\n {", "x1", 1, 2.5, True, None, Label("lab")]
        return {rng.choice(keys): _value(rng, depth + 1) for _ in range(rng.randint(0, 4))}
    if roll < 0.85:  # rows: lists of flat dicts, the trial-row shape, some empty
        return [{f"f{i}": rng.choice(AWKWARD) for i in range(rng.randint(0, 3))}
                for _ in range(rng.randint(0, 4))]
    items = [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return tuple(items) if rng.random() < 0.3 else items


def _expected(doc, indent: int = 2) -> str:
    """json.dumps's strict text, or the name of the error it raises."""
    try:
        return json.dumps(doc, indent=indent, allow_nan=False)
    except ValueError:
        return "ValueError"


def _ours(doc, indent: int = 2) -> str:
    try:
        return dumps_indented(doc, indent)
    except ValueError:
        return "ValueError"


def test_random_documents_encode_as_json_dumps_does():
    rng = random.Random(19)
    refused = 0
    for _ in range(5000):
        doc = _value(rng, 0)
        expected = _expected(doc)
        refused += expected == "ValueError"
        assert _ours(doc) == expected
    assert 0 < refused < 5000  # both kinds of document were tried


def test_trial_rows_with_a_nested_value_take_the_general_path():
    rows = [{"a": 1, "b": "x"}, {"a": 2, "b": {"nested": [1, 2]}}, {"a": 3, "b": None}]
    doc = {"trial_rows": rows, "other": [[], {}, [{"x": 1}], ({"y": [1]},)]}
    assert dumps_indented(doc) == json.dumps(doc, indent=2)
    assert dumps_indented(doc, indent=4) == json.dumps(doc, indent=4)


def test_what_json_cannot_hold_is_refused_like_json_dumps():
    for doc in ({"a": {1, 2}}, [{"a": object()}], {(1, 2): 1}):
        with pytest.raises(TypeError):
            json.dumps(doc, indent=2)
        with pytest.raises(TypeError):
            dumps_indented(doc)


def test_rows_split_into_pieces_join_to_the_same_text(monkeypatch):
    """Trial rows are encoded a few thousand at a time; every boundary joins up exactly."""
    from evalq.report import json_text

    monkeypatch.setattr(json_text, "ROWS_PER_PIECE", 3)
    rows = [{"a": i, "b": "x" * i, "c": None} for i in range(10)]
    for n in range(1, len(rows) + 1):
        doc = {"rows": rows[:n], "nested": [rows[:n], {"more": rows[:n]}]}
        pieces = list(json_text.indented_pieces(doc))
        assert "".join(pieces) == json.dumps(doc, indent=2)
        assert n <= 3 or len(pieces) > 7  # more than one piece of rows


def _plain_value(rng: random.Random):
    """A trial-row value: text over all of ASCII (DEL and control characters too) and a little
    beyond it, floats of every magnitude and sign, ints past 64 bits, booleans, null."""
    roll = rng.random()
    if roll < 0.3:
        alphabet = [chr(c) for c in range(128)] + ["é", "☃"] * 2
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))
    if roll < 0.6:
        return rng.choice([1, -1]) * 10 ** rng.uniform(-320, 308) * rng.random()
    if roll < 0.75:
        return rng.choice([0, 7, -2**63, 2**64, 2**80, 10**19])
    return rng.choice([None, True, False, 0.0, -0.0, float("nan"), float("inf")])


def test_rows_of_plain_values_encode_as_json_dumps_does_on_either_path():
    """Rows go to orjson where it writes json.dumps's text; each piece that holds a value it
    writes otherwise (NaN, a float under 1e-4, DEL, a non-ASCII character, a huge int) goes
    to the C encoder. Rows at several depths, pieces of mixed kinds."""
    from evalq.report import json_text

    rng = random.Random(23)
    for _ in range(300):
        rows = [{f"k{i}": _plain_value(rng) for i in range(rng.randint(1, 5))}
                for _ in range(rng.randint(1, 6))]
        for doc in (rows, {"trial_rows": rows}, {"a": {"b": rows}}):
            assert _ours(doc) == _expected(doc)
            assert _ours(doc, 4) == _expected(doc, 4)


def test_rows_orjson_can_write_never_reach_the_c_encoder(monkeypatch):
    """The fast path is really taken for the usual trial row (else the speed-up is gone)."""
    from evalq.report import json_text

    def refuse(*_args):
        raise AssertionError("a plain row went to the C encoder")

    monkeypatch.setattr(json_text, "_c_rows", refuse)
    rows = [{"trial_id": f"s/t{i}/c/r1", "outcome": "correct", "attempts": 1, "passed": True,
             "cost_usd": 0.0123 * i, "duration_seconds": 12.5, "reason": None,
             "input_tokens": 10**6, "note": "tab\t quote\" newline\n"} for i in range(5000)]
    doc = {"trial_rows": rows}
    assert dumps_indented(doc) == json.dumps(doc, indent=2)


def test_lone_surrogates_are_written_as_text_pairs_as_characters():
    """An agent's file name with a byte that is not UTF-8 reaches the report as a lone
    surrogate: written as the visible text \\udcff (a strict parser refuses it as an escape),
    while a real pair (an emoji) stays the character it is."""
    from evalq.report.json_text import dumps

    doc = {"name\udcff": ["a\udcff", "\\\udc80", "\\udcff", "😀", [{"r": "\ud800x"}]]}
    for text in (dumps(doc), dumps_indented(doc)):
        back = json.loads(text)
        assert back == {"name\\udcff": ["a\\udcff", "\\\\udc80", "\\udcff", "😀",
                                         [{"r": "\\ud800x"}]]}
