"""The gate's decision as test reports that pytest counts.

Every replicate item passes whatever its outcome: a worse agent is a verdict, not a crash.
So that a failed gate is not a green build to whatever reads pytest's own results, the
controller adds, at the end of the session, one failed report per condition the verdict
failed on (``test_support.py::test_support::prove-gate[ticket=refund]``, its failure text
the verdict and that condition's rows), and one ``prove::gate`` report for a gate that failed
for another reason (less compared than the baseline holds, an unfinished run, a refusal).
pytest then counts them like any failure: the last line, ``-rf``, ``--junitxml``, the exit
status. The replicate items of the conditions that failed are marked failed in pytest's
``--lf`` cache, so that ``pytest --lf --prove-baseline=NAME`` reruns those conditions on their
baseline seeds. A passed gate adds no report.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, final

import pytest

from ..declare.seeds import split_arm

if TYPE_CHECKING:
    from ..review import Review
    from ..review.targets import TargetRow
    from ..store import Run

__all__ = ["GATE_NODE", "GateReports"]

#: The node id of the report of a gate that failed for no one condition.
GATE_NODE = "prove::gate"


@final
class GateReports:
    """Which items ran each condition, and the reports of a failed gate."""

    def __init__(self) -> None:
        # (rollout, condition key) -> the ids pytest's --lf cache knows its items by.
        self._items: dict[tuple[str, str], dict[Any, None]] = defaultdict(dict)

    def saw(self, report: pytest.TestReport, episodes: Iterable[Mapping[str, Any]]) -> None:
        """Remember which item ran these episodes (called for every call report)."""
        item_id = getattr(report, "id", None) or report.nodeid
        for episode in episodes:
            key = (str(episode.get("rollout")), str(episode.get("condition_key")))
            self._items[key][item_id] = None

    @property
    def any_seen(self) -> bool:
        return bool(self._items)

    def seen_ids(self) -> Iterator[str]:
        """Every item :meth:`saw`, by its node id (an item of two conditions comes twice)."""
        for items in self._items.values():
            yield from map(str, items)

    def emit(self, config: pytest.Config, review: Review | None,
             reasons: Iterable[str], *, targets: Iterable[TargetRow] = (),
             run: Run | None = None) -> int:
        """Send the failed gate's reports through pytest's own hook; return how many."""
        sent = 0
        reports = self._conditions(review)
        rows = [r for r in (review.gate.targets if review is not None else targets)
                if r.reason is None]
        if rows:
            reports = _with_targets(reports, rows, review.after if review else run)
        reports += self._other(reasons)
        if reports:
            _own_progress_line(config)
        for nodeid, text, key in reports:
            path, _, name = nodeid.partition("::")
            report = pytest.TestReport(
                nodeid=nodeid, location=(path, None, name), keywords={}, outcome="failed",
                longrepr=text, when="call", user_properties=[("prove_gate", "failed")])
            config.hook.pytest_runtest_logreport(report=report)
            sent += 1
            self._mark_for_lf(config, key)
        return sent

    def _conditions(self, review: Review | None) -> list[tuple[str, str, tuple[str, str] | None]]:
        if review is None or not review.gate.verdict_failed or (
                review.comparison is None and not review.gate.metrics):
            return []
        from ..declare.spec import condition_label
        from ..report._format import terminal_text
        from ..report.metrics import condition_metric_lines
        from ..report.terminal import condition_failure
        from ..review.labels import keys_and_labels

        comparison = review.comparison  # None: metrics only (no outcome rows)
        fail_on = review.gate.fail_on
        failing = [] if comparison is None else list(
            comparison.verdict.worse if comparison.verdict.word == "worse"
            and "worse" in fail_on else ())
        failing += review.gate.blind  # rows that could not have shown max_mde
        if (comparison is not None and comparison.margin is not None
                and not comparison.margin.holds and "not-within" in fail_on):
            failing += comparison.margin.not_within
        # and the metric rows that fail it (a metric moved the worse way, or blind)
        conditions = [*(r.condition for r in failing),
                      *(r.condition for r in review.gate.metrics)]
        named = keys_and_labels(review.before, review.after)
        keys = {label: key for key, (label, _) in named.items()}
        rollouts = review.after.manifest.get("rollouts") or {}
        found = []
        used: set[str] = set()
        for condition in dict.fromkeys(conditions):
            key = keys.get(condition)
            info = rollouts.get(key[0]) if key is not None else None
            node = (info.get("node") if isinstance(info, Mapping) else None) or (
                key[0] if key is not None else "prove")
            # The condition's own label, without the rollout's name (the node id has it).
            own = condition
            if key is not None:
                axes = dict(named[key][1])
                if len({k[0] for k in named}) > 1:
                    axes.pop("rollout", None)
                own = condition_label(axes)
            # On one line, nothing a terminal acts on, nothing that splits a node id, and
            # one id per condition even where two labels read alike once shortened.
            shown = terminal_text(own).replace("::", ":").replace("[", "(").replace("]", ")")
            arm = info.get("arm") if isinstance(info, Mapping) else None
            if isinstance(arm, str) and arm:
                # The arms' comparison: the arm compared with the reference, named.
                shown = f"{shown} arm={arm}"
            nodeid = f"{node}::prove-gate[{shown}]"
            number = 2
            while nodeid in used:
                nodeid = f"{node}::prove-gate[{shown} #{number}]"
                number += 1
            used.add(nodeid)
            outcome_lines = [] if comparison is None else condition_failure(
                comparison, condition, before=review.labels.before, after=review.labels.after)
            metric_lines = condition_metric_lines(review.metrics, condition,
                                                  review.gate.metrics, fail_on)
            # A condition failed by its metrics alone says so first (the line -rf shows).
            alone = condition not in {r.condition for r in failing}
            text = "\n".join([*metric_lines, *outcome_lines] if alone
                              else [*outcome_lines, *metric_lines])
            found.append((nodeid, text, key))
        return found

    @staticmethod
    def _other(reasons: Iterable[str]) -> list[tuple[str, str, None]]:
        from ..report._format import plain_text

        # A reason may name conditions: what a rollout wrote, shown as text.
        text = "\n".join(f"gate failed: {plain_text(reason.removeprefix('gate failed: '))}"
                          for reason in reasons)
        return [(GATE_NODE, text, None)] if text else []

    @staticmethod
    def clear_for_lf(config: pytest.Config) -> None:
        """A gate that passed: its earlier failed reports leave pytest's --lf cache."""
        lf = config.pluginmanager.get_plugin("lfplugin")
        lastfailed = getattr(lf, "lastfailed", None)
        if isinstance(lastfailed, dict):
            for item_id in [k for k in lastfailed
                            if str(k) == GATE_NODE or "::prove-gate[" in str(k)]:
                del lastfailed[item_id]

    @staticmethod
    def close_progress_line(config: pytest.Config) -> None:
        """End the line the gate's letters were written on (see :func:`_own_progress_line`)."""
        _progress_writer(config)

    def _mark_for_lf(self, config: pytest.Config, key: tuple[str, str] | None) -> None:
        lf = config.pluginmanager.get_plugin("lfplugin")
        lastfailed = getattr(lf, "lastfailed", None)
        if key is None or not isinstance(lastfailed, dict):
            return
        base = split_arm(key[0])[0]
        for found, items in self._items.items():
            # An arm's condition fails with its reference arm's items too: --lf reruns both
            # arms of it, on their seeds, and compares them again.
            if found == key or (found[1] == key[1] and base != key[0]
                                and split_arm(found[0])[0] == base):
                for item_id in items:
                    lastfailed[item_id] = True


def _with_targets(reports: list[tuple[str, str, tuple[str, str] | None]],
                  rows: Iterable[TargetRow], run: Run | None
                  ) -> list[tuple[str, str, tuple[str, str] | None]]:
    """The failed gate's reports with each condition's failing target rows: added to its
    report when the comparison failed it too, else a report of their own."""
    from ..report._format import terminal_text
    from ..report.targets import condition_target_lines

    rollouts = (run.manifest.get("rollouts") or {}) if run is not None else {}
    by_key: dict[tuple[str, str], list[TargetRow]] = defaultdict(list)
    for row in rows:
        by_key[(row.rollout_id, row.key)].append(row)
    found = {key: (nodeid, text) for nodeid, text, key in reports if key is not None}
    extra = []
    for key, own in by_key.items():
        text = "\n".join(condition_target_lines(own))
        if key in found:
            nodeid, _was = found[key]
            reports = [(n, f"{t}\n{text}" if n == nodeid else t, k) for n, t, k in reports]
            continue
        info = rollouts.get(key[0])
        node = (info.get("node") if isinstance(info, Mapping) else None) or key[0]
        shown = terminal_text(own[0].condition).replace("::", ":").replace(
            "[", "(").replace("]", ")")
        extra.append((f"{node}::prove-gate[{shown}]", text, key))
    return [*reports, *extra]


def _progress_writer(config: pytest.Config) -> Any:
    """The terminal writer pytest's progress letters go to, when they are letters (not
    ``-v``'s one line per item) and pytest writes a terminal at all; the line it is on is
    ended (pytest's own ``ensure_newline`` ends it only after a file's path)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or config.get_verbosity() > 0:
        return None
    writer: Any = getattr(reporter, "_tw", None)
    if writer is None or not hasattr(writer, "width_of_current_line"):
        return None
    reporter.ensure_newline()
    if writer.width_of_current_line:
        writer.line()
    return writer


def _own_progress_line(config: pytest.Config) -> None:
    """The gate decides after pytest wrote its ``[100%]``: its letters start a line of their
    own, named, rather than trail the percentage (``[100%]F [100%]``)."""
    writer = _progress_writer(config)
    if writer is not None:
        writer.write("pytest-prove gate ")
