"""`python -m bench.ticks`: the cost of one launcher tick and one status tick at 1,000 and
100,000 trials, in one run, and their ratio (near 1 means a tick is O(changes), not O(trials)).

Each size gets a fresh SQLite database with every trial planned and attempted, half finished;
between two ticks ten more results are recorded, as a busy study does.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

SIZES = (1_000, 100_000)
CHANGES = 10


def _seed(url: str, trials: int):
    from evalq.results.store import StudyRow, create_attempts, init_db, record_attempt, save_study

    engine = init_db(url)
    rows = [dict(id=f"b/f{i % 500}/c{i % 2}/r{i}", study_id="b", fixture_id=f"f{i % 500}",
                 fixture_digest="sha256:x", fixture_ref="ref", condition=f"c{i % 2}",
                 repetition=i, block=i, order_index=i) for i in range(trials)]
    save_study(engine, StudyRow(id="b", manifest={}, lock={}, lock_digest="sha256:b"), rows)
    create_attempts(engine, [r["id"] for r in rows], {r["id"]: 1 for r in rows}, "b")
    for r in rows[: trials // 2 : max(1, trials // 2000)]:  # some finished (a cheap seed)
        record_attempt(engine, dict(trial_id=r["id"], attempt=1, study_id="b",
                                    outcome="correct"))
    return engine, rows


def _timed(call, repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def measure(trials: int, folder: Path) -> dict[str, float]:
    from evalq.ops.status import study_status
    from evalq.results.progress import SettledCounter
    from evalq.results.store import record_attempt

    engine, rows = _seed(f"sqlite:///{folder / f'ticks-{trials}.db'}", trials)
    counter = SettledCounter(engine, "b")
    pending = iter(rows[trials // 2:])

    def launcher_tick():
        for _ in range(CHANGES):
            r = next(pending)
            record_attempt(engine, dict(trial_id=r["id"], attempt=1, study_id="b",
                                        outcome="incorrect"))
        start = time.perf_counter()
        counter()
        return time.perf_counter() - start

    launcher = min(launcher_tick() for _ in range(5))
    return {"launcher_tick_s": launcher, "status_tick_s": _timed(lambda: study_status(engine, "b"),
                                                                 repeat=2)}


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        figures = {n: measure(n, Path(tmp)) for n in SIZES}
    small, large = figures[SIZES[0]], figures[SIZES[-1]]
    for key in ("launcher_tick_s", "status_tick_s"):
        ratio = large[key] / small[key]
        print(f"{key[:-2]}: {small[key] * 1e3:.2f} ms at {SIZES[0]:,} trials, "
              f"{large[key] * 1e3:.2f} ms at {SIZES[-1]:,}; ratio {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
