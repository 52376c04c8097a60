"""Headers across the door: the agent's credentials never go up, the real key never comes down.

Whatever the agent sends that could carry a credential or pick the account it bills is dropped
by name (any header naming auth, key, token, secret, cookie, session, password, organization,
project or account), not by a list of known headers, so a new provider's header does not slip
through; the real key is then set for the upstream alone.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Optional

from multidict import CIMultiDict

CREDENTIAL_WORDS = ("auth", "key", "token", "secret", "cookie", "session", "password",
                    "credential", "organization", "project", "account")
#: Per-connection headers (RFC 9110 §7.6.1) and ones the gateway sets itself.
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "te", "trailer",
                        "transfer-encoding", "upgrade", "host", "content-length", "expect",
                        "accept-encoding", "content-encoding", "forwarded", "via",
                        "x-forwarded-for", "x-forwarded-host", "x-forwarded-proto",
                        "x-real-ip"})


def _listed_in_connection(headers: Mapping[str, str]) -> set[str]:
    values = [v for k, v in headers.items() if k.lower() == "connection"]
    return {token.strip().lower() for value in values for token in value.split(",")}


def _credential_like(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in CREDENTIAL_WORDS)


def upstream_headers(agent: Iterable[tuple[str, str]], auth: str,
                     key: Optional[str]) -> CIMultiDict:
    """The agent's headers minus anything credential-like or per-connection, plus the real key."""
    pairs = list(agent)
    drop = HOP_BY_HOP | _listed_in_connection(dict(pairs))
    out = CIMultiDict((k, v) for k, v in pairs
                      if k.lower() not in drop and not _credential_like(k))
    if key and auth == "bearer":
        out["Authorization"] = f"Bearer {key}"
    elif key and auth in ("x-api-key", "api-key"):
        out[auth] = key
    return out


def agent_headers(upstream: Iterable[tuple[str, str]], secrets: Iterable[str]) -> CIMultiDict:
    """The provider's response headers the agent may see: no per-connection ones, no cookies,
    none whose value holds a secret."""
    secrets = [s for s in secrets if s]
    pairs = list(upstream)
    drop = HOP_BY_HOP | _listed_in_connection(dict(pairs)) | {"set-cookie", "set-cookie2"}
    return CIMultiDict((k, v) for k, v in pairs if k.lower() not in drop
                       and not any(s in v for s in secrets))
