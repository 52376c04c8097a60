"""Planning a study from a pilot: power and precision by simulation, cost and time forecast, lock record."""

from evalq.planning.choose import Floors, recommend
from evalq.planning.estimate import PairEstimates, pair_estimates
from evalq.planning.forecast import RunDistributions, forecast, forecast_lines, run_distributions
from evalq.planning.gate import check_launch, confirm_threshold, launch_forecast
from evalq.planning.lock import attempts_recorded, planning_section, read_planning, write_planning
from evalq.planning.pilot import Pilot, PilotRun, load_pilot, pilot_from_rows, pilot_from_views
from evalq.planning.shrink import Shrinkage, shrink_rates
from evalq.planning.simulate import (DesignResult, MetricPower, pilot_sampler, power_grid, sign_flip_pvalues,
                                     simulate_design)
from evalq.planning.study_plan import PlanTarget, make_plan

__all__ = [
    "DesignResult", "Floors", "MetricPower", "PairEstimates", "Pilot", "PilotRun", "PlanTarget",
    "RunDistributions", "Shrinkage", "attempts_recorded", "check_launch", "confirm_threshold",
    "forecast", "forecast_lines", "launch_forecast", "load_pilot", "make_plan", "pair_estimates",
    "pilot_from_rows", "pilot_from_views", "pilot_sampler", "planning_section", "power_grid",
    "read_planning", "recommend", "run_distributions", "shrink_rates", "sign_flip_pvalues",
    "simulate_design", "write_planning",
]
