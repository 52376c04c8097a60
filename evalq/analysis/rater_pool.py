"""Which raters may score which run: never one who executed it, always at least two.

A run's executor is the results row's `executor_id` for an imported study, the id `evalq run`
recorded in the lock (`executed_by`) for a native one. Packets go to two eligible raters each,
rotating through the pool so the work is spread evenly; a pool that leaves any run fewer than
two eligible raters is refused before a packet is written.
"""

from __future__ import annotations

from typing import Optional

from evalq.analysis.runs import Run
from evalq.errors import UserError
from evalq.results.store import StudyRow

RATERS_PER_RUN = 2


def executor_of(study: StudyRow, run: Run) -> Optional[str]:
    """Who executed the run (None: not recorded)."""
    if run.imported:
        counted = run.view.counted
        row = ((counted.grade or {}).get("row") or {}) if counted is not None else {}
        value = row.get("executor_id")
    else:
        value = (study.lock or {}).get("executed_by")
    return None if value is None else str(value)


def assign(pool: list[str], packets: list[tuple[str, Run]], study: StudyRow
           ) -> dict[str, list[str]]:
    """packet id -> its raters, two per packet from `pool`, none its run's executor."""
    pool = sorted(dict.fromkeys(pool))
    out: dict[str, list[str]] = {}
    for number, (packet_id, run) in enumerate(packets):
        executor = executor_of(study, run)
        eligible = [r for r in pool if r != executor]
        if len(eligible) < RATERS_PER_RUN:
            barred = f"; {executor} executed it and may not score it" if executor in pool else ""
            raise UserError(f"run {run.view.trial_id} has {len(eligible)} eligible rater(s) in "
                            f"the pool {', '.join(pool) or '(none)'}{barred}", field="--rater",
                            fix="name at least two raters who did not execute the study's runs")
        out[packet_id] = [eligible[(number + i) % len(eligible)]
                          for i in range(RATERS_PER_RUN)]
    return out
