"""The statistics engine of pytest-prove: counts in, result objects out.

A pure library: it imports numpy, scipy and the standard library, never pytest, the store or
the plugin, so the command line and any renderer can use it on stored runs.
"""

from __future__ import annotations

from ._compare import compare
from ._design_rates import RATES_LEVEL, RatesDesign, baseline_intervals, rates_design_check
from ._exact import fisher_exact_p, mcnemar_exact_p, mcnemar_midp
from ._fragility import Flip, Fragility
from ._intervals import (
    Interval,
    clopper_pearson_interval,
    newcombe_interval,
    tango_interval,
    wilson_interval,
)
from ._limits import outward
from ._margin import MarginTest, margin_test, margin_test_paired, margin_test_unpaired
from ._margin_design import MarginDesignCheck, margin_design_check, margin_replicates
from ._margin_rates import margin_rates_check
from ._metric_limits import METRIC_LIMIT_RUNS, MetricLimit, metric_limit
from ._metrics import (
    MetricTest,
    RankTest,
    metric_test,
    outward_units,
    rank_sum_test,
    signed_rank_null,
    signed_rank_test,
)
from ._multiplicity import benjamini_hochberg, holm
from ._power import (
    PAIRED_MODEL,
    DesignCheck,
    Limit,
    Limits,
    design_check,
    detection_power,
    fall_limit,
    limits,
    replicates_for,
    rise_limit,
)
from ._results import (
    SCHEMA_VERSION,
    Comparison,
    EventTally,
    Pairs,
    Row,
    RowInput,
    Verdict,
)
from ._scores import tango_score
from ._seq_margin import expected_replicates as sequential_margin_expected
from ._seq_margin import final_level as final_margin_level
from ._seq_margin import margin_looks as sequential_margin_looks
from ._seq_margin import margin_shares as sequential_margin_shares
from ._seq_margin import sequential_margin_test
from ._seq_records import (
    VERSION as SEQUENTIAL_VERSION,
)
from ._sequential import (
    FUTILE,
    FUTILITY_LEVEL,
    LOOKS,
    STOPPED,
    ConditionDecision,
    RowDecision,
    SequentialDesign,
    SequentialRow,
    alpha_shares,
    decide,
    design_from_dict,
    look_schedule,
    obf_spending,
    sequential_design,
    sequential_p,
)
from ._sequential import (
    margin_level as sequential_margin_level,
)
from ._target_sequential import (
    sequential_target_p,
    sequential_target_power,
    sequential_target_replicates,
)
from ._targets import (
    Side,
    TargetTest,
    holm_targets,
    pass_at_k,
    pass_hat_k,
    target_replicates,
    target_test,
)
from ._twins import (
    AGREEMENT_LEVEL,
    TWIN_MODEL,
    Agreement,
    PooledKappa,
    TwinDesign,
    agreement,
    pooled_kappa,
    twin_design_check,
    twin_limit,
    twin_limits,
    twin_power,
    twin_replicates,
)

__all__ = [
    "AGREEMENT_LEVEL",
    "FUTILE",
    "FUTILITY_LEVEL",
    "LOOKS",
    "METRIC_LIMIT_RUNS",
    "PAIRED_MODEL",
    "RATES_LEVEL",
    "SCHEMA_VERSION",
    "SEQUENTIAL_VERSION",
    "STOPPED",
    "TWIN_MODEL",
    "Agreement",
    "Comparison",
    "ConditionDecision",
    "DesignCheck",
    "EventTally",
    "Flip",
    "Fragility",
    "Interval",
    "Limit",
    "Limits",
    "MarginDesignCheck",
    "MarginTest",
    "MetricLimit",
    "MetricTest",
    "Pairs",
    "PooledKappa",
    "RankTest",
    "RatesDesign",
    "Row",
    "RowDecision",
    "RowInput",
    "SequentialDesign",
    "SequentialRow",
    "Side",
    "TargetTest",
    "TwinDesign",
    "Verdict",
    "agreement",
    "alpha_shares",
    "baseline_intervals",
    "benjamini_hochberg",
    "clopper_pearson_interval",
    "compare",
    "decide",
    "design_check",
    "design_from_dict",
    "detection_power",
    "fall_limit",
    "final_margin_level",
    "fisher_exact_p",
    "holm",
    "holm_targets",
    "limits",
    "look_schedule",
    "margin_design_check",
    "margin_rates_check",
    "margin_replicates",
    "margin_test",
    "margin_test_paired",
    "margin_test_unpaired",
    "mcnemar_exact_p",
    "mcnemar_midp",
    "metric_limit",
    "metric_test",
    "newcombe_interval",
    "obf_spending",
    "outward",
    "outward_units",
    "pass_at_k",
    "pass_hat_k",
    "pooled_kappa",
    "rank_sum_test",
    "rates_design_check",
    "replicates_for",
    "rise_limit",
    "sequential_design",
    "sequential_margin_expected",
    "sequential_margin_level",
    "sequential_margin_looks",
    "sequential_margin_shares",
    "sequential_margin_test",
    "sequential_p",
    "sequential_target_p",
    "sequential_target_power",
    "sequential_target_replicates",
    "signed_rank_null",
    "signed_rank_test",
    "tango_interval",
    "tango_score",
    "target_replicates",
    "target_test",
    "twin_design_check",
    "twin_limit",
    "twin_limits",
    "twin_power",
    "twin_replicates",
    "wilson_interval",
]
