"""Scale: planning and enqueueing 100,000 trials into Redis, and a full report over about
100,000 stored attempts in two shapes: 20,000 tasks × 2 conditions × 3 repetitions, and 1,000
tasks × 2 × 50 (where pass@k and pass^k are reported for every k up to 50). Time and peak
memory, each measured in a child process (bench.scale_child) so the figures are that work's
alone.

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

from evalq.report.transcripts import PAGES_BY_DEFAULT

from .figures import Figure, ratio
from .overhead import FIXTURE
from .services import child_env

PLAN_TARGET_S = 5.0  # on this machine when quiet (issue 19)
REPORT_TARGET_S = 5.0
REPORT_TARGET_MIB = 512.0
FLOOR_RATIO = 2.0  # the plan within 2× its floor
REPORT_FLOOR_RATIO = 3.0  # the report within 3× its floor, at any k (issue 32)


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


def _report_shape(workdir: Path, database: str, tasks: int, reps: int, log
                  ) -> tuple[list, dict]:
    """One shape (tasks x 2 conditions x reps runs): the report, `evalq report` as the command
    runs it, and the floor, one after the other in this run so load moves all three."""
    env = child_env({"EVALQ_HOME": str(workdir / "home"), "EVALQ_DATABASE_URL": database,
                     "EVALQ_ARTIFACTS_URL": str(workdir / "artifacts")})
    study = f"bench-report-{tasks}x{reps}"
    shape = f"{tasks:,} tasks x 2 x k = {reps}"
    log(f"inserting {tasks * 2 * reps:,} attempts ({shape}) with evalq.results.store")
    seeded = _child(["seed", study, str(tasks), str(reps)], env)
    log(f"computing the report ({shape})")
    plain = _child(["report", study, str(workdir / study / "report")], env)
    log(f"evalq report as the command runs it ({shape})")
    command = _child(["report", study, str(workdir / study / "command"), "--command"], env)
    log(f"floor: the same rows by one SQL query into numpy ({shape})")
    floor = _child(["floor-read", study], env)
    traced = _child(["report", study, str(workdir / study / "traced"), "--traced"], env)
    log(f"evalq report --transcripts: a page per run, on demand ({shape})")
    pages = _child(["report", study, str(workdir / study / "pages"), "--command",
                    "--transcripts"], env)
    data = {"tasks": tasks, "conditions": 2, "k": reps, "seeded": seeded, "report": plain,
            "command": command, "traced": traced, "floor": floor, "transcripts": pages}
    reference = f"{floor['rows']:,} rows by one SQL query into numpy ({floor['seconds']:.2f} s)"
    return [Figure(f"full report over {plain['attempts']:,} attempts ({shape})",
                   plain["seconds"], "s", target=REPORT_TARGET_S,
                   note=f"compute {plain['compute_seconds']:.2f} s + report.json and "
                        f"report.md {plain['render_and_write_seconds']:.2f} s"),
            Figure(f"full report against its floor ({shape})", plain["seconds"], "s",
                   target=REPORT_FLOOR_RATIO, ratio=ratio(plain["seconds"], floor["seconds"]),
                   reference=reference),
            Figure(f"full report peak memory, process RSS ({shape})", plain["peak_rss_mib"],
                   "MiB", target=REPORT_TARGET_MIB,
                   note=f"Python objects at peak (tracemalloc) "
                        f"{traced['tracemalloc_peak_mib']:.0f} MiB; the floor's RSS "
                        f"{floor['peak_rss_mib']:.0f} MiB"),
            Figure(f"`evalq report` (json, md, html; transcript pages by default up to "
                   f"{PAGES_BY_DEFAULT:,} runs, here {command['transcript_pages']:,}) against "
                   f"the floor ({shape})", command["seconds"], "s", target=REPORT_FLOOR_RATIO,
                   ratio=ratio(command["seconds"], floor["seconds"]), reference=reference,
                   note=f"compute {command['compute_seconds']:.2f} s + files "
                        f"{command['render_and_write_seconds']:.2f} s"),
            Figure(f"`evalq report` peak memory, process RSS ({shape})",
                   command["peak_rss_mib"], "MiB", target=REPORT_TARGET_MIB),
            Figure(f"`evalq report --transcripts` ({pages['transcript_pages']:,} pages, on "
                   f"demand) against the floor ({shape})", pages["seconds"], "s",
                   ratio=ratio(pages["seconds"], floor["seconds"]), reference=reference,
                   note=f"not a target: compute {pages['compute_seconds']:.2f} s + files "
                        f"{pages['render_and_write_seconds']:.2f} s; peak RSS "
                        f"{pages['peak_rss_mib']:.0f} MiB (pages are written one run at a "
                        f"time, read in batches)")], data


def run_report(workdir: Path, database: str, shapes: list[tuple[int, int]], log
               ) -> tuple[list, dict]:
    """The report over each shape of (tasks, runs per task and condition): many tasks at a
    small k, and few tasks at a large k (pass@k and pass^k for every k up to it)."""
    figures, data = [], {}
    for tasks, reps in shapes:
        shape_figures, data[f"{tasks}x2x{reps}"] = _report_shape(workdir, database, tasks, reps,
                                                                log)
        figures += shape_figures
    return figures, data
