"""Which settings two compared sides differ in, with anything that looks like a credential hidden.

A refused comparison that shows two settings digests says *that* something differs; this says
*what*, as dotted keys with both values. Values under credential-like keys, and values shaped
like tokens, are shown as [redacted]: the message may end up in logs and tickets.
"""

from __future__ import annotations

import re
from typing import Any

REDACTED = "[redacted]"
SECRET_KEY = re.compile(r"api[_-]?key|token|secret|passw(or)?d|credential|auth|cookie|"
                        r"private[_-]?key|bearer|session|signature|dsn", re.IGNORECASE)
SECRET_VALUE = re.compile(r"^(sk-|sk_|ghp_|gho_|github_pat_|xox[abprs]-|AKIA|ASIA|AIza|eyJ)|"
                          r"^(bearer|basic|token)\s|^[A-Za-z0-9+/_=.-]{32,}$|://[^/\s]*:[^/\s]*@",
                          re.IGNORECASE)
#: A credential handed over inside a value: "--token=…", "API_KEY: …".
ASSIGNED = re.compile(rf"(?:{SECRET_KEY.pattern})[\w-]*\s*[=:]", re.IGNORECASE)
MISSING = "(not set)"


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """{dotted.key: leaf} for nested dicts; lists and scalars are leaves."""
    if not isinstance(value, dict):
        return {prefix: value}
    out: dict[str, Any] = {}
    for key in sorted(value, key=str):
        out.update(flatten(value[key], f"{prefix}.{key}" if prefix else str(key)))
    return out


def shown(key: str, value: Any) -> str:
    """The value as a person may see it: credential-like keys and values redacted."""
    if SECRET_KEY.search(key):
        return REDACTED
    if isinstance(value, list):
        return "[" + ", ".join(shown(key, v) for v in value) + "]"
    if isinstance(value, dict):  # inside a list: flatten() does not reach it
        return "{" + ", ".join(f"{k}: {shown(f'{key}.{k}', v)}" for k, v in value.items()) + "}"
    if isinstance(value, str) and (SECRET_VALUE.search(value) or ASSIGNED.search(value)):
        return REDACTED
    return repr(value) if isinstance(value, str) else str(value)


def differing_settings(baseline: dict[str, Any] | None,
                       candidate: dict[str, Any] | None) -> list[dict[str, str]]:
    """[{key, baseline, candidate}] for every dotted key whose values differ, values redacted."""
    a, b = flatten(baseline or {}), flatten(candidate or {})
    rows = []
    for key in sorted(a.keys() | b.keys()):
        if a.get(key, MISSING) != b.get(key, MISSING):
            rows.append({"key": key,
                         "baseline": shown(key, a[key]) if key in a else MISSING,
                         "candidate": shown(key, b[key]) if key in b else MISSING})
    return rows


def describe_differences(rows: list[dict[str, str]]) -> str:
    return ", ".join(f"{r['key']}: {r['baseline']} vs {r['candidate']}" for r in rows)
