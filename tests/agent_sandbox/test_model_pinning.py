"""A condition pins its model; the agent writes the model into each request. A sealed agent
that asks the gateway for a bigger model than its condition pins is named in the report and
costs the claims their confirmatory status; a side model the condition declares does not; and
once a condition declares its models (allowed_models), the gateway refuses any other."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "agents"))

from evalq.modelserver import ModelServer  # noqa: E402
from evalq.modelserver.script import parse_script  # noqa: E402
from test_agents_support import attempts, copy_fixture, run_study  # noqa: E402

#: one request per model named on the command line, through the door
AGENT = r'''
import json, os, sys, urllib.error, urllib.request
url = sys.argv[1].rstrip("/")
for model in sys.argv[2].split(","):
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "hi"}]})
    req = urllib.request.Request(url + "/chat/completions", data=body.encode(), method="POST",
                                 headers={"Content-Type": "application/json",
                                          "Authorization": "Bearer x"})
    try:
        with urllib.request.urlopen(req, timeout=20) as reply:
            print(model, reply.status)
    except urllib.error.HTTPError as refused:
        print(model, refused.code)
'''


def _condition(name: str, server_url: str, models: str, allowed=None) -> str:
    code = AGENT.replace("{", "{{").replace("}", "}}")
    argv = json.dumps(["python3", "-c", code, "{model_url}", models])
    declared = "" if allowed is None else f", allowed_models = {json.dumps(allowed)}"
    return f'''
[[conditions]]
name = "{name}"
agent = "command"
model = "gpt-5-mini"
settings = {{ base_url = "{server_url}/v1", credential_env = ["OPENAI_API_KEY"], argv = {argv}{declared} }}
'''


@pytest.mark.parametrize("sandbox", ["bwrap", "docker"])
def test_a_model_the_condition_does_not_pin_is_caught(tmp_path, sandbox):
    fixture = copy_fixture("py-slugify-bugfix", tmp_path / "fixtures")
    manifest = tmp_path / "study" / "study.toml"
    manifest.parent.mkdir()
    usage = {"input_tokens": 10, "output_tokens": 2, "cache_read_tokens": 0}
    script = parse_script({"fallback": {"text": "ok", "usage": usage}})
    with ModelServer(script) as server:
        manifest.write_text(f'''
id = "pinning"
fixtures = ["{fixture.as_posix()}"]
repetitions = 1
''' + _condition("honest", server.url, "gpt-5-mini,gpt-5-nano", ["gpt-5-nano"])
              + _condition("upgrader", server.url, "gpt-5-mini,gpt-5")
              + _condition("held", server.url, "gpt-5-mini,gpt-5-pro", []))
        report = run_study(manifest, tmp_path / "home", {"EVALQ_AGENT_SANDBOX": sandbox,
                                                         "OPENAI_API_KEY": "sk-test"})
        asked = sorted(e.body["model"] for e in server.exchanges)
    # held declared its models: its gpt-5-pro call never reached the provider
    assert asked == ["gpt-5", "gpt-5-mini", "gpt-5-mini", "gpt-5-mini", "gpt-5-nano"]
    by_condition = {r["trial_id"].split("/")[2]: r for r in attempts(tmp_path / "home")}
    assert by_condition["upgrader"]["metrics"]["wire_models"] == ["gpt-5", "gpt-5-mini"]
    pinning = report["model_pinning"]
    assert pinning["honest"] == {"allowed": ["gpt-5-mini", "gpt-5-nano"], "runs_checked": 1,
                                 "off_pin_runs": 0, "off_pin_models": {}}
    assert pinning["upgrader"]["off_pin_runs"] == 1
    assert pinning["upgrader"]["off_pin_models"] == {"gpt-5": 1}
    assert "1 run(s) of upgrader asked the model gateway for a model the condition does not " \
           "pin (gpt-5)" in report["claims"]["reasons"]
    markdown = next((tmp_path / "home" / "reports").glob("*/report.md")).read_text()
    assert "- pinned models: **not held**: upgrader: 1 of 1 run(s) asked for gpt-5" \
        in markdown
    held = by_condition["held"]["metrics"]
    assert held["wire_models"] == ["gpt-5-mini"] and held["wire_refused"] == 1
    assert pinning["held"]["off_pin_runs"] == 0
