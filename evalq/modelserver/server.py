"""The HTTP side of the scripted model server: loopback only, one thread per request.

Every reply is written to a ledger (which turn, the usage reported), so a test can compare what
the agent and evalq recorded against what the "provider" said, request by request.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional

from evalq.modelserver.script import USAGE_KEYS, Script, ToolCall, Turn
from evalq.modelserver.wire import (anthropic_message, anthropic_stream, openai_completion, openai_stream)

#: Where agents say their working directory; `{cwd}` in scripted tool arguments becomes it.
CWD_PATTERNS = (re.compile(r"[Ww]orking directory: (/[^\s<\"'\\]+)"),
                re.compile(r"\bcwd[\"']?\s*[:=]\s*[\"']?(/[^\s<\"'\\]+)"))


@dataclass
class Exchange:
    """One request and what was replied."""

    path: str
    api: str
    model: Optional[str]
    stream: bool
    turn: Optional[int]
    usage: dict[str, Optional[int]]
    tool_names: list[str] = field(default_factory=list)
    body: dict[str, Any] = field(default_factory=dict)


class ModelServer:
    """`with ModelServer(script) as server:` serves on 127.0.0.1:<free port> until the block ends."""

    def __init__(self, script: Script, host: str = "127.0.0.1", port: int = 0):
        if host not in ("127.0.0.1", "::1", "localhost"):
            raise ValueError(f"the scripted model server binds to loopback only, not {host!r}")
        self.script = script
        self.cursor = 0
        self.exchanges: list[Exchange] = []
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer((host, port), _handler(self))
        self.httpd.daemon_threads = True
        self.thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "ModelServer":
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> "ModelServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---------------------------------------------------------------- replaying
    def next_turn(self, body: dict[str, Any]) -> tuple[Optional[int], Turn]:
        with self.lock:
            if self.cursor < len(self.script.turns) and \
                    self.script.turns[self.cursor].matches(body):
                self.cursor += 1
                return self.cursor - 1, self.script.turns[self.cursor - 1]
            return None, self.script.fallback

    def record(self, exchange: Exchange) -> None:
        with self.lock:
            self.exchanges.append(exchange)

    @property
    def finished(self) -> bool:
        """Whether every scripted turn has been served."""
        return self.cursor >= len(self.script.turns)

    def reported(self, only_scripted: bool = False) -> dict[str, Optional[int]]:
        """Sums of the usage reported so far, per key; None for a key no reply reported."""
        totals: dict[str, Optional[int]] = {k: None for k in USAGE_KEYS}
        for ex in self.exchanges:
            if only_scripted and ex.turn is None:
                continue
            for key in USAGE_KEYS:
                if ex.usage.get(key) is not None:
                    totals[key] = (totals[key] or 0) + ex.usage[key]
        return totals


def _substitute(turn: Turn, body: dict[str, Any]) -> Turn:
    """Fill `{cwd}` in tool arguments from the working directory the request itself names."""
    if not any("{cwd}" in json.dumps(c.arguments) for c in turn.tool_calls):
        return turn
    text = json.dumps(body)
    cwd = next((m.group(1) for p in CWD_PATTERNS for m in [p.search(text)] if m), None)
    if cwd is None:
        return turn
    calls = tuple(ToolCall(c.name, json.loads(json.dumps(c.arguments).replace("{cwd}", cwd)))
                  for c in turn.tool_calls)
    return replace(turn, tool_calls=calls)


def _handler(server: ModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt: str, *args: Any) -> None:  # quiet: the ledger is the log
            return

        def _json(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _events(self, chunks) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for chunk in chunks:
                self.wfile.write(chunk)
                self.wfile.flush()
            self.close_connection = True

        def do_GET(self) -> None:  # noqa: N802
            if self.path.rstrip("/").endswith("/models"):
                self._json(200, {"object": "list", "data": [
                    {"id": "scripted", "object": "model", "owned_by": "evalq"}]})
            else:
                self._json(404, {"error": {"message": f"no route {self.path}"}})

        def do_HEAD(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except json.JSONDecodeError:
                self._json(400, {"error": {"message": "body is not JSON"}})
                return
            path = self.path.split("?")[0].rstrip("/")
            if path.endswith("/messages/count_tokens"):
                self._json(200, {"input_tokens": max(1, len(json.dumps(body)) // 4)})
                return
            if path.endswith("/messages"):
                api = "anthropic"
            elif path.endswith("/chat/completions"):
                api = "openai"
            else:
                self._json(404, {"error": {"message": f"no route {self.path}"}})
                return
            index, turn = server.next_turn(body)
            turn = _substitute(turn, body)
            model = body.get("model") or "scripted"
            stream = bool(body.get("stream"))
            tools = body.get("tools") or []
            server.record(Exchange(
                path=path, api=api, model=model, stream=stream, turn=index,
                usage={k: turn.usage.get(k) for k in USAGE_KEYS},
                tool_names=[t.get("name") or (t.get("function") or {}).get("name", "")
                            for t in tools], body=body))
            if api == "anthropic":
                if stream:
                    self._events(anthropic_stream(turn, model))
                else:
                    self._json(200, anthropic_message(turn, model))
            elif stream:
                include = bool((body.get("stream_options") or {}).get("include_usage"))
                self._events(openai_stream(turn, model, include))
            else:
                self._json(200, openai_completion(turn, model))

    return Handler
