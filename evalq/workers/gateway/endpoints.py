"""The endpoints a run may reach: per provider API, only the model calls (method + exact path).

Anything else under an allowlisted base URL is refused, reads too: with the real key on it, a
GET of `/v1/files`, `/v1/batches` or a stored completion would read the whole provider
account (other runs', other users'). The paths are the providers' documented ones, rooted at
the base URL without its trailing `/v1` (so `https://api.openai.com/v1` and
`https://api.anthropic.com` both root at ``, `https://openrouter.ai/api/v1` at `/api`); a
query string is kept (Claude Code posts `/v1/messages?beta=true`).

No shipped agent lists models through the door (opencode's and Codex's model lists are off in
their configs, Claude Code and mini-swe-agent never ask), so no listing endpoint is allowed.
"""

from __future__ import annotations

from typing import Optional

from evalq.workers.gateway.wire import ANTHROPIC, OPENAI_CHAT, OPENAI_RESPONSES

#: (method, path under the version root) -> the metered wire format, None for a free call
ENDPOINTS: dict[str, dict[tuple[str, str], Optional[str]]] = {
    "anthropic": {("POST", "/v1/messages"): ANTHROPIC,
                  ("POST", "/v1/messages/count_tokens"): None},
    "openai": {("POST", "/v1/chat/completions"): OPENAI_CHAT,
               ("POST", "/v1/responses"): OPENAI_RESPONSES,
               ("POST", "/v1/responses/compact"): OPENAI_RESPONSES,  # Codex's remote compaction
               ("POST", "/v1/responses/input_tokens"): None},
}
ENDPOINTS["any"] = {**ENDPOINTS["anthropic"], **ENDPOINTS["openai"]}
API_NAMES = tuple(ENDPOINTS)


class NotAnEndpoint(Exception):
    """A request to a path or method the run's API does not allow; `str` says what is."""


def version_root(prefix: str) -> str:
    """The base URL's path without a trailing /v1: where the documented paths start."""
    return prefix[:-3] if prefix.endswith("/v1") else prefix


def endpoint(api: str, prefix: str, method: str, path: str) -> Optional[str]:
    """The wire format of an allowed model call (None: an allowed free call such as a token
    count), or NotAnEndpoint. `path` is the upstream path, without its query."""
    root = version_root(prefix)
    table = ENDPOINTS[api]
    rest = path[len(root):] if path.startswith(root + "/") else None
    if rest is not None and (method.upper(), rest) in table:
        return table[(method.upper(), rest)]
    allowed = ", ".join(f"{m} {root}{p}" for m, p in table)
    raise NotAnEndpoint(f"{method.upper()} {path[:200]} is not a model call this run may make "
                        f"(allowed: {allowed})")
