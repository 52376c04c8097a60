"""What the worker keeps from the wire is bounded, whatever the agent sends: an agent in a real
sandbox (bwrap, docker) naming an 8 MiB model in each of 16 requests leaves records whose
agent-chosen fields are cut with a marker, a wire artifact of kilobytes (not 128 MiB), and a
worker that holds no more memory for it than a few of those names (the gateway runs in this
process: what Python still holds once the run is closed is measured with tracemalloc)."""

from __future__ import annotations

import gc
import json
import sys
import tracemalloc
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "gateway"))

from evalq.modelserver import ModelServer  # noqa: E402
from evalq.modelserver.script import parse_script  # noqa: E402
from evalq.workers.door import open_door  # noqa: E402
from evalq.workers.gateway.records import MAX_FIELD_CHARS  # noqa: E402
from evalq.workers.profile import new_profile  # noqa: E402
from evalq.workers.sandbox import AgentJob, get_agent_sandbox  # noqa: E402
from probe_limits import PROBE_LIMITS  # noqa: E402

NAME_BYTES, REQUESTS = 8 * 1024 * 1024, 16

AGENT = r'''
import http.client, json, sys
port, size, count = (int(a) for a in sys.argv[1:4])
codes = []
for i in range(count):  # a fresh 8 MiB name each time, a long path too
    model = chr(ord("a") + i) * size
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "hi"}]})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.request("POST", "/v1/chat/completions", body=body,
                 headers={"Content-Type": "application/json"})
    codes.append(conn.getresponse().status)
    conn.close()
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
conn.request("GET", "/v1/" + "p" * 6000)
codes.append(conn.getresponse().status)
print("CODES", json.dumps(codes))
'''


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
def test_huge_model_names_keep_the_records_and_the_worker_bounded(tmp_path, backend):
    from evalq.workers.sandbox import DOOR_PORT

    profile = new_profile(tmp_path / "runs")
    profile.workspace.mkdir()
    script = parse_script({"fallback": {"text": "ok", "usage": {"input_tokens": 1,
                                                                "output_tokens": 1}}})
    tracemalloc.start()
    try:
        with ModelServer(script) as server:
            # no cost budget here: the model names reach the provider (the scripted one)
            gc.collect()
            before = tracemalloc.get_traced_memory()[0]
            with open_door(server.url + "/v1", {"OPENAI_API_KEY": "sk-k"}) as door:
                done = get_agent_sandbox(backend).run(AgentJob(
                    argv=["/usr/bin/python3", "-c", AGENT, str(DOOR_PORT), str(NAME_BYTES),
                          str(REQUESTS)],
                    env=profile.env, workspace=profile.workspace, profile_root=profile.root,
                    limits=PROBE_LIMITS, door=door.run, label="huge-names"))
            server.exchanges.clear()  # (the provider's own ledger is the test's, not evalq's)
            records, totals = door.run.records(), door.run.totals()
            gc.collect()  # what is left is what the worker holds, not garbage to be freed
            held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
        profile.cleanup()
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout.decode().split("CODES", 1)[1]) == [200] * REQUESTS + [403]
    assert totals["model_calls"] == REQUESTS and len(records) == REQUESTS + 1
    for index, record in enumerate(records[:REQUESTS]):
        model = record["model"]
        assert model.startswith(chr(ord("a") + index) * MAX_FIELD_CHARS)
        assert model.endswith(f"…[{NAME_BYTES - MAX_FIELD_CHARS} characters cut]")
    assert records[-1]["path"].endswith(f"…[{6004 - MAX_FIELD_CHARS} characters cut]")
    artifact = "".join(json.dumps(r, sort_keys=True) + "\n" for r in records)
    assert len(artifact) < 32 * 1024, len(artifact)  # not 16 x 8 MiB
    assert held < NAME_BYTES, held  # not one of the names is kept


def test_the_wire_records_of_a_run_are_capped_with_a_marker(monkeypatch):
    """Past MAX_WIRE_ARTIFACT_BYTES the records end in a marker saying how many were cut;
    the totals still count every request."""
    from evalq.workers.gateway import run as gateway_run
    from evalq.workers.gateway.records import capped

    records = [{"index": 1000 + i, "path": "/v1/x" * 20} for i in range(100)]
    line = len(json.dumps(records[0], sort_keys=True)) + 1
    kept = capped(records, 10 * line)
    assert kept[:-1] == records[:10]
    assert kept[-1] == {"cut": f"90 more records not kept: the wire records of one run are "
                               f"capped at {10 * line} bytes (the totals count them all)"}
    assert capped(records, 100 * line) == records
    assert gateway_run.MAX_WIRE_ARTIFACT_BYTES <= 8 * 1024 * 1024
