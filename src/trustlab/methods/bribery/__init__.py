"""bribery — benchmark gaming as shift bribery: instance-level robustness of leaderboards.

Datasets are voters, models candidates. Training a model on a benchmark dataset ("bribing" it)
moves the model to the top of that dataset; the *robustness* of a leaderboard for a target model
is the fewest datasets to bribe so that the target becomes the unique winner under an aggregation
rule (mean, median, mean win rate, Borda, pairwise majority).
"""

from trustlab.methods.bribery.bribe import (
    DEFAULT_MARGIN,
    BribeModel,
    apply_bribe,
    shift_options,
    shift_scores,
)
from trustlab.methods.bribery.exact import ExactSolution, Options, build_options, solve_exact
from trustlab.methods.bribery.robustness import (
    ALL_RULES,
    BribeResult,
    RobustnessProfile,
    brute_force_robustness,
    brute_force_shift_bribery,
    greedy_robustness,
    is_winner,
    mean_robustness_all,
    median_robustness_all,
    min_cost_shift_bribery,
    robustness,
    robustness_all,
)
from trustlab.methods.bribery.rules import (
    RULES,
    aggregate,
    borda_scores,
    condorcet_winner,
    copeland_scores,
    is_unique_winner,
    mean_scores,
    mean_win_rate,
    median_scores,
    pairwise_margins,
    target_margins,
    unique_winner,
)
from trustlab.methods.bribery.synthetic import synthetic_leaderboard

__all__ = [
    "ALL_RULES",
    "DEFAULT_MARGIN",
    "RULES",
    "BribeModel",
    "BribeResult",
    "ExactSolution",
    "Options",
    "RobustnessProfile",
    "aggregate",
    "apply_bribe",
    "borda_scores",
    "brute_force_robustness",
    "brute_force_shift_bribery",
    "build_options",
    "condorcet_winner",
    "copeland_scores",
    "greedy_robustness",
    "is_unique_winner",
    "is_winner",
    "mean_robustness_all",
    "mean_scores",
    "mean_win_rate",
    "median_robustness_all",
    "median_scores",
    "min_cost_shift_bribery",
    "pairwise_margins",
    "robustness",
    "robustness_all",
    "shift_options",
    "shift_scores",
    "solve_exact",
    "synthetic_leaderboard",
    "target_margins",
    "unique_winner",
]
