"""opencode (from npm, as `make test` installs it) with the model ids its users write,
`openai/gpt-5` and `anthropic/claude-sonnet-4-5`: the adapter's own config, through a gateway
run set up as the adapter asks (endpoint, key header, provider API), reaches a provider as
strict as the real one and finishes. (It used to exit 1 before any request: opencode calls
OpenAI models through the Responses API, which the chat-only SDK the adapter chose lacks.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from types import SimpleNamespace

import pytest

from gateway_support import gateway, sock_dir, tcp_forwarder  # noqa: F401 (fixtures)
from strict_provider import StrictProvider
from evalq.modelserver.script import parse_script
from evalq.workers.agents.opencode import OpenCode
from evalq.workers.gateway import PLACEHOLDER_KEY, Upstream

KEY = "sk-opencode-real-key-0123456789"
USAGE = {"input_tokens": 321, "output_tokens": 9, "cache_read_tokens": 0,
         "cache_write_tokens": 0}


@pytest.mark.parametrize("model,api,path", [
    ("openai/gpt-5", "openai", "/v1/responses"),
    ("anthropic/claude-sonnet-4-5", "anthropic", "/v1/messages")])
def test_opencode_with_the_model_id_a_user_writes(model, api, path, gateway, sock_dir,
                                                   tmp_path):
    found = shutil.which("opencode", path=os.environ.get("EVALQ_AGENT_PATH", ""))
    if found is None:
        pytest.fail("opencode is not installed: export EVALQ_AGENT_PATH=\"$(bash "
                    "scripts/install-test-agents.sh)\"", pytrace=False)
    adapter = OpenCode()
    ctx = SimpleNamespace(model=model, settings={"executable": found}, prompt="Say hello.",
                          condition=SimpleNamespace(skill=None),
                          profile=SimpleNamespace(home=tmp_path / "home"))
    (credential,) = adapter.credential_names(ctx)
    assert credential == ("ANTHROPIC_API_KEY" if api == "anthropic" else "OPENAI_API_KEY")
    assert adapter.door_api(ctx) == api
    script = parse_script({"fallback": {"text": "Hello from the provider.", "usage": USAGE}})
    with StrictProvider(script, api, KEY) as provider:
        # the adapter's upstream, with the provider played on loopback at the same path
        real = adapter.upstream_url(ctx)
        upstream = Upstream(provider.url + ("/v1" if real.endswith("/v1") else ""),
                            auth=adapter.door_auth(ctx), credential=credential, api=api)
        run = gateway.open_run("oc", sock_dir / "g.sock", upstreams=[upstream],
                               credentials={credential: KEY})
        with tcp_forwarder(str(sock_dir / "g.sock")) as port:
            ctx.model_url = f"http://127.0.0.1:{port}" + ("/v1" if real.endswith("/v1") else "")
            adapter.prepare(ctx)
            env = {"PATH": os.environ["PATH"], "HOME": str(ctx.profile.home),
                   **adapter.quiet_env, credential: PLACEHOLDER_KEY}
            done = subprocess.run(adapter.command(ctx), env=env, cwd=tmp_path,
                                  capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
        assert "Hello from the provider." in done.stdout
        assert provider.rejected == []
        assert [e.path for e in provider.exchanges] == [path]
        (record,) = run.records()
        assert record["refused"] is None and record["input_tokens"] == USAGE["input_tokens"]
        assert KEY not in done.stdout + done.stderr
        config = json.loads((ctx.profile.home / ".config" / "opencode" /
                             "opencode.json").read_text())
        assert config["model"] == model
