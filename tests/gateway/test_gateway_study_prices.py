"""A cost limit the gateway could not hold is refused before anything runs: `evalq study
validate` names the condition, the model without a price and the fix, in one line, for a
condition whose agent goes through the model gateway; priced ids, their aliases and a
provider-qualified id as opencode's users write it pass."""

from __future__ import annotations

import pytest

from conftest import run_cli, write_study


def _condition(agent: str, model: str, extra: str = "") -> str:
    return f'''
[[conditions]]
name = "priced-or-not"
agent = "{agent}"
model = "{model}"
settings = {{ base_url = "http://127.0.0.1:9/v1"{extra} }}
'''


@pytest.mark.parametrize("agent,model,extra,field", [
    ("codex", "gpt-5-pro", "", "conditions.2.model"),
    ("opencode", "openai/gpt-5-pro", "", "conditions.2.model"),
    ("claude-code", "claude-sonnet-4-5-preview", "", "conditions.2.model"),
    ("codex", "gpt-5", ', allowed_models = ["o3-deep-research"]',
     "conditions.2.settings.allowed_models")])
def test_a_cost_limit_over_an_unpriced_model_is_refused(tmp_path, fixture_copies, agent,
                                                         model, extra, field):
    path = write_study(tmp_path / "s", fixture_copies,
                       extra_conditions=_condition(agent, model, extra))
    proc = run_cli(["study", "validate", str(path)])
    assert proc.returncode == 2, proc.stdout
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"field '{field}'" in lines[0] and "has no price for" in lines[0], lines[0]
    assert "use a model id the price table lists" in lines[0]


@pytest.mark.parametrize("agent,model", [
    ("codex", "gpt-5-codex"), ("opencode", "openai/gpt-5"),
    ("opencode", "anthropic/claude-sonnet-4-5"), ("mini-swe-agent", "openai/gpt-5-mini"),
    ("claude-code", "claude-sonnet-4-5-20250929")])
def test_priced_models_pass(tmp_path, fixture_copies, agent, model):
    path = write_study(tmp_path / "s", fixture_copies,
                       extra_conditions=_condition(agent, model))
    proc = run_cli(["study", "validate", str(path)])
    assert proc.returncode == 0, proc.stderr
