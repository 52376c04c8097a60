"""A fake provider as strict as the real ones, on loopback: the scripted model server's replies
behind the checks Anthropic's and OpenAI's APIs make before they answer.

The scripted server routes by path ending, which hid a gateway that sent `/v1/v1/responses`.
This one answers only the documented paths of its API (404 for anything else, reads
included), wants the key where that API wants it (`x-api-key` with an `anthropic-version`
for Anthropic, `Authorization: Bearer` for OpenAI; 401 otherwise) and refuses bodies the real
API refuses (400). Everything it refused is kept in `rejected`, so a test asserts it is empty.
"""

from __future__ import annotations

import io
import json
from typing import Any, Optional

from evalq.modelserver import ModelServer
from evalq.modelserver.script import Script

#: the documented POST endpoints of each API (no GET: no agent needs one through the door)
OFFICIAL = {"anthropic": {"/v1/messages", "/v1/messages/count_tokens"},
            "openai": {"/v1/chat/completions", "/v1/responses"}}
ROLES = {"anthropic": {"user", "assistant"},
         "openai": {"system", "developer", "user", "assistant", "tool", "function"}}


def _problem(api: str, path: str, body: Any) -> Optional[str]:
    """What the real API would answer 400 for, or None."""
    if not isinstance(body, dict):
        return "the body is not a JSON object"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model: field required"
    if path == "/v1/responses":
        if not isinstance(body.get("input"), (str, list)):
            return "input: a string or a list of items is required"
        return None
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: a non-empty list is required"
    if any(not isinstance(m, dict) or m.get("role") not in ROLES[api] for m in messages):
        return "messages: every message needs a valid role"
    if api == "anthropic":
        if "stream_options" in body:
            return "stream_options: Extra inputs are not permitted"
        if path == "/v1/messages" and not (isinstance(body.get("max_tokens"), int)
                                           and body["max_tokens"] > 0):
            return "max_tokens: field required"
        return None
    if "stream_options" in body and body.get("stream") is not True:
        return "The 'stream_options' parameter is only allowed when 'stream' is enabled."
    return None


def _error(api: str, status: int, kind: str, message: str) -> dict[str, Any]:
    if api == "anthropic":
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "code": None, "param": None}}


class StrictProvider(ModelServer):
    """`with StrictProvider(script, "openai", key) as provider:` a provider at provider.url
    whose documented paths start at /v1 (like https://api.openai.com/v1 and
    https://api.anthropic.com/v1)."""

    def __init__(self, script: Script, api: str, key: str, **kwargs: Any):
        super().__init__(script, **kwargs)
        if api not in OFFICIAL:
            raise ValueError(f"api {api!r} is not one of {', '.join(OFFICIAL)}")
        self.api, self.key = api, key
        #: (method, path, status, why) of every request refused
        self.rejected: list[tuple[str, str, int, str]] = []
        self.httpd.RequestHandlerClass = _strict(self, self.httpd.RequestHandlerClass)

    def check(self, method: str, path: str, headers: Any, raw: bytes) -> Optional[tuple]:
        """(status, kind, message) when the request is refused, else None."""
        if method != "POST" or path not in OFFICIAL[self.api]:
            return 404, "not_found_error", f"{method} {path} is not a {self.api} endpoint"
        if self.api == "anthropic":
            if headers.get("x-api-key") != self.key or not headers.get("anthropic-version"):
                return 401, "authentication_error", "invalid x-api-key or no anthropic-version"
        elif headers.get("Authorization") != f"Bearer {self.key}":
            return 401, "invalid_request_error", "Incorrect API key provided"
        try:
            body = json.loads(raw)
        except ValueError:
            return 400, "invalid_request_error", "the body is not JSON"
        problem = _problem(self.api, path, body)
        return None if problem is None else (400, "invalid_request_error", problem)


def _strict(provider: StrictProvider, base: type) -> type:
    class Strict(base):  # type: ignore[misc, valid-type]
        def _gate(self, method: str) -> bool:
            """Refuse what the real API refuses; True when the request may be answered."""
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            path = self.path.split("?", 1)[0]
            refusal = provider.check(method, path, self.headers, raw)
            if refusal is None:
                self.body = raw
                return True
            status, kind, message = refusal
            with provider.lock:
                provider.rejected.append((method, self.path, status, message))
            self._json(status, _error(provider.api, status, kind, message))
            return False

        def do_POST(self) -> None:  # noqa: N802
            if self._gate("POST"):
                connection, self.rfile = self.rfile, io.BytesIO(self.body)  # read again
                try:
                    super().do_POST()
                finally:
                    self.rfile = connection

        def do_GET(self) -> None:  # noqa: N802
            self._gate("GET")

        def do_HEAD(self) -> None:  # noqa: N802
            self._gate("HEAD")

        def do_DELETE(self) -> None:  # noqa: N802
            self._gate("DELETE")

        def do_PUT(self) -> None:  # noqa: N802
            self._gate("PUT")

        def do_PATCH(self) -> None:  # noqa: N802
            self._gate("PATCH")

        def do_OPTIONS(self) -> None:  # noqa: N802
            self._gate("OPTIONS")

    return Strict
