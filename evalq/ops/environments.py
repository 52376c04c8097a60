"""Which worker-environment fields differ between a study's attempts.

A study whose attempts ran under differing worker environments (OS, Python, agent tool
versions) is flagged in `evalq status` and in the report, naming the differing fields.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping, Optional
from evalq.report.json_text import dumps


def flatten(env: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested environment dicts as dotted keys, e.g. {'agents.claude': '1.0'}."""
    flat: dict[str, Any] = {}
    for key, value in env.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def differing_fields(environments: Iterable[Optional[Mapping[str, Any]]]) -> dict[str, list]:
    """Field -> sorted distinct values, for every field whose value is not the same everywhere.

    Attempts without a recorded environment (None) are ignored; a field missing from one
    environment but present in another counts as differing (its value shown as None).
    """
    flats = [flatten(env) for env in environments if env]
    keys = sorted({k for flat in flats for k in flat})
    result: dict[str, list] = {}
    for key in keys:
        values = {dumps(flat.get(key), sort_keys=True) for flat in flats}
        if len(values) > 1:
            result[key] = [json.loads(v) for v in sorted(values)]
    return result


def study_environment_flag(attempts: Iterable[Any]) -> Optional[dict]:
    """The report/status flag: None when all attempts agree, else the differing fields and hosts.

    `attempts` are AttemptRow-like objects (worker_env, worker_host attributes). Call it from the
    report with `attempts_of(engine, study_id)` and put the result under "worker_environments".
    """
    rows = [a for a in attempts if getattr(a, "worker_env", None)]
    fields = differing_fields(a.worker_env for a in rows)
    if not fields:
        return None
    by_field: dict[str, dict[str, list[str]]] = {}
    for key in fields:
        hosts: dict[str, set[str]] = {}
        for row in rows:
            value = dumps(flatten(row.worker_env).get(key), sort_keys=True)
            hosts.setdefault(value, set()).add(row.worker_host or "unknown")
        by_field[key] = {v: sorted(h) for v, h in hosts.items()}
    return {"differing_fields": fields, "hosts_by_value": by_field}


def describe(flag: Optional[dict]) -> Optional[str]:
    """One line for people, e.g. 'worker environments differ in python (3.11.2, 3.12.1)'."""
    if not flag:
        return None
    parts = [f"{key} ({', '.join('unavailable' if v is None else str(v) for v in values)})"
             for key, values in flag["differing_fields"].items()]
    return "worker environments differ in " + "; ".join(parts)
