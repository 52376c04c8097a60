"""Planning a study from a pilot: power and precision by simulation, cost and time forecast, lock record."""

from evalq.planning.estimate import PairEstimates, pair_estimates
from evalq.planning.forecast import RunDistributions, forecast, forecast_lines, run_distributions
from evalq.planning.gate import check_launch, confirm_threshold, launch_forecast
from evalq.planning.lock import planning_section, read_planning, write_planning
from evalq.planning.pilot import Pilot, PilotRun, load_pilot, pilot_from_rows, pilot_from_views
from evalq.planning.simulate import (DesignResult, pilot_sampler, power_grid, sign_flip_pvalues, simulate_design,
                       smallest_design)
from evalq.planning.study_plan import PlanTarget, make_plan

__all__ = [
    "DesignResult", "PairEstimates", "Pilot", "PilotRun", "PlanTarget", "RunDistributions",
    "check_launch", "confirm_threshold", "forecast", "forecast_lines", "launch_forecast",
    "load_pilot", "make_plan", "pair_estimates", "pilot_from_rows", "pilot_from_views",
    "pilot_sampler", "planning_section", "power_grid", "read_planning", "run_distributions",
    "sign_flip_pvalues", "simulate_design", "smallest_design", "write_planning",
]
