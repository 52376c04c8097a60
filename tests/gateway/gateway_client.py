"""One request over a run's gateway socket, and everything the agent could read of the reply."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

from evalq.workers.gateway.unix_client import UnixConnection


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    raw: bytes

    def json(self) -> Any:
        return json.loads(self.raw)

    def seen(self) -> str:
        """Everything the agent could read of this reply."""
        return json.dumps(self.headers) + self.raw.decode("utf-8", "replace")


def send(path: str, target: str, body: Optional[dict] = None, headers: Optional[dict] = None,
         method: str = "POST") -> Reply:
    conn = UnixConnection(path)
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, target, body=data, headers={
            "Content-Type": "application/json", **(headers or {})})
        response = conn.getresponse()
        return Reply(response.status, dict(response.getheaders()), response.read())
    finally:
        conn.close()
