"""The model gateway as a sealed run's only door, in a real study (bwrap and docker).

A `command` agent inside the sandbox calls its model URL in a loop: the gateway lets through
only as many model calls as the study's budget allows and refuses the rest, the attempt ends
`timed_out` naming the budget, the provider saw the worker's key while the agent only ever
held the placeholder, a request for another host is refused, and nothing of the key is stored.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "agents"))

from evalq.modelserver import ModelServer  # noqa: E402
from evalq.modelserver.script import parse_script  # noqa: E402
from evalq.workers.gateway import PLACEHOLDER_KEY  # noqa: E402
from test_agents_support import artifact, attempts, copy_fixture, run_study  # noqa: E402

KEY = "sk-evalq-canary-gateway-0123456789"
USAGE = {"input_tokens": 120, "output_tokens": 7, "cache_read_tokens": 0}  # all priced

#: the agent: print the key it holds, try a host that is not the model, then call the model
#: until the gateway refuses
AGENT = r'''
import json, os, sys, urllib.request, urllib.error
url = sys.argv[1].rstrip("/")
print("HELD", os.environ.get("OPENAI_API_KEY"))
# it under-reports its own usage (written first: a spent budget stops it at any point after)
with open(os.path.join(sys.argv[2], "usage.json"), "w") as out:
    json.dump({"input_tokens": 1, "output_tokens": 1}, out)
def post(target):
    body = json.dumps({"model": "gpt-5", "messages": [{"role": "user", "content": "hi"}]})
    req = urllib.request.Request(target, data=body.encode(), method="POST",
                                 headers={"Content-Type": "application/json",
                                          "Authorization": "Bearer " + os.environ.get("OPENAI_API_KEY", "")})
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except Exception as e:
        return repr(e)
print("CLIMB", post(url.split("/v1")[0] + "/../../v1/chat/completions"))
import http.client, urllib.parse
door = urllib.parse.urlsplit(url)
conn = http.client.HTTPConnection(door.hostname, door.port, timeout=20)
conn.request("POST", "http://127.0.0.1:9/v1/chat/completions", body="{}",
             headers={"Content-Type": "application/json"})
print("OTHER", conn.getresponse().status)
for i in range(6):
    code = post(url + "/chat/completions")
    print("CALL", i, code)
    if code == 429:
        break
'''


def _script():
    return parse_script({"turns": [{"text": f"reply {i}", "usage": USAGE} for i in range(6)]})


def _condition(server_url: str) -> str:
    code = AGENT.replace("{", "{{").replace("}", "}}")  # literal braces in the template
    argv = json.dumps(["/usr/bin/python3", "-c", code, "{model_url}", "{output_dir}"])  # JSON strings are TOML strings
    return f'''
[[conditions]]
name = "looper"
agent = "command"
model = "gpt-5"
settings = {{ base_url = "{server_url}/v1", credential_env = ["OPENAI_API_KEY"], argv = {argv} }}
'''


@pytest.mark.parametrize("sandbox", ["bwrap", "docker"])
def test_gateway_meters_enforces_the_budget_and_holds_the_key(tmp_path, sandbox):
    fixture = copy_fixture("py-slugify-bugfix", tmp_path / "fixtures")
    manifest = tmp_path / "study" / "study.toml"
    manifest.parent.mkdir()
    with ModelServer(_script()) as server:
        manifest.write_text(f'''
id = "gateway-door"
fixtures = ["{fixture.as_posix()}"]
repetitions = 1

[budgets]
wall_seconds = 120
max_requests = 2
{_condition(server.url)}
''')
        home = tmp_path / "home"
        report = run_study(manifest, home, {"EVALQ_AGENT_SANDBOX": sandbox,
                                            "OPENAI_API_KEY": KEY})
        calls = len(server.exchanges)
        keys = {ex.headers.get("Authorization") for ex in server.exchanges}

    row = attempts(home)[-1]
    metrics = row["metrics"]
    assert row["outcome"] == "timed_out", row["reason"]
    assert "requests budget spent (2 of 2)" in (metrics["stop_reason"] or ""), metrics["stop_reason"]
    assert calls == 2 and metrics["wire_requests"] == 2  # the budget, exactly
    assert metrics["wire_input_tokens"] == 2 * USAGE["input_tokens"]
    assert metrics["wire_output_tokens"] == 2 * USAGE["output_tokens"]
    assert (metrics["input_tokens"], metrics["output_tokens"]) == (1, 1)  # what it claimed
    assert metrics["accounting_disagrees"] == ["input_tokens", "output_tokens"]
    assert metrics["wire_refused"] >= 3  # the climb, the other host, the call past the budget
    assert keys == {f"Bearer {KEY}"}  # the provider saw the worker's key ...
    stdout = artifact(home, row["artifacts"]["stdout"]).decode()
    assert f"HELD {PLACEHOLDER_KEY}" in stdout  # ... the agent only the placeholder
    assert "CALL 2 429" in stdout and "OTHER 403" in stdout and "CLIMB 403" in stdout, stdout
    trial = report["trial_rows"][0]
    assert trial["outcome"] == "timed_out"
    assert trial["accounting_disagrees"] == ["input_tokens", "output_tokens"]
    # the report counts the wire, not the claim: under-reporting buys no cheaper cost
    assert trial["usage_source"] == "gateway" and trial["cost_source"] == "gateway"
    assert (trial["input_tokens"], trial["output_tokens"]) == (240, 14)
    assert (trial["agent_input_tokens"], trial["agent_output_tokens"]) == (1, 1)
    assert trial["cost_usd"] == metrics["wire_cost_usd"] and trial["cost_usd"] > 0
    assert trial["cost_usd"] != metrics["cost_usd"]  # the agent's tokens, priced, are less
    looper = report["conditions"]["looper"]
    assert looper["tokens"]["input_tokens"]["total"] == 240
    assert report["cost"]["looper"]["total"] == pytest.approx(metrics["wire_cost_usd"])
    markdown = next((home / "reports").glob("*/report.md")).read_text()
    assert "1 disagree with the agent's own report" in markdown
    assert "input_tokens, output_tokens (agent 1, 1; wire 240, 14)" in markdown
    for path in home.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            if data[:2] == b"\x1f\x8b":
                data = gzip.decompress(data)
            assert KEY.encode() not in data, f"the key reached {path}"
