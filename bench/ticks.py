"""`python -m bench.ticks`: the cost of one launcher tick and one status tick at 1,000 and
100,000 trials, in one run, and their ratio (near 1 means a tick is O(changes), not O(trials)).
`status_once` is a one-shot `evalq status` (SQL aggregates): O(trials) in the database, shown
for comparison.

Each size gets a fresh SQLite database with every trial planned and attempted, some finished,
written an hour ago (as a long study's rows are); between two ticks ten more results are
recorded, as a busy study does.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

SIZES = (1_000, 100_000)
CHANGES = 10


def _seed(url: str, trials: int):
    from sqlalchemy import text

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
    with engine.begin() as conn:  # a big study's rows were written over hours, not just now
        conn.execute(text("update attempts set updated_at = updated_at - 3600"))
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
    from evalq.ops.status_watch import StatusWatch
    from evalq.results.progress import SettledCounter
    from evalq.results.store import record_attempt

    engine, rows = _seed(f"sqlite:///{folder / f'ticks-{trials}.db'}", trials)
    counter = SettledCounter(engine, "b")
    watch = StatusWatch(engine, "b")
    watch.tick()  # the first tick reads the study once
    pending = iter(rows[trials // 2:])

    def tick(call):
        for _ in range(CHANGES):
            r = next(pending)
            record_attempt(engine, dict(trial_id=r["id"], attempt=1, study_id="b",
                                        outcome="incorrect"))
        start = time.perf_counter()
        call()
        return time.perf_counter() - start

    return {"launcher_tick_s": min(tick(counter) for _ in range(5)),
            "status_tick_s": min(tick(watch.tick) for _ in range(5)),
            "status_once_s": _timed(lambda: study_status(engine, "b"), repeat=2)}


#: a tick at 100,000 trials may cost at most this many times one at 1,000 (O(changes))
RATIO_TARGET = 2.0


def run(workdir: Path, log) -> tuple[list, dict]:
    """The bench section: Figures with the 100k/1k ratio of each tick (one-shot status: none)."""
    from .figures import Figure

    data = {n: measure(n, workdir) for n in SIZES}
    small, large = data[SIZES[0]], data[SIZES[-1]]
    figures = []
    for key in ("launcher_tick_s", "status_tick_s", "status_once_s"):
        target = None if key == "status_once_s" else RATIO_TARGET
        figures.append(Figure(name=f"{key[:-2]} at {SIZES[-1]:,} trials", value=large[key] * 1e3,
                              unit="ms", target=target, ratio=large[key] / small[key],
                              reference=f"the same at {SIZES[0]:,} trials "
                                        f"({small[key] * 1e3:.2f} ms)"))
        log(f"{key[:-2]}: {small[key] * 1e3:.2f} ms at {SIZES[0]:,} trials, "
            f"{large[key] * 1e3:.2f} ms at {SIZES[-1]:,}; ratio {large[key] / small[key]:.2f}")
    return figures, {str(n): v for n, v in data.items()}


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        figures, _ = run(Path(tmp), lambda line: print(line, flush=True))
    for figure in figures:
        print(figure.line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
