"""The launch check: a study above a trial-count threshold shows its forecast and needs --yes.

The forecast comes from the planning section of the study's lock (`evalq plan --write-lock`);
without one, the check shows the trial count and says cost and time are unavailable.
"""

from __future__ import annotations

from typing import Any, Optional

from evalq.errors import UserError
from evalq.planning.forecast import RunDistributions, forecast, forecast_lines
from evalq.planning.lock import read_planning

def confirm_threshold() -> int:
    """Trials above which `evalq run` asks for --yes (the confirm_above setting, default 200)."""
    from evalq.config import load_settings

    return load_settings().confirm_above


def planned_trials(study: Any) -> int:
    manifest = study.manifest
    return len(study.fixtures) * len(manifest.conditions) * manifest.repetitions


def launch_forecast(study: Any, workers: Optional[int]) -> list[str]:
    """Lines describing what the launch will cost, from the lock's plan if there is one."""
    trials = planned_trials(study)
    planning = read_planning(study)
    if not planning or "run_distributions" not in planning:
        return [f"study {study.id}: {trials} trials",
                "  cost: unavailable: no pilot plan in the study lock "
                f"(run `evalq plan {study.path.name} --pilot PILOT --write-lock`)",
                "  wall time: unavailable: no pilot plan in the study lock"]
    if workers is None:
        workers = (planning.get("forecast") or {}).get("workers")
    dists = RunDistributions.from_dict(planning["run_distributions"])
    pilot = (planning.get("pilot") or {}).get("study_id", "?")
    return [f"study {study.id}: {trials} trials; forecast from pilot '{pilot}'",
            *forecast_lines(forecast(dists, trials, workers))]


def check_launch(study: Any, *, yes: bool, workers: Optional[int], echo, confirm) -> None:
    """Show the forecast and require acceptance when the study is above the threshold.

    ``confirm`` is asked only on an interactive terminal; otherwise --yes is required.
    """
    threshold = confirm_threshold()
    trials = planned_trials(study)
    if trials <= threshold:
        return
    for line in launch_forecast(study, workers):
        echo(line)
    if yes:
        return
    if confirm is not None and confirm(f"start {trials} trials (more than {threshold})?"):
        return
    raise UserError(f"study '{study.id}' plans {trials} trials, more than {threshold}",
                    file=study.path, field="--yes",
                    fix="review the forecast above and pass --yes, or raise EVALQ_CONFIRM_ABOVE")
