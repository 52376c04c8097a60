"""A small adjudicated-results-shaped dataset (results, raters, adjudications), deterministic from a seed.

Fixed raters ("r1", "r2") score every run; with rotating=True two of four raters score each
run. human_accepted ratings of the first 50 runs follow the published Cohen's kappa example
(20 yes/yes, 5 yes/no, 10 no/yes, 15 no/no: kappa = 0.4); the other runs leave it unrated.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

FIELDS = ("passed", "validation_passed", "human_accepted", "regression", "rework_required",
          "requirements_traceability")
CONDITIONS = ("single_prompt", "workflow_guided")
COHEN_TABLE = [(True, True)] * 20 + [(True, False)] * 5 + [(False, True)] * 10 + \
    [(False, False)] * 15


def generate(folder: Path, *, tasks: int = 10, k: int = 3, seed: int = 1,
             rotating: bool = False, extra: dict | None = None) -> dict[str, Path]:
    rng = random.Random(seed)
    results, raters, adjudications = [], [], []
    order = 0
    index = 0
    for t in range(tasks):
        base = rng.random() * 0.6
        for cond in CONDITIONS:
            p = base + (0.3 if cond == "workflow_guided" else 0.0)
            for run in range(1, k + 1):
                order += 1
                final = {"passed": rng.random() < p, "validation_passed": rng.random() < p + 0.1,
                         "human_accepted": rng.random() < p, "regression": rng.random() < 0.2,
                         "rework_required": rng.random() < 0.3,
                         "requirements_traceability": rng.random() < 0.5}
                ids = rng.sample(["r1", "r2", "r3", "r4"], 2) if rotating else ["r1", "r2"]
                scores = {i: dict(final) for i in ids}
                for field in FIELDS:
                    if rng.random() < 0.15:
                        scores[ids[1]][field] = not final[field]
                if index < len(COHEN_TABLE):
                    a, b = COHEN_TABLE[index]
                    scores[ids[0]]["human_accepted"], scores[ids[1]]["human_accepted"] = a, b
                    final["human_accepted"] = a
                else:
                    for i in ids:
                        scores[i]["human_accepted"] = None
                index += 1
                disagree = {f: final[f] for f in FIELDS
                            if scores[ids[0]][f] is not None and scores[ids[0]][f] != scores[ids[1]][f]}
                row = {"task_id": f"task-{t:03d}", "condition": cond, "workflow": "bug-fix",
                       "run_id": run, "run_order": order,
                       "env": {"model_provider": "example", "model_id": "m-2026-05-01",
                               "model_parameters": {"temperature": 0.2}, "repo_sha": "abc1234",
                               "tool_access": ["read", "edit"], "time_budget_seconds": 1800,
                               "prompt_template_version": "v3.1",
                               "agent_harness_version": "v1.4.0", "kit_version": "2.1.0"},
                       "artifact_path": f"artifacts/task-{t:03d}/{cond}/run{run}/",
                       "blinded_artifact_path": f"artifacts/blinded/run-{order:04d}.diff",
                       **final, "public_validation_passed": final["validation_passed"],
                       "hidden_validation_passed": rng.random() < 0.85,
                       "cycle_time_seconds": rng.randint(300, 1800),
                       "adjudicated": bool(disagree), "rater_ids": ids, "notes": None}
                row.update((extra or {}).get(f"task-{t:03d}", {}))
                results.append(row)
                for i in ids:
                    raters.append({"task_id": row["task_id"], "condition": cond, "run_id": run,
                                   "rater_id": i, **scores[i]})
                if disagree:
                    adjudications.append({"task_id": row["task_id"], "condition": cond,
                                          "run_id": run, "adjudicator_id": "r9", **disagree})
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, rows in (("results", results), ("raters", raters),
                       ("adjudications", adjudications)):
        paths[name] = folder / f"{name}.jsonl"
        paths[name].write_text("".join(json.dumps(r) + "\n" for r in rows))
    return paths


def adjudicate(paths: dict[str, Path]) -> Path:
    """Write adjudications.jsonl settling every outcome the raters of a run disagree on with
    the results row's value (what a third rater decided), and return its path."""
    results = [json.loads(line) for line in paths["results"].read_text().splitlines()]
    final = {(r["task_id"], r["condition"], r["run_id"]): r for r in results}
    scores: dict = {}
    for line in paths["raters"].read_text().splitlines():
        r = json.loads(line)
        scores.setdefault((r["task_id"], r["condition"], r["run_id"]), []).append(r)
    rows = []
    for key, ratings in scores.items():
        split = {f: final[key][f] for f in FIELDS
                 if len({r[f] for r in ratings if r[f] is not None}) > 1}
        if split:
            rows.append({"task_id": key[0], "condition": key[1], "run_id": key[2],
                         "adjudicator_id": "r9", **split})
    paths["adjudications"] = paths["raters"].parent / "adjudications.jsonl"
    paths["adjudications"].write_text("".join(json.dumps(r) + "\n" for r in rows))
    return paths["adjudications"]
