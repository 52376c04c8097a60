"""The door holds the real key, so it must not pass reads of the provider account: an agent in
a real sandbox (bwrap, docker) that GETs files, batches, stored chat completions, responses
or the organization's usage through its door is refused with a 403 naming what is allowed,
each attempt is recorded, and the provider never sees one. Its model calls still pass."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "gateway"))

from evalq.modelserver.script import parse_script  # noqa: E402
from evalq.workers.door import open_door  # noqa: E402
from evalq.workers.profile import new_profile  # noqa: E402
from evalq.workers.sandbox import AgentJob, get_agent_sandbox  # noqa: E402
from probe_limits import PROBE_LIMITS  # noqa: E402
from strict_provider import StrictProvider  # noqa: E402

KEY = "sk-account-owner-key-0123456789"
#: what the agent tries: the account's data under the door's /v1, then one model call
READS = [("GET", "/v1/files"), ("GET", "/v1/files/file-abc/content"), ("GET", "/v1/batches"),
         ("GET", "/v1/batches/batch_abc"), ("GET", "/v1/chat/completions"),
         ("GET", "/v1/chat/completions/chatcmpl-abc"),
         ("GET", "/v1/chat/completions/chatcmpl-abc/messages"),
         ("GET", "/v1/responses/resp_abc"), ("GET", "/v1/responses/resp_abc/input_items"),
         ("GET", "/v1/models"), ("GET", "/v1/organization/usage/completions"),
         ("GET", "/v1/fine_tuning/jobs"), ("GET", "/v1/vector_stores"),
         ("POST", "/v1/chat/completions/chatcmpl-abc"), ("DELETE", "/v1/files/file-abc"),
         ("POST", "/v1/files"), ("POST", "/v1/batches")]

AGENT = r'''
import http.client, json, sys
port, reads = int(sys.argv[1]), json.loads(sys.argv[2])
seen = []
for method, path in reads:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    body = "{}" if method == "POST" else None
    conn.request(method, path, body=body, headers={"Authorization": "Bearer x",
                                                   "Content-Type": "application/json"})
    reply = conn.getresponse()
    text = reply.read().decode()
    seen.append([method, path, reply.status, json.loads(text)["error"]["type"]])
    conn.close()
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
conn.request("POST", "/v1/chat/completions", body=json.dumps({"model": "gpt-5",
             "messages": [{"role": "user", "content": "hi"}]}),
             headers={"Authorization": "Bearer x", "Content-Type": "application/json"})
seen.append(["POST", "/v1/chat/completions", conn.getresponse().status, None])
print("SEEN", json.dumps(seen))
'''


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
def test_reads_of_the_provider_account_are_refused_at_the_door(tmp_path, backend):
    from evalq.workers.sandbox import DOOR_PORT

    script = parse_script({"fallback": {"text": "ok", "usage": {
        "input_tokens": 5, "output_tokens": 1, "cache_read_tokens": 0}}})
    profile = new_profile(tmp_path / "runs")
    profile.workspace.mkdir()
    try:
        with StrictProvider(script, "openai", KEY) as provider, \
                open_door(provider.url + "/v1", {"OPENAI_API_KEY": KEY}) as door:
            done = get_agent_sandbox(backend).run(AgentJob(
                argv=["/usr/bin/python3", "-c", AGENT, str(DOOR_PORT), json.dumps(READS)],
                env=profile.env, workspace=profile.workspace, profile_root=profile.root,
                limits=PROBE_LIMITS, door=door.run, label="account-reads"))
            assert done.exit_code == 0, (done.stdout, done.stderr)
            seen = json.loads(done.stdout.decode().split("SEEN", 1)[1])
            # nothing but the model call reached the provider, refused or not
            assert provider.rejected == []
            assert [(e.path, e.model) for e in provider.exchanges] == [
                ("/v1/chat/completions", "gpt-5")]
            records = door.run.records()
        assert seen[:-1] == [[m, p, 403, "not_allowed"] for m, p in READS]
        assert seen[-1] == ["POST", "/v1/chat/completions", 200, None]
        assert [(r["method"], r["path"]) for r in records[:-1]] == READS
        assert all(r["refused"] and "is not a model call" in r["refused"]
                   for r in records[:-1])
        assert records[-1]["refused"] is None and records[-1]["wire"] == "openai-chat"
    finally:
        profile.cleanup()
