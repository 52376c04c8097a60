"""`python -m bench [--quick] [--only overhead,agentbox,scale,report,stats,gateway,gateway_load,import,ticks,grading,inflight,results,harbor,harbor_rate]`: measure, print, write JSON.

Every section starts what it needs (its own redis-server on a free port, a fresh database) and
removes it afterwards. Results go to bench/results/<section>.json and bench/results/summary.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

SECTIONS = ("overhead", "agentbox", "scale", "report", "stats", "gateway", "gateway_load",
            "import", "ticks", "grading", "inflight", "results", "harbor", "harbor_rate")
RESULTS = Path(__file__).resolve().parent / "results"


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true",
                        help="small sizes for a smoke run (the figures mean little)")
    parser.add_argument("--only", default=",".join(SECTIONS),
                        help=f"comma-separated sections of {', '.join(SECTIONS)}")
    parser.add_argument("--database", choices=("postgres", "sqlite"), default="postgres",
                        help="results database for the overhead and scale runs")
    parser.add_argument("--trials", type=int, default=None, help="no-op trials per study run")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    args.sections = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in args.sections if s not in SECTIONS]
    if unknown:
        parser.error(f"unknown section(s) {', '.join(unknown)}: use {', '.join(SECTIONS)}")
    return args


def sizes(quick: bool, trials: int | None) -> dict:
    if quick:
        return {"trials": trials or 10, "concurrency": [1], "raw": 5, "plan": 2_000,
                "report_shapes": [(200, 3), (50, 8)], "stat_tasks": 100, "resamples": 1_000,
                "gateway_requests": 50, "agentbox": 5,
                "import_tasks": 50, "import_runs": 10,
                "gradings": 3, "harbor": 3, "harbor_rate": (2, 1), "inflight": 20, "inflight_sleep": 15, "results": 2_000,
                "gateway_load": (20, 10, 3, 1.0)}
    return {"trials": trials or 500, "concurrency": [1, 2], "raw": 100, "plan": 100_000,
            "report_shapes": [(20_000, 3), (1_000, 50)], "stat_tasks": 1_000, "resamples": 10_000,
            "gateway_requests": 300, "agentbox": 40, "import_tasks": 1_000, "import_runs": 50,
            "gradings": 15, "harbor": 10, "harbor_rate": (6, 2), "inflight": 500, "inflight_sleep": 60, "results": 10_000,
            "gateway_load": (400, 200, 10, 5.0)}  # trials, at once, calls each, s before each


def gathered_figures(out: Path) -> list[dict]:
    """Every section's latest figures, in bench order: a run of some sections (`--only`) keeps
    the others' figures in summary.json, so it always lists the whole bench (bench/results's
    README says when each section last ran)."""
    figures: list[dict] = []
    for section in SECTIONS:
        path = out / f"{section}.json"
        if path.is_file():
            figures += json.loads(path.read_text())["figures"]
    return figures


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    size = sizes(args.quick, args.trials)
    args.out.mkdir(parents=True, exist_ok=True)

    def log(message: str) -> None:
        print(f"[bench] {message}", file=sys.stderr, flush=True)

    failed: list[str] = []
    summary: dict = {"started": time.time(), "quick": args.quick, "sizes": size,
                     "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                 "platform": platform.platform()}, "figures": []}
    with tempfile.TemporaryDirectory(prefix="evalq-bench-") as tmp:
        workdir = Path(tmp)
        # Nothing in this process may fall back to ./.evalq: settings are explicit from here on.
        os.environ["EVALQ_HOME"] = str(workdir / "home")
        from contextlib import ExitStack

        from .services import redis_server

        with ExitStack() as stack:
            needs_servers = {"overhead", "scale", "inflight", "results",
                             "gateway_load"} & set(args.sections)
            broker = stack.enter_context(redis_server(workdir)) if needs_servers else None
            os.environ["EVALQ_BROKER_URL"] = broker or ""
            for section in args.sections:
                log(f"section {section}")
                try:
                    figures, data = run_section(section, args, size, workdir, broker, stack,
                                                log)
                except Exception as exc:  # noqa: BLE001 - report it, run the other sections
                    import traceback

                    traceback.print_exc()
                    failed.append(f"{section}: {type(exc).__name__}: {exc}")
                    continue
                (args.out / f"{section}.json").write_text(json.dumps(
                    {"figures": [f.as_dict() for f in figures], "data": data}, indent=2,
                    default=str))
                summary["figures"] += [f.as_dict() for f in figures]
                print(f"\n== {section}")
                for figure in figures:
                    print("  " + figure.line())
                sys.stdout.flush()
    summary["finished"] = time.time()
    summary["failed_sections"] = failed
    summary["sections_run"] = list(args.sections)
    run_figures, summary["figures"] = summary["figures"], gathered_figures(args.out)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    missed = [f["name"] for f in run_figures if f["met"] is False]
    print(f"\nresults: {args.out}/summary.json; targets missed: {len(missed)}"
          + (f" ({'; '.join(missed)})" if missed else ""))
    for problem in failed:
        print(f"section failed: {problem}")
    return 1 if failed else 0


def run_section(section, args, size, workdir, broker, stack, log):
    from .services import database

    if section == "stats":
        from . import stats_bench

        return stats_bench.run(size["stat_tasks"], size["resamples"], log)
    if section == "gateway":
        from . import gateway_bench

        return gateway_bench.run(size["gateway_requests"], log)
    if section == "import":  # both databases, whatever --database says (issue 20)
        from . import import_bench

        return import_bench.run(workdir / "import", size["import_tasks"], size["import_runs"],
                                log)
    if section == "results":  # both databases, whatever --database says (issue 19)
        from . import results_bench

        return results_bench.run(workdir / "results", broker, size["results"], log)
    if section == "ticks":
        from . import ticks

        return ticks.run(workdir, log)
    if section == "agentbox":
        from . import agentbox

        return agentbox.run(workdir / "agentbox", size["agentbox"], log)
    if section == "grading":
        from . import grading_bench
        from .overhead import docker_ready

        sandboxes = ["bwrap"] + (["docker"] if docker_ready()[0] else [])
        return grading_bench.run(workdir / "grading", size["gradings"], sandboxes, log)
    if section == "harbor_rate":  # no-op trials per batch, rounds; Harbor or why not
        from . import harbor_rate

        return harbor_rate.run(workdir / "harbor_rate", *size["harbor_rate"], log)
    if section == "harbor":
        from . import harbor_bench
        from .overhead import docker_ready

        if not docker_ready()[0]:
            raise RuntimeError("the harbor section needs a Docker engine: "
                               "bash scripts/ensure-docker.sh")
        return harbor_bench.run(workdir / "harbor", size["harbor"], ["bwrap", "docker"], log)
    url, what = stack.enter_context(database(workdir, args.database))
    log(f"results database: {what}")
    if section == "overhead":
        from . import overhead

        figures, data = overhead.run(workdir / "overhead", broker, url, size["trials"],
                                     size["concurrency"], size["raw"], log)
    elif section == "inflight":
        from . import inflight

        figures, data = inflight.run(workdir / "inflight", broker, url, size["inflight"],
                                     size["inflight_sleep"], log)
    elif section == "gateway_load":
        from . import gateway_load

        figures, data = gateway_load.run(workdir / "gateway_load", *size["gateway_load"], log,
                                         broker, url, ("direct", "worker"))
    elif section == "scale":
        from . import scale

        figures, data = scale.run_plan(workdir / "scale", broker, url, size["plan"], log)
    else:
        from . import scale

        figures, data = scale.run_report(workdir / "report", url, size["report_shapes"], log)
    data["database"] = what
    return figures, data


if __name__ == "__main__":
    sys.exit(main())
