"""One measured import in a fresh process, so its peak memory is its own:
`python -m bench.import_child import|floor DATABASE_URL RESULTS RATERS` prints JSON.

`floor` parses and builds the very rows the import writes (untimed), then times only the bulk
writer inserting them in one transaction: the least any import of these rows can cost.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from bench.peak import peak_rss_mib


def _floor(url: str, results: Path, raters: Path) -> float:
    from evalq.analysis.adjudicated_import import stored_rows
    from evalq.analysis.adjudicated_rows import Problems, load_ratings, without_lines
    from evalq.analysis.jsonl import read_jsonl
    from evalq.results.bulk import insert_missing
    from evalq.results.store import AttemptRow, StudyRow, TrialRow, init_db

    ratings = load_ratings(raters, Problems())
    now = time.time()
    trials, attempts = [], []
    for _, row in read_jsonl(results):
        key = (row["task_id"], row["condition"], row["run_id"])
        trial, attempt = stored_rows("floor", key, row, without_lines(ratings.get(key, [])), [],
                                     now)
        trials.append(trial)
        attempts.append(attempt)
    engine = init_db(url)
    started = time.perf_counter()
    with engine.begin() as conn:
        conn.execute(StudyRow.__table__.insert().values(
            id="floor", manifest={}, lock={}, lock_digest="", mode="controlled",
            created_at=now, cancelled=False))
        insert_missing(conn, TrialRow.__table__, trials)
        insert_missing(conn, AttemptRow.__table__, attempts, conflict=["trial_id", "attempt"])
    return time.perf_counter() - started


def _import(url: str, results: Path, raters: Path) -> float:
    from evalq.analysis.adjudicated_import import import_results

    started = time.perf_counter()
    import_results(url, results, "imported", raters_path=raters)
    return time.perf_counter() - started


def main(argv: list[str]) -> int:
    mode, url, results, raters = argv
    base_rss = peak_rss_mib()
    seconds = (_floor if mode == "floor" else _import)(url, Path(results), Path(raters))
    print(json.dumps({"seconds": seconds, "peak_rss_mib": peak_rss_mib(),
                      "start_rss_mib": base_rss}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
