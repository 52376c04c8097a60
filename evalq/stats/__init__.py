"""Pure statistics for evalq reports: per-task metrics, bootstrap CIs, paired tests, agreement, power, cost.

Every function takes plain lists, mappings or numpy arrays and returns ``None`` (never
0 or nan) when there is nothing to compute on.
"""

from evalq.stats.agreement import (
    category_counts,
    cohen_kappa,
    fleiss_kappa,
    krippendorff_alpha_nominal,
    positive_rate,
    raw_agreement,
)
from evalq.stats.bootstrap import (
    BOOTSTRAP_METHOD,
    BootstrapCI,
    bootstrap_ci,
    bootstrap_distribution,
    paired_bootstrap_ci,
)
from evalq.stats.cost import CostAccounting, CostPerSuccess, cost_per_success, split_cost_accounting
from evalq.stats.metrics import (
    mean_of_defined,
    pass_at_k,
    pass_at_k_estimate,
    pass_hat_k,
    pass_hat_k_estimate,
    reliable_pass_at_k,
    success_rate,
    task_all_passed,
    task_pass_at_k,
    task_pass_hat_k,
    task_pass_rate,
    task_rates,
    task_weighted_rate,
    valid_runs,
)
from evalq.stats.multiple import holm_adjust, holm_reject
from evalq.stats.paired import PairedComparison, PairedDifferences, compare_paired, paired_differences
from evalq.stats.permutation import PermutationTest, paired_permutation_test, paired_permutation_test_between
from evalq.stats.power import MAX_CI_HALF_WIDTH, MIN_RUNS_PER_CELL, MIN_TASKS, ci_half_width, power_warning
from evalq.stats.reliability import KAPPA_THRESHOLD, low_reliability

tpr = task_pass_rate
rp_at_k = reliable_pass_at_k

__all__ = [
    "BOOTSTRAP_METHOD", "KAPPA_THRESHOLD", "MAX_CI_HALF_WIDTH", "MIN_RUNS_PER_CELL", "MIN_TASKS",
    "BootstrapCI", "CostAccounting", "CostPerSuccess", "PairedComparison", "PairedDifferences",
    "PermutationTest",
    "bootstrap_ci", "bootstrap_distribution", "category_counts", "ci_half_width", "cohen_kappa",
    "compare_paired", "cost_per_success", "fleiss_kappa", "holm_adjust", "holm_reject",
    "krippendorff_alpha_nominal", "low_reliability", "mean_of_defined", "paired_bootstrap_ci", "paired_differences",
    "paired_permutation_test", "paired_permutation_test_between", "pass_at_k", "pass_at_k_estimate",
    "pass_hat_k", "pass_hat_k_estimate", "positive_rate", "power_warning", "raw_agreement",
    "reliable_pass_at_k", "rp_at_k", "split_cost_accounting", "success_rate", "task_all_passed",
    "task_pass_at_k", "task_pass_hat_k", "task_pass_rate", "task_rates", "task_weighted_rate", "tpr",
    "valid_runs",
]
