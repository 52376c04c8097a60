"""Whether each condition's runs used the model it pins, as the gateway saw it.

The model is a pinned input, but a request's model is whatever the agent writes in it: a
condition pinned to a small model could reach a larger one its provider also serves and buy
a better score with a model the study is not about. The gateway records the models each
metered run asked for (`wire_models`); a run that asked for one outside the condition's
`model` and its `settings.allowed_models` (side models an agent legitimately uses) is named
here, and makes the claims exploratory. A condition that pins no model is not checked.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Optional

from evalq.plaintext import one_line


def allowed_models(condition: dict[str, Any]) -> Optional[set[str]]:
    """The pinned model and the declared extras, or None when the condition pins none."""
    settings = condition.get("settings") or {}
    pinned = condition.get("model") or settings.get("model")
    if not isinstance(pinned, str) or not pinned:
        return None
    extra = settings.get("allowed_models") or []
    named = {pinned, *(m for m in extra if isinstance(m, str))} if isinstance(extra, list) \
        else {pinned}
    # `openai/gpt-5` (opencode's and litellm's way to write it) is sent as `gpt-5`
    return named | {m.rsplit("/", 1)[-1] for m in named}


def pinning_block(conditions: list[dict[str, Any]], runs: Iterable[Any]) -> dict[str, Any]:
    """Per condition: {"allowed", "runs_checked", "off_pin_runs", "off_pin_models"}; a run is
    checked when the gateway metered its counted attempt."""
    by_name = {c.get("name"): c for c in conditions}
    checked: Counter = Counter()
    off_runs: Counter = Counter()
    off_models: dict[str, Counter] = {}
    for run in runs:
        asked = run.counted_metrics.get("wire_models")
        allowed = allowed_models(by_name.get(run.condition) or {})
        if asked is None or allowed is None:
            continue
        checked[run.condition] += 1
        other = [m for m in asked if m not in allowed]
        if other:
            off_runs[run.condition] += 1
            off_models.setdefault(run.condition, Counter()).update(other)
    block = {}
    for name, condition in by_name.items():
        allowed = allowed_models(condition)
        block[name] = {"allowed": sorted(allowed) if allowed else None,
                       "runs_checked": checked[name], "off_pin_runs": off_runs[name],
                       "off_pin_models": dict(sorted((off_models.get(name) or {}).items()))}
    return block


def pinning_reasons(block: dict[str, Any]) -> list[str]:
    """A claims reason per condition whose runs asked for a model it does not pin."""
    return [f"{entry['off_pin_runs']} run(s) of {name} asked the model gateway for a model "
            f"the condition does not pin ({', '.join(entry['off_pin_models'])})"
            for name, entry in block.items() if entry["off_pin_runs"]]


def describe(block: Optional[dict[str, Any]]) -> str:
    """One line for the report's header."""
    if not block:
        return "unavailable"
    checked = sum(e["runs_checked"] for e in block.values())
    off = {n: e for n, e in block.items() if e["off_pin_runs"]}
    if not checked:
        return "unavailable (no run was metered by the model gateway against a pinned model)"
    if not off:
        return f"held ({checked} metered run(s) asked only for their condition's models)"
    return "**not held**: " + "; ".join(
        f"{n}: {e['off_pin_runs']} of {e['runs_checked']} run(s) asked for "
        f"{one_line(', '.join(e['off_pin_models']), 200)}" for n, e in off.items())
