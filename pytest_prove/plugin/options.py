"""The options ``pytest --help`` shows: pytest-prove's, in a few headed groups, with the
``prove_*`` ini values of the table both front doors read (:mod:`pytest_prove.config.ini`).
:class:`~.settings.Settings` reads and checks what they were given."""

from __future__ import annotations

import pytest

from ..config.ini import INI
from ..config.values import (
    agreement_runs,
    chaos_switch,
    design_rates,
    error_rate,
    fail_on,
    metric_list,
    metric_margins,
    missing_mode,
    new_run_name,
    replay_name,
    report_path,
    run_name,
    salt_word,
    seconds,
    shard,
    share,
    store_name,
    target,
)
from ..config.values import concurrency as concurrency_option
from ..config.values import margin as margin_option
from ..config.values import max_mde as max_mde_option
from ..config.values import replicates as replicates_option
from .aa import AA_HELP, AGREEMENT_HELP

__all__ = ["GROUPS", "PATH_OPTIONS", "VALUE_OPTIONS", "add_options", "option_group"]

#: Options that name a file or folder, and every option that takes a value (tests check
#: these against ``pytest --help``): see config/paths.py for why their separate form is refused.
PATH_OPTIONS = ("--prove-store", "--prove-report")
VALUE_OPTIONS = (*PATH_OPTIONS, "--prove-name", "--prove-baseline", "--prove-save-baseline",
                 "--prove-resume", "--prove-replicates", "--prove-concurrency", "--prove-event",
                 "--prove-fail-on", "--prove-q", "--prove-max-mde", "--prove-margin",
                 "--prove-token-cap",
                 "--prove-output-token-cap", "--prove-plan-from", "--prove-missing",
                 "--prove-episode-timeout", "--prove-replay", "--prove-shard",
                 "--prove-salt", "--prove-chaos", "--prove-max-errored",
                 "--prove-metrics", "--prove-metric-margin", "--prove-target",
                 "--prove-record-env", "--prove-record-packages",
                 "--prove-agreement-from", "--prove-cache", "--prove-live",
                 "--prove-design-rates")


#: The headed groups ``pytest --help`` shows pytest-prove's options in, in this order: the
#: name each is known by to :func:`option_group`, and its heading.  The first is pytest's
#: group "prove", where an option added with ``parser.getgroup("prove")`` lands.
GROUPS = {
    "baselines": ("prove", "pytest-prove: runs and baselines (did this change make the agent "
                           "fail more?)"),
    "comparison": ("prove-comparison", "pytest-prove: the comparison and its gate"),
    "running": ("prove-running", "pytest-prove: running the sweep"),
    "reports": ("prove-reports", "pytest-prove: reports and what a run records"),
}


def option_group(parser: pytest.Parser, part: str) -> pytest.OptionGroup:
    """The group of ``--help`` an option of ``part`` (a key of :data:`GROUPS`) is shown in;
    every group is made on the first call, so that they are listed in GROUPS' order."""
    for name, heading in GROUPS.values():
        parser.getgroup(name, heading)
    return parser.getgroup(GROUPS[part][0])


def add_options(parser: pytest.Parser) -> None:
    """pytest-prove's options, and its ``prove_*`` ini values from the one table."""
    baselines = option_group(parser, "baselines")
    comparison = option_group(parser, "comparison")
    running = option_group(parser, "running")
    reports = option_group(parser, "reports")
    baselines.addoption("--prove-store", metavar="DIR", default=None,
                    help="folder of runs and baselines (default: ini prove_store, else "
                         ".prove under rootdir)")
    baselines.addoption("--prove-name", metavar="NAME", type=new_run_name, default=None,
                    help="name this run (default: its run id)")
    baselines.addoption("--prove-baseline", metavar="NAME", type=store_name, default=None,
                    help="pair this run with baseline NAME, compare, and fail on a worse "
                         "verdict or on a condition it cannot vouch for (too small to tell, "
                         "lost twins, a declaration that differs)")
    baselines.addoption("--prove-save-baseline", metavar="NAME", type=store_name, default=None,
                    help="write this run as baseline NAME (.prove/baselines/NAME.baseline) once "
                         "it is complete and could serve as one (--prove-max-errored)")
    baselines.addoption("--prove-update-baseline", action="store_true", default=False,
                    help="replace the --prove-baseline file with this run once it is complete "
                         "and could serve as one (also accepts a changed declaration)")
    baselines.addoption("--prove-resume", metavar="RUN", type=run_name, default=None,
                    help="run only the replicates that run RUN is missing, appending to it; a "
                         "run paired with a baseline is gated against it")
    running.addoption("--prove-replay", metavar="RUN", type=replay_name, default=None,
                    help="run the selected items on the seeds they had in run RUN (a name, "
                         "run id, latest or baseline:NAME), one replicate an item and no "
                         "episode timeout unless given, storing nothing: for --pdb or a "
                         "breakpoint() (pytest-prove flips and show print the command)")
    running.addoption("--prove-shard", metavar="K/N", type=shard, default=None,
                    help="run only slice K of N of the sweep (the same slice on every "
                         "machine); every shard needs one salt: --prove-baseline NAME or "
                         "--prove-salt WORD. Join the shards' runs with pytest-prove merge")
    running.addoption("--prove-salt", metavar="WORD", type=salt_word, default=None,
                    help="seed this run from WORD instead of a fresh salt (give every shard "
                         "of a sweep the same WORD; a baseline's run takes its salt)")
    running.addoption("--prove-plan", action="store_true", default=False,
                    help="collect, print the plan and the design check, and run nothing; "
                         "the project is imported with the network blocked, and an import "
                         "that touches it is named (exit 4)")
    running.addoption("--prove-replicates", metavar="N", type=replicates_option, default=None,
                    help="replicates per condition for every rollout, overriding declarations")
    running.addoption("--prove-concurrency", metavar="K", type=concurrency_option, default=None,
                    help="keep K replicates in flight (threads, or asyncio tasks for async "
                         "rollouts): each item is a block of K, and the replicates of the "
                         "items ahead start as soon as one ends")
    running.addoption("--prove-episode-timeout", metavar="S", type=seconds, default=None,
                    help="stop an episode still running after S seconds: stored with no "
                         "outcome (episode_timeout), its item fails, the sweep goes on "
                         "(overrides timeout= and the ini value prove_episode_timeout; "
                         "default for a sync rollout: 1800; 0 or none: no timeout)")
    comparison.addoption("--prove-event", metavar="EVENT", action="append", default=[],
                    help="compare this outcome (repeatable; default: every declared failure "
                         "and success)")
    comparison.addoption("--prove-fail-on", metavar="WORDS", type=fail_on, default=None,
                    help="verdicts that fail the session besides the defaults, "
                         "comma-separated: worse and too-small always (a row that could "
                         "not have shown --prove-max-mde), not-within with --prove-margin; "
                         "no-WORD leaves one out on purpose (e.g. no-worse), and the "
                         "summary then says so; with targets, missed (default) and not-met "
                         "(a target row too small to tell)")
    comparison.addoption("--prove-missing", metavar="HOW", type=missing_mode, default=None,
                    help="episodes without an outcome (no outcome, errors, timeouts): test "
                         "(default: a rise in their share is worse) or ignore (they are "
                         "infrastructure; the summary says how many were left out)")
    comparison.addoption("--prove-q", metavar="Q", type=error_rate, default=None,
                    help="error rate q for flags (BH) and the verdict (Holm); default 0.05")
    comparison.addoption("--prove-max-mde", metavar="D", type=max_mde_option, default=None,
                    help="the largest change you accept not being able to see; default 0.20")
    comparison.addoption("--prove-margin", metavar="D", type=margin_option, default=None,
                    help="ask for the claim 'no condition got worse by D or more' (a "
                         "non-inferiority margin, 0 < D < 1): each condition and event is "
                         "tested against D, and the session fails unless every one is shown "
                         "within it; default: ini prove_margin, else no margin")
    comparison.addoption("--prove-metrics", metavar="NAMES", type=metric_list, default=None,
                    help="metrics to test beside the outcomes, comma-separated: the built-in "
                         "duration, tokens and cost by name, your own as NAME=higher or "
                         "NAME=lower (which way is better); default: ini prove_metrics")
    comparison.addoption("--prove-metric-margin", metavar="MARGINS", type=metric_margins,
                    default=None,
                    help="ask for the claim 'no metric got worse by more than its margin': "
                         "NAME=SIZE in the metric's units or NAME=PERCENT%% of the baseline's "
                         "median, comma-separated (e.g. latency_s=10%%,judge=0.05); a row not "
                         "shown within fails the session (not-within); default: ini "
                         "prove_metric_margin")
    comparison.addoption("--prove-target", metavar="TARGET", type=target, action="append",
                    default=None,
                    help="an absolute target every condition must meet, repeatable: "
                         "EVENT<=RATE or EVENT>=RATE (resolved>=0.9, pass^8>=0.5), "
                         "'AXIS=VALUE: ...' for one condition; a condition shown to miss "
                         "it fails the session, no baseline needed (docs/targets.md); "
                         "default: ini prove_targets")
    comparison.addoption("--prove-sequential", action="store_true", default=None,
                    help="take each condition's replicates in looks and stop it once it is "
                         "decided against the baseline (worse, safer, or no change of "
                         "--prove-max-mde possible); needs --prove-baseline. Also when "
                         "every selected rollout declares sequential=True")
    comparison.addoption("--prove-allow-underpowered", action="store_true", default=None,
                    help="run even when the design check says a condition could not see "
                         "--prove-max-mde, and pass a gate whose rows are too small to tell "
                         "by design (rows that lost twins to episodes without an outcome "
                         "still fail)")
    baselines.addoption("--prove-max-errored", metavar="F", type=share, default=None,
                    help="the largest share of a condition's episodes that may end without "
                         "an outcome (errors, timeouts, no outcome) in a run saved as a "
                         "baseline, in the baseline a gate reads, and with "
                         "--prove-missing=ignore in the run; default: ini "
                         "prove_max_errored, else 0.25")
    comparison.addoption("--prove-design-rates", metavar="baseline|any", type=design_rates,
                         default=None,
                         help="what base rates the design check reads with --prove-baseline: "
                              "any (every rate from 0 to 1, the worst case) or baseline (each "
                              "test's rate within its exact 99%% interval from the baseline: "
                              "fewer replicates for rates near 0 or 1, and the plan says so); "
                              "default: ini prove_design_rates, else any")
    comparison.addoption("--prove-aa", action="store_true", default=False, help=AA_HELP)
    comparison.addoption("--prove-agreement-from", metavar="RUNS", type=agreement_runs,
                    default=None, help=AGREEMENT_HELP)
    reports.addoption("--prove-report", metavar="PATH", type=report_path, default=None,
                    help="write the comparison as a report: .html (self-contained), .md or "
                         ".json; without --prove-baseline, this run's rates with exact "
                         "intervals")
    running.addoption("--prove-chaos", metavar="on|off", type=chaos_switch, default=None,
                    help="inject the HTTP faults rollouts declare with chaos= or [chaos] "
                         "(on, the default) or none (off); given against a baseline whose "
                         "chaos differs, it asks for that comparison (docs/chaos.md)")
    for value in INI.values():
        parser.addini(value.name, value.help, type=None if value.kind == "string" else value.kind,
                      default=list(value.default) if isinstance(value.default, list)
                      else value.default)
