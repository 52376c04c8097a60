"""The HTTP side of the scripted model server: loopback only, one thread per request.

Every reply is written to a ledger (which turn, the usage reported, the request's headers), so a
test can compare what the agent and evalq recorded against what the "provider" said, request by
request. A test can also hold replies behind a gate and watch how many requests are in flight
(to check a concurrency limit without sleeping).
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional

from evalq.report.json_text import dumps
from evalq.modelserver.script import USAGE_KEYS, Script, ToolCall, Turn
from evalq.modelserver.responses import response_object, responses_stream
from evalq.modelserver.wire import (anthropic_message, anthropic_stream, error_body,
                                    openai_completion, openai_stream)

#: Which API a POST path speaks, by its ending.
ROUTES = (("/messages", "anthropic"), ("/chat/completions", "openai"),
          ("/responses", "responses"))

#: Where agents say their working directory; `{cwd}` in scripted tool arguments becomes it.
CWD_PATTERNS = (re.compile(r"[Ww]orking directory: (/[^\s<\"'\\]+)"),
                re.compile(r"\bcwd[\"']?\s*[:=]\s*[\"']?(/[^\s<\"'\\]+)"))


#: connections the listening socket queues before accept (socketserver's default is 5: a
#: burst of a few hundred agents connecting at once got connection resets)
LISTEN_BACKLOG = 1024


class _Server(ThreadingHTTPServer):
    request_queue_size = LISTEN_BACKLOG


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
    headers: dict[str, str] = field(default_factory=dict)
    status: int = 200


class ModelServer:
    """`with ModelServer(script) as server:` serves on 127.0.0.1:<free port> until the block ends."""

    def __init__(self, script: Script, host: str = "127.0.0.1", port: int = 0,
                 gate: Optional[threading.Event] = None):
        """`gate`: when given, every model reply waits until it is set (at most a minute)."""
        if host not in ("127.0.0.1", "::1", "localhost"):
            raise ValueError(f"the scripted model server binds to loopback only, not {host!r}")
        self.script = script
        self.cursor = 0
        self.exchanges: list[Exchange] = []
        self.lock = threading.Lock()
        self.gate = gate
        self.in_flight = 0
        self.max_in_flight = 0
        self.changed = threading.Condition(self.lock)
        self.httpd = _Server((host, port), _handler(self))
        self.httpd.daemon_threads = True
        self.thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "ModelServer":
        # a short poll interval: stop() returns within 50 ms instead of 500
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
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

    def enter(self) -> None:
        with self.changed:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.changed.notify_all()
        if self.gate is not None:
            self.gate.wait(60)

    def leave(self) -> None:
        with self.changed:
            self.in_flight -= 1
            self.changed.notify_all()

    def wait_in_flight(self, count: int, timeout: float = 10.0) -> bool:
        """Block until exactly `count` model requests are being answered; False on timeout."""
        with self.changed:
            return self.changed.wait_for(lambda: self.in_flight == count, timeout)

    @property
    def finished(self) -> bool:
        """Whether every scripted turn has been served."""
        return self.cursor >= len(self.script.turns)

    def reported(self, only_scripted: bool = False) -> dict[str, Optional[int]]:
        """Sums of the usage reported so far, per key; None for a key no reply reported."""
        totals: dict[str, Optional[int]] = {k: None for k in USAGE_KEYS}
        for ex in self.exchanges:
            if ex.status != 200 or (only_scripted and ex.turn is None):
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
        # head and body are two writes: without TCP_NODELAY a kept-alive client waits ~40 ms
        # for the body (Nagle against delayed ACK)
        disable_nagle_algorithm = True

        def log_message(self, fmt: str, *args: Any) -> None:  # quiet: the ledger is the log
            return

        def _json(self, status: int, payload: Any) -> None:
            data = dumps(payload).encode()
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
            api = next((name for end, name in ROUTES if path.endswith(end)), None)
            if api is None:
                self._json(404, {"error": {"message": f"no route {self.path}"}})
                return
            server.enter()
            try:
                self._reply(path, api, body)
            finally:
                server.leave()

        def _reply(self, path: str, api: str, body: dict[str, Any]) -> None:
            index, turn = server.next_turn(body)
            turn = _substitute(turn, body)
            model = body.get("model") or "scripted"
            stream = bool(body.get("stream"))
            tools = body.get("tools") or []
            server.record(Exchange(
                path=path, api=api, model=model, stream=stream, turn=index,
                usage={k: turn.reported_usage.get(k) for k in USAGE_KEYS},
                tool_names=[t.get("name") or (t.get("function") or {}).get("name", "")
                            for t in tools], body=body, headers=dict(self.headers.items()),
                status=turn.status or 200))
            if turn.status:
                self._json(turn.status, error_body(api, turn.status))
            elif api == "anthropic":
                if stream:
                    self._events(anthropic_stream(turn, model))
                else:
                    self._json(200, anthropic_message(turn, model))
            elif api == "responses":
                if stream:
                    self._events(responses_stream(turn, model))
                else:
                    self._json(200, response_object(turn, model))
            elif stream:
                include = bool((body.get("stream_options") or {}).get("include_usage"))
                self._events(openai_stream(turn, model, include))
            else:
                self._json(200, openai_completion(turn, model))

    return Handler
