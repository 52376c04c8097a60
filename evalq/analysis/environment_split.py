"""A study whose environment changed part-way is several studies: each part compared on its own.

Results are valid only for the environment they were recorded in (model revision, tools,
harness, repository): when any recorded field changes within a study, the runs are split by
environment and each part gets its own paired comparisons, and the claims say the pooled
figures mix environments. A run's environment is its counted attempt's recorded one (an
imported row's env block, a native attempt's worker environment); runs without one (not
finished) belong to no part.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from evalq.analysis.runs import Run
from evalq.ops.environments import differing_fields, flatten
from evalq.report.json_text import dumps


def run_environment(run: Run) -> Optional[dict[str, Any]]:
    counted = run.view.counted
    return (counted.worker_env or None) if counted is not None else None


def environment_split(runs: list[Run],
                      compare: Callable[[list[Run]], list[dict[str, Any]]]
                      ) -> Optional[dict[str, Any]]:
    """None when every finished run shares one environment; else each environment's part
    (its differing values, runs, tasks, and `compare(part)`: that part's comparisons)."""
    parts: dict[str, list[Run]] = {}
    envs: dict[str, dict[str, Any]] = {}
    without = 0
    for run in sorted(runs, key=lambda r: r.order):
        env = run_environment(run)
        if env is None:
            without += 1
            continue
        key = dumps(env, sort_keys=True)
        envs.setdefault(key, env)
        parts.setdefault(key, []).append(run)
    if len(parts) < 2:
        return None
    fields = differing_fields(envs.values())
    block = []
    for number, (key, part) in enumerate(parts.items(), start=1):
        flat = flatten(envs[key])
        block.append({"environment": number,
                      "values": {f: flat.get(f) for f in fields},
                      "runs": len(part), "tasks": len({r.task for r in part}),
                      "conditions": sorted({r.condition for r in part}),
                      "first_order": part[0].order, "last_order": part[-1].order,
                      "comparisons": compare(part)})
    return {"environments": len(block), "differing_fields": fields, "parts": block,
            "runs_without_environment": without}


def split_reasons(split: Optional[dict[str, Any]]) -> list[str]:
    """The claims reason an environment change gives."""
    if not split:
        return []
    fields = ", ".join(split["differing_fields"])
    return [f"the environment changed within the study ({split['environments']} environments, "
            f"differing in {fields}): each environment's part is reported as its own comparison "
            "(environment_split); the pooled comparisons mix environments"]
