"""Output an adapter cannot read is the agent's doing: the run is graded without its usage,
never an infrastructure_failure (which would take a losing run out of every rate)."""

from __future__ import annotations

import json

import pytest

from evalq.workers.agents.registry import ADAPTERS, get_adapter
from evalq.workers.agents.scripted import ScriptedAgent
from test_agents_adapters import _ctx, _proc

#: each broke a parser before (a JSON value where an object was expected)
BROKEN = [b'{"type": "result", "usage": [1]}', b'{"type": "assistant", "message": 7}',
          b'{"type": "step_finish", "part": true}', b'{"type": "result", "modelUsage": "x"}']


@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_no_adapter_raises_on_output_it_cannot_read(tmp_path, name):
    settings = {"argv": ["true"]} if name == "command" else {}
    ctx = _ctx(tmp_path, settings, agent=name)
    adapter = get_adapter(name)
    for output in BROKEN:
        result = adapter._parsed(ctx, _proc(output + b"\nnot json {\n"))
        assert result.metrics.input_tokens is None and result.metrics.cost_usd is None


class _Unreadable(ScriptedAgent):
    """The scripted agent whose output no parser can read."""

    def parse(self, ctx, proc):
        return json.loads(b"{")["never"]


@pytest.mark.parametrize("sandbox", ["bwrap", "none"])
def test_a_run_with_unreadable_output_ends_and_says_why(tmp_path, sandbox):
    ctx = _ctx(tmp_path, {"action": "noop"})
    ctx.sandbox = sandbox
    result = _Unreadable().run(ctx)  # returns: the trial goes on to grading
    assert not result.timed_out and result.stop_reason == "unreadable output"
    assert result.metrics.input_tokens is None
    why = result.metrics.unreported["input_tokens"]
    assert why.startswith("the agent's output could not be read (JSONDecodeError")
