"""Which raters may score which run: never one who executed it, always at least two.

A run's executors are the results row's `executor_ids` (or `executor_id`) for an imported
study, the ids `evalq run` recorded in the lock (`executed_by`) for a native one. Packets go to two eligible raters each,
rotating through the pool so the work is spread evenly; a pool that leaves any run fewer than
two eligible raters is refused before a packet is written.
"""

from __future__ import annotations

from evalq.analysis.runs import Run
from evalq.errors import UserError
from evalq.results.store import StudyRow
from evalq.study.executor import executors

RATERS_PER_RUN = 2


def executors_of(study: StudyRow, run: Run) -> list[str]:
    """Who executed the run (empty: not recorded)."""
    if run.imported:
        counted = run.view.counted
        row = ((counted.grade or {}).get("row") or {}) if counted is not None else {}
        return executors(row.get("executor_ids", row.get("executor_id")))
    return executors((study.lock or {}).get("executed_by"))


def assign(pool: list[str], packets: list[tuple[str, Run]], study: StudyRow
           ) -> dict[str, list[str]]:
    """packet id -> its raters, two per packet from `pool`, none its run's executor."""
    pool = sorted(dict.fromkeys(pool))
    out: dict[str, list[str]] = {}
    for number, (packet_id, run) in enumerate(packets):
        ran = executors_of(study, run)
        eligible = [r for r in pool if r not in ran]
        if len(eligible) < RATERS_PER_RUN:
            barred = "".join(f"; {who} executed it and may not score it"
                             for who in ran if who in pool)
            raise UserError(f"run {run.view.trial_id} has {len(eligible)} eligible rater(s) in "
                            f"the pool {', '.join(pool) or '(none)'}{barred}", field="--rater",
                            fix="name at least two raters who did not execute the study's runs")
        out[packet_id] = [eligible[(number + i) % len(eligible)]
                          for i in range(RATERS_PER_RUN)]
    return out
