"""The scripted conversation a model server replays: turns of text, tool calls and usage."""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Optional

from evalq.errors import UserError

USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
TURN_KEYS = ("text", "tool_calls", "usage", "match", "no_usage", "status")


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Turn:
    """One assistant reply. `match` limits which requests may consume it (see `Turn.matches`)."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: dict[str, Optional[int]] = field(default_factory=dict)
    match: dict[str, Any] = field(default_factory=dict)
    #: True: the reply carries no usage object at all, in every format (a provider that omits it).
    no_usage: bool = False
    #: An HTTP error status (429, 500, ...) replied instead of the turn, in the provider's shape.
    status: Optional[int] = None

    @property
    def reported_usage(self) -> dict[str, Optional[int]]:
        """The usage this turn puts on the wire (empty when it reports none)."""
        return {} if self.no_usage or self.status else dict(self.usage)

    def matches(self, request: dict[str, Any]) -> bool:
        """`tools`: the request must (True) or must not (False) declare tools; `tool`: one tool
        name it must declare; `contains`: text the request body must hold."""
        tools = request.get("tools") or []
        names = {t.get("name") or (t.get("function") or {}).get("name") for t in tools}
        if "tools" in self.match and bool(tools) != bool(self.match["tools"]):
            return False
        if "tool" in self.match and self.match["tool"] not in names:
            return False
        if "contains" in self.match and self.match["contains"] not in json.dumps(request):
            return False
        return True


@dataclass(frozen=True)
class Script:
    turns: tuple[Turn, ...]
    fallback: Turn = Turn(text="OK.")


def _turn(raw: dict[str, Any], where: str) -> Turn:
    unknown = set(raw) - set(TURN_KEYS)
    if unknown:
        raise UserError(f"unknown keys {sorted(unknown)} in {where}", field=where,
                        fix=f"use {', '.join(TURN_KEYS)}")
    status = raw.get("status")
    if status is not None and (not isinstance(status, int) or not 400 <= status <= 599):
        raise UserError(f"status {status!r} is not an HTTP error status", field=f"{where}.status",
                        fix="use an integer from 400 to 599, e.g. 429 or 503")
    usage = raw.get("usage") or {}
    bad = set(usage) - set(USAGE_KEYS)
    if bad:
        raise UserError(f"unknown usage keys {sorted(bad)}", field=f"{where}.usage",
                        fix=f"use {', '.join(USAGE_KEYS)}")
    calls = tuple(ToolCall(name=c["name"], arguments=dict(c.get("arguments") or {}))
                  for c in raw.get("tool_calls") or [])
    return Turn(text=raw.get("text", ""), tool_calls=calls, usage=dict(usage),
                match=dict(raw.get("match") or {}), no_usage=bool(raw.get("no_usage", False)),
                status=status)


def parse_script(data: dict[str, Any]) -> Script:
    """`no_usage = true` at the top: a server that reports no usage at all, in every turn."""
    turns = tuple(_turn(t, f"turns[{i}]") for i, t in enumerate(data.get("turns") or []))
    fallback = _turn(data["fallback"], "fallback") if "fallback" in data else Turn(text="OK.")
    if data.get("no_usage"):
        turns = tuple(replace(t, no_usage=True) for t in turns)
        fallback = replace(fallback, no_usage=True)
    return Script(turns=turns, fallback=fallback)


def load_script(path: Path) -> Script:
    """A script file in JSON or TOML: {turns = [...], fallback = {...}}."""
    text = path.read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise UserError(f"cannot parse the model script: {exc}", file=str(path),
                        fix="write JSON or TOML") from None
    return parse_script(data)
