"""Scale: planning and enqueueing 100,000 trials into Redis, and a full report over 100,000
stored attempts (1,000 tasks × 2 conditions × 50 repetitions). Time and peak memory, each
measured in a child process (bench.scale_child) so the figures are that work's alone.

Each is also a ratio to a floor measured in the same run (issue 19), so load on the machine
moves both: for the plan, the same number of pre-built messages pushed to Redis by the same
pipelined pusher; for the report, the same rows read by one SQL query into numpy arrays.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from .figures import Figure, ratio
from .overhead import FIXTURE
from .services import child_env

PLAN_TARGET_S = 5.0  # on this machine when quiet (issue 19)
REPORT_TARGET_S = 5.0
REPORT_TARGET_MIB = 512.0
FLOOR_RATIO = 2.0  # each within 2× its floor


def _child(args: list[str], env: dict[str, str], timeout: float = 1800) -> dict:
    proc = subprocess.run([sys.executable, "-m", "bench.scale_child", *args], env=env,
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"bench.scale_child {args[0]} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def make_fixtures(root: Path, count: int) -> list[Path]:
    """`count` copies of the bench fixture under distinct ids, each re-frozen."""
    from evalq.fixtures.fixture import freeze_fixture

    paths = []
    for i in range(count):
        dest = root / f"bench-noop-{i:03d}"
        shutil.copytree(FIXTURE, dest)
        spec = dest / "fixture.toml"
        spec.write_text(re.sub(r'^id = "bench-noop"', f'id = "bench-noop-{i:03d}"',
                               spec.read_text(), flags=re.M))
        freeze_fixture(dest)
        paths.append(dest)
    return paths


def write_big_study(folder: Path, fixtures: list[Path], reps: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    listed = ", ".join(f'"{p.as_posix()}"' for p in fixtures)
    path = folder / "study.toml"
    path.write_text(f'''id = "bench-scale"
fixtures = [{listed}]
repetitions = {reps}
seed = 3

[[conditions]]
name = "a"
agent = "scripted"
settings = {{ action = "noop" }}

[[conditions]]
name = "b"
agent = "scripted"
settings = {{ action = "noop" }}
''')
    return path


def run_plan(workdir: Path, broker: str, database: str, trials: int, log) -> tuple[list, dict]:
    fixtures_n = 100 if trials >= 20_000 else max(1, trials // 200)
    reps = max(1, trials // (2 * fixtures_n))
    fixtures = make_fixtures(workdir / "scale-fixtures", fixtures_n)
    manifest = write_big_study(workdir / "scale-study", fixtures, reps)
    subprocess.run([sys.executable, "-m", "evalq.cli.__main__", "study", "freeze", str(manifest)],
                   env=child_env({"EVALQ_HOME": str(workdir / "home")}), check=True,
                   capture_output=True)
    env = child_env({"EVALQ_HOME": str(workdir / "home"), "EVALQ_BROKER_URL": broker,
                     "EVALQ_DATABASE_URL": database,
                     "EVALQ_ARTIFACTS_URL": str(workdir / "artifacts")})
    log(f"planning and enqueueing {fixtures_n * 2 * reps:,} trials")
    import redis

    redis.Redis.from_url(broker).delete("agents")
    result = _child(["plan", str(manifest)], env)
    result["agents_queue_length"] = redis.Redis.from_url(broker).llen("agents")
    if result["agents_queue_length"] != result["sent"]:
        raise RuntimeError(f"the launch sent {result['sent']} messages but the agents list "
                           f"holds {result['agents_queue_length']}")
    log(f"floor: the launch's {result['sent']:,} messages pushed again in pipelines")
    floor = _child(["floor-push"], env)  # takes them off the list, leaves it empty
    result["floor"] = floor
    rows_floor = _child(["floor-copy", "bench-scale"], env) if database.startswith(
        "postgresql") else None
    result["rows_floor"] = rows_floor
    log("the same launch with no row written (what planning and messages cost alone)")
    result["no_rows"] = _child(["plan-no-rows", str(manifest)], env)
    no_rows = result["no_rows"]["seconds"]
    total = result["seconds"]["total"]
    parts = ", ".join(f"{k} {v:.2f} s" for k, v in result["seconds"].items() if k != "total")
    return [Figure(f"plan + enqueue {result['trials']:,} trials (into Redis, {result['sent']:,} "
                   "messages)", total, "s", target=PLAN_TARGET_S, note=parts,
                   extra=result),
            Figure("plan + enqueue against its floor", total, "s", target=FLOOR_RATIO,
                   ratio=ratio(total, floor["seconds"]),
                   reference=f"the launch's {floor['messages']:,} messages, pre-built, pushed "
                             f"in pipelines ({floor['seconds']:.2f} s)"),
            *([Figure("plan + enqueue against the messages' and the rows' floors", total, "s",
                      ratio=ratio(total, floor["seconds"] + rows_floor["seconds"]),
                      reference=f"the pushes ({floor['seconds']:.2f} s) plus the same "
                                f"{sum(rows_floor['rows'].values()):,} trial and attempt rows "
                                f"COPied in one transaction ({rows_floor['seconds']:.2f} s)",
                      note="not a target: what the 2x floor leaves out, the database's own "
                           "writes, which every launch must make before its messages go")]
              if rows_floor else []),
            Figure("plan + enqueue with no row written, against the push floor", no_rows, "s",
                   ratio=ratio(no_rows, floor["seconds"]),
                   reference=f"{floor['messages']:,} pre-built messages pushed in pipelines "
                             f"({floor['seconds']:.2f} s)",
                   note="not a target: the same load, plan, messages and pushes with the "
                        "database taking no time; above 2x, no change to the rows alone can "
                        "bring the launch within 2x of the pushes"),
            Figure("the same messages built by the least CPython, against the push floor",
                   floor["least_build_seconds"], "s",
                   ratio=ratio(floor["least_build_seconds"], floor["seconds"]),
                   reference=f"{floor['messages']:,} pre-built messages pushed in pipelines "
                             f"({floor['seconds']:.2f} s)",
                   note="not a target: one substitution, one base64 and one format per "
                        "message, nothing planned, written or pushed; when this alone is "
                        "above 1x, building plus pushing is above 2x in any CPython launcher"),
            Figure("plan + enqueue peak memory", result["peak_rss_mib"], "MiB")], result


def run_report(workdir: Path, database: str, tasks: int, reps: int, log) -> tuple[list, dict]:
    env = child_env({"EVALQ_HOME": str(workdir / "home"), "EVALQ_DATABASE_URL": database})
    log(f"inserting {tasks * 2 * reps:,} attempts ({tasks:,} tasks) with evalq.results.store")
    seeded = _child(["seed", "bench-report", str(tasks), str(reps)], env)
    log("computing the report")
    plain = _child(["report", "bench-report", str(workdir / "report")], env)
    traced = _child(["report", "bench-report", str(workdir / "report"), "--traced"], env)
    log("floor: the same rows by one SQL query into numpy")
    floor = _child(["floor-read", "bench-report"], env)
    data = {"seeded": seeded, "report": plain, "traced": traced, "floor": floor}
    note = (f"compute {plain['compute_seconds']:.2f} s + render/write "
            f"{plain['render_and_write_seconds']:.2f} s")
    return [Figure(f"full report over {plain['attempts']:,} attempts ({tasks:,} tasks)",
                   plain["seconds"], "s", target=REPORT_TARGET_S, note=note),
            Figure("full report against its floor", plain["seconds"], "s", target=FLOOR_RATIO,
                   ratio=ratio(plain["seconds"], floor["seconds"]),
                   reference=f"{floor['rows']:,} rows by one SQL query into numpy "
                             f"({floor['seconds']:.2f} s)"),
            Figure("full report peak memory (process RSS)", plain["peak_rss_mib"], "MiB",
                   target=REPORT_TARGET_MIB,
                   note=f"Python objects at peak (tracemalloc) "
                        f"{traced['tracemalloc_peak_mib']:.0f} MiB")], data
