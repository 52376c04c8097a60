"""The model gateway: a run's only network door, outside its sandbox.

Each run gets an HTTP endpoint: a unix socket of its own, or (a sealed sandbox's door) the
listening socket the sandbox hands over from its own network namespace, where the agent finds
it as http://127.0.0.1:PORT (`Gateway.serve_listener`). The run is known by the socket a
request came in on, never by anything the agent sends. For every request the gateway:

- forwards only to the run's allowlist of upstream base URLs (scheme, host, port and path
  prefix; https with verified certificates, plain http only to loopback), and there only the
  model calls of the upstream's API, by method and exact path (endpoints.py): no read of the
  provider account, no billed endpoint it cannot meter. Anything else gets a 403 with a JSON
  error, and is recorded;
- drops every credential-like header the agent sent and sets the real key for the upstream;
  the key is masked in whatever comes back (headers, bodies, streams, error messages);
- meters the wire: format, model, streaming, status, latency, request and prompt size, usage
  tokens (a count the provider did not send stays None), retries (the same body again);
- enforces the run's budgets (tokens, requests, cost priced with evalq.pricing) live, failing
  closed (budgets.py): once one is spent, model calls get a 429 naming the budget,
  `run.exhausted` says which, and
  `on_exhausted(reason)` is called once (in a helper thread) so the worker can stop the agent;
- limits requests in flight per provider origin, across workers when given a Redis URL; a 429
  or 5xx from the provider is passed through unchanged and counted.

How the runner uses it::

    from evalq.workers.gateway import Gateway, PLACEHOLDER_KEY, PROVIDERS, RunBudgets, Upstream
    from evalq.workers.secrets import credentials

    gateway = Gateway(redis_url=settings.broker_url)       # once per worker process
    run = gateway.open_run(
        attempt_id, run_dir / "gateway.sock",              # the sandbox bind-mounts this socket
        upstreams=[PROVIDERS["anthropic"]],                # or Upstream("https://host/v1", ...)
        credentials=credentials(["ANTHROPIC_API_KEY"]),
        budgets=RunBudgets(max_tokens=2_000_000, max_requests=200, max_cost_usd=5.0),
        concurrency=4,                                     # per provider, all workers together
        on_exhausted=lambda reason: stop_agent(reason))    # then: timed_out, stop_reason=reason
    # agent env: ANTHROPIC_BASE_URL=http://127.0.0.1:PORT, ANTHROPIC_API_KEY=PLACEHOLDER_KEY
    ...                                                    # run the agent in its sandbox
    run.close()
    metered = run.totals()      # {"requests", "input_tokens", ..., "cost_usd", "exhausted", ...}
    per_request = run.records()  # list of plain dicts, one per request (see records.Record)
    gateway.close()             # at worker shutdown

An upstream is served at its own path (`Upstream("https://host/v1")` at
http://127.0.0.1:PORT/v1/...). Several upstreams in one run need distinct mounts:
`Upstream(url, mount="/openai")` is then reached at http://127.0.0.1:PORT/openai/... A
forward-proxy style absolute URL
(`POST https://api.anthropic.com/v1/messages`) works too when it is on the allowlist; CONNECT
tunnels are refused, since what goes through them can be neither metered nor keyed.
"""

from evalq.workers.gateway.budgets import RunBudgets
from evalq.workers.gateway.gateway import Gateway
from evalq.workers.gateway.run import GatewayRun
from evalq.workers.gateway.upstreams import PROVIDERS, Upstream

#: What an agent is given as its API key: any value works, the gateway replaces it.
PLACEHOLDER_KEY = "sk-evalq-gateway-placeholder"

__all__ = ["Gateway", "GatewayRun", "PLACEHOLDER_KEY", "PROVIDERS", "RunBudgets", "Upstream"]
