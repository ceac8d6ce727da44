"""Detection power, limits, the replicate search and the design check, in one namespace.

The names the package exports from this half of the engine, gathered from the modules that
compute them. Each module imports only those above it in this list, never one below:

``_binomial``
    binomial probabilities: the table of log k!, windows of each binomial.
``_regions``
    the rejection regions of Fisher's test and of McNemar's mid-p test at one level.
``_exact_power``
    exact power of one row's test in one direction (``detection_power``), and the model of
    paired twins it assumes (``PAIRED_MODEL``).
``_limits``
    detection limits: the smallest rise or fall a row's test sees with the asked power.
``_replicates``
    the replicate search: the smallest design at which given base rates see max_mde.
``_design``
    the design check: the worst rise limit over every base rate, before anything runs.

The private names below are kept here for the tests and benchmarks that look inside the
engine (tests/test_stats_design.py, bench/stats.py, bench/design.py): the same objects, so
emptying a cache through this module empties the one the engine uses.
"""

from __future__ import annotations

from ._binomial import _LOG_FACTORIALS as _LOG_FACTORIALS
from ._binomial import _log_choose as _log_choose
from ._design import DesignCheck, design_check
from ._design import _scan_rates as _scan_rates
from ._design import _sees_grid as _sees_grid
from ._design import _worst_rise as _worst_rise
from ._design import _worst_rise_scan as _worst_rise_scan
from ._exact_power import PAIRED_MODEL, detection_power
from ._exact_power import _evaluator as _evaluator
from ._limits import _LIMIT_CACHE as _LIMIT_CACHE
from ._limits import Limit, Limits, fall_limit, limits, rise_limit
from ._regions import _fisher_region as _fisher_region
from ._regions import _fisher_region_by_margin as _fisher_region_by_margin
from ._regions import _fisher_region_equal as _fisher_region_equal
from ._regions import _mcnemar_region as _mcnemar_region
from ._replicates import _sees_all as _sees_all
from ._replicates import replicates_for

__all__ = [
    "PAIRED_MODEL",
    "DesignCheck",
    "Limit",
    "Limits",
    "design_check",
    "detection_power",
    "fall_limit",
    "limits",
    "replicates_for",
    "rise_limit",
]
