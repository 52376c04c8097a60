"""`evalq import` of an adjudicated results.jsonl: 1,000 tasks x 2 conditions x 50 runs,
two ratings per run, against the bulk writer alone inserting the same rows (the floor), on
SQLite and PostgreSQL. Each side runs in its own process; peak RSS is the import's own.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

from .figures import Figure, ratio
from .services import child_env, database

RATIO_TARGET = 3.0
MEMORY_TARGET_MIB = 512.0
FIELDS = ("passed", "validation_passed", "human_accepted", "regression", "rework_required",
          "requirements_traceability")


def write_inputs(folder: Path, tasks: int, runs: int) -> tuple[Path, Path]:
    """results.jsonl and raters.jsonl in the rated-study import shape, deterministic."""
    rng = random.Random(3)
    folder.mkdir(parents=True, exist_ok=True)
    results, raters = folder / "results.jsonl", folder / "raters.jsonl"
    order = 0
    with results.open("w") as res, raters.open("w") as rat:
        for t in range(tasks):
            for cond in ("single_prompt", "workflow_guided"):
                for run in range(1, runs + 1):
                    order += 1
                    scores = {f: rng.random() < 0.6 for f in FIELDS}
                    ids = rng.sample(["r1", "r2", "r3", "r4"], 2)
                    row = {"task_id": f"task-{t:04d}", "condition": cond, "workflow": "bug-fix",
                           "run_id": run, "run_order": order,
                           "env": {"model_provider": "example", "model_id": "m-2026-05-01",
                                   "model_parameters": {"temperature": 0.2},
                                   "repo_sha": "abc1234", "tool_access": ["read", "edit"],
                                   "time_budget_seconds": 1800,
                                   "prompt_template_version": "v3.1",
                                   "agent_harness_version": "v1.4.0", "kit_version": "2.1.0"},
                           "artifact_path": f"artifacts/task-{t:04d}/{cond}/run{run}/",
                           "blinded_artifact_path": f"artifacts/blinded/run-{order:06d}.diff",
                           **scores, "public_validation_passed": scores["validation_passed"],
                           "hidden_validation_passed": rng.random() < 0.8,
                           "cycle_time_seconds": rng.randint(300, 1800), "adjudicated": False,
                           "rater_ids": ids, "notes": None}
                    res.write(json.dumps(row) + "\n")
                    for rater in ids:
                        rat.write(json.dumps({"task_id": row["task_id"], "condition": cond,
                                              "run_id": run, "rater_id": rater, **scores})
                                  + "\n")
    return results, raters


def _child(mode: str, url: str, results: Path, raters: Path) -> dict:
    proc = subprocess.run([sys.executable, "-m", "bench.import_child", mode, url, str(results),
                           str(raters)], env=child_env({}), capture_output=True, text=True,
                          timeout=1800, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"import_child {mode} failed: {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(workdir: Path, tasks: int, runs: int, log) -> tuple[list[Figure], dict]:
    results, raters = write_inputs(workdir / "inputs", tasks, runs)
    rows = tasks * 2 * runs
    figures: list[Figure] = []
    data: dict = {"rows": rows, "ratings": rows * 2}
    for kind in ("sqlite", "postgres"):
        with database(workdir, kind) as (url, what):
            floor = _child("floor", url, results, raters)
        with database(workdir, kind) as (url, what):
            imported = _child("import", url, results, raters)
        log(f"import {rows} rows on {what}: {imported['seconds']:.2f} s, floor "
            f"{floor['seconds']:.2f} s, peak {imported['peak_rss_mib']:.0f} MiB")
        data[kind] = {"import": imported, "floor": floor}
        figures.append(Figure(f"import of {rows:,} rows ({what})", imported["seconds"], "s",
                              target=RATIO_TARGET, ratio=ratio(imported["seconds"],
                                                               floor["seconds"]),
                              reference=f"bulk writer alone ({floor['seconds']:.2f} s)"))
        figures.append(Figure(f"import of {rows:,} rows ({what}): peak memory",
                              imported["peak_rss_mib"], "MiB", target=MEMORY_TARGET_MIB))
    return figures, data
