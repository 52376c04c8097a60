"""The allowlist of one run: which upstream base URLs it may reach, and how a request maps to one.

An agent addresses the gateway by path: `http://127.0.0.1:PORT<mount>` stands for an upstream's
base URL, so `<mount>/x` goes to `<url>/x` and can never leave the URL's path prefix. An
upstream's mount is its own path prefix unless given: the agent's base URL is then the
upstream's with only the origin replaced (`https://host/v1` is reached at
`http://127.0.0.1:PORT/v1`, and `/v1/responses` goes to `https://host/v1/responses`). Or, like a
forward proxy, by an absolute URL, which must fall under an allowlisted base URL: same scheme,
host and port, and a path under its prefix. Paths that could climb out of a
prefix once decoded (dot segments, encoded slashes, backslashes) are refused, not normalised.
Within a base URL only the model-call endpoints of the upstream's `api` pass (endpoints.py).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field, replace
from typing import Optional, Sequence, Union
from urllib.parse import unquote, urlsplit

from evalq.workers.gateway.endpoints import API_NAMES

#: How the credential goes on the upstream request.
AUTH_STYLES = ("bearer", "x-api-key", "api-key", "none")
DEFAULT_PORTS = {"http": 80, "https": 443}


class RouteError(Exception):
    """A request the allowlist refuses; `str(exc)` says why, for the agent and the record."""


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Upstream:
    """One allowlisted endpoint. Requests whose path starts with `mount` go to `url` + the rest
    (`mount` None: the URL's own path, so the gateway mirrors the upstream's paths).

    `credential` names the key in the run's credentials mapping (e.g. "ANTHROPIC_API_KEY"),
    sent as `auth` says. `api` picks the model-call endpoints that pass (endpoints.API_NAMES:
    "anthropic", "openai", or "any" for both). Plain http is allowed for loopback only (a local
    model server)."""

    url: str
    mount: Optional[str] = None
    auth: str = "bearer"
    credential: Optional[str] = None
    api: str = "any"
    scheme: str = field(init=False, repr=False)
    host: str = field(init=False, repr=False)
    port: int = field(init=False, repr=False)
    prefix: str = field(init=False, repr=False)
    #: where the gateway serves it: `mount`, or the URL's own path prefix
    door_path: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
            raise ValueError(f"upstream {self.url!r} is not an http(s) URL with a host; "
                             "write it like https://api.anthropic.com")
        if parts.username or parts.password or parts.query or parts.fragment:
            raise ValueError(f"upstream {self.url!r} must not carry user info, a query or a "
                             "fragment; pass the key through credentials")
        if parts.scheme == "http" and not _is_loopback(parts.hostname):
            raise ValueError(f"upstream {self.url!r} is plain http to a host that is not "
                             "loopback; real providers are reached over https")
        if self.auth not in AUTH_STYLES:
            raise ValueError(f"upstream {self.url!r}: auth {self.auth!r} is not one of "
                             f"{', '.join(AUTH_STYLES)}")
        if self.api not in API_NAMES:
            raise ValueError(f"upstream {self.url!r}: api {self.api!r} is not one of "
                             f"{', '.join(API_NAMES)}")
        prefix = parts.path.rstrip("/")
        mount = prefix or "/" if self.mount is None else self.mount
        if not mount.startswith("/"):
            raise ValueError(f"upstream {self.url!r}: mount {mount!r} must start with /")
        try:
            _check_path(prefix or "/")
        except RouteError as exc:
            raise ValueError(f"upstream {self.url!r}: {exc}") from None
        object.__setattr__(self, "scheme", parts.scheme)
        object.__setattr__(self, "host", parts.hostname.lower())
        object.__setattr__(self, "port", parts.port or DEFAULT_PORTS[parts.scheme])
        object.__setattr__(self, "prefix", prefix)
        object.__setattr__(self, "door_path", "/" + mount.strip("/"))

    @property
    def origin(self) -> str:
        """scheme://host:port, the key its concurrency limit is shared under."""
        return f"{self.scheme}://{self.host}:{self.port}"

    @property
    def base(self) -> str:
        return self.origin + self.prefix

    def covers(self, path: str) -> bool:
        """Whether an (already checked) upstream path lies under this base URL's prefix."""
        return not self.prefix or path == self.prefix or path.startswith(self.prefix + "/")

    def at(self, mount: str) -> "Upstream":
        """The same endpoint mounted elsewhere on the gateway."""
        return replace(self, mount=mount)


def _check_path(path: str) -> None:
    if not path.startswith("/"):
        raise RouteError(f"path {path!r} does not start with /")
    segments = path.split("/")[1:]
    if segments[-1] == "":  # a trailing slash (or the path "/")
        segments.pop()
    for segment in segments:
        decoded = unquote(unquote(segment))
        if decoded in ("", ".", "..") or "/" in decoded or "\\" in decoded:
            raise RouteError(f"path {path!r} has an empty, dot or encoded-slash segment")
        if any(ord(ch) < 0x21 or ord(ch) == 0x7F for ch in decoded):
            raise RouteError(f"path {path!r} has a control or space character")


def as_upstreams(items: Sequence[Union[str, Upstream]]) -> tuple[Upstream, ...]:
    """Upstream objects from URLs or Upstreams; mounts must differ (a URL string mounts at /)."""
    ups = tuple(Upstream(item) if isinstance(item, str) else item for item in items)
    if not ups:
        raise ValueError("a run needs at least one upstream (its allowlist is empty)")
    mounts = [u.door_path for u in ups]
    if len(set(mounts)) != len(mounts):
        raise ValueError(f"two upstreams share a mount in {mounts}; give each its own "
                         "mount, e.g. Upstream(url, mount='/anthropic')")
    return ups


def route(upstreams: Sequence[Upstream], target: str) -> tuple[Upstream, str]:
    """(upstream, absolute URL to forward to) for a request target, or RouteError."""
    if target.startswith(("http://", "https://")):
        return _route_absolute(upstreams, target)
    path, sep, query = target.partition("?")
    _check_path(path)
    mounted = [u for u in upstreams
               if u.door_path == "/" or path == u.door_path
               or path.startswith(u.door_path + "/")]
    if not mounted:
        raise RouteError(f"no allowlisted upstream is mounted at {path!r}")
    upstream = max(mounted, key=lambda u: len(u.door_path))
    rest = path[len(upstream.door_path):] if upstream.door_path != "/" else path  # "" or "/.."
    upstream_path = (upstream.prefix + rest) or "/"
    return upstream, upstream.origin + upstream_path + (sep + query)


def _route_absolute(upstreams: Sequence[Upstream], target: str) -> tuple[Upstream, str]:
    try:
        parts = urlsplit(target)
        port = parts.port or DEFAULT_PORTS[parts.scheme]
    except (ValueError, KeyError):
        raise RouteError(f"{target!r} is not a URL the gateway can forward") from None
    if parts.username or parts.password or parts.fragment:
        raise RouteError("a target URL must not carry user info or a fragment")
    path = parts.path or "/"
    _check_path(path)
    host = (parts.hostname or "").lower()
    for upstream in upstreams:
        if (upstream.scheme, upstream.host, upstream.port) == (parts.scheme, host, port) \
                and upstream.covers(path):
            query = f"?{parts.query}" if parts.query else ""
            return upstream, upstream.origin + path + query
    raise RouteError(f"{parts.scheme}://{host}:{port}{path} is not on this run's allowlist")


#: The providers a shipped adapter talks to, with the credential each one reads.
PROVIDERS = {
    "anthropic": Upstream("https://api.anthropic.com", auth="x-api-key",
                          credential="ANTHROPIC_API_KEY", api="anthropic"),
    "openai": Upstream("https://api.openai.com/v1", auth="bearer", credential="OPENAI_API_KEY",
                       api="openai"),
}
