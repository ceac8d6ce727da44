"""Simulate sequential sweeps through the public API and print their error rates and costs.

    python bench/sequential.py            # 2,000 sweeps per line (many minutes)
    python bench/sequential.py --sweeps 200

Each sweep has 16 conditions with one failure event each (m = 16), q = 0.05, max_mde = 0.20,
a complete baseline of the planned maximum, and the planned maximum from
``sequential_design`` (paired and unpaired). Paired twins come in two kinds: **correlated**
(a twin pair shares its uniform draw with chance RHO = 0.79, so that unchanged twins at 0.40
agree 0.90 of the time, as an agent replaying a seed often does) and **independent** (the
engine's model, given the rates). Every look of every condition is decided by
``pytest_prove.stats.decide`` exactly as a session does. Lines:

* nothing changed: every condition at base rate 0.40, and spread over 0.05..0.50; the share
  of sweeps with any worse-or-safer verdict (bound q + 2 s.e.), and the episodes spent as a
  share of the fixed design (16 x the design check's replicates; bound 0.15 for correlated
  twins and unpaired, none for independent twins), next to the exact figure
  ``sequential_design`` printed (``expected``);
* one condition moved by max_mde (0.40 -> 0.60): the share of sweeps calling it worse
  (bound 0.80 - 2 s.e.);
* one condition moved by 0.40 (0.30 -> 0.70): the share of its planned replicates it spends
  (bound 0.25).

``simulate`` is imported by tests/test_stats_sequential.py, which runs a small fixed-seed
version.

    python bench/sequential.py --futility     # the unpaired futility threshold's trade-off
    python bench/sequential.py --margin 0.1   # the margin on the looks, exact figures

prints instead, for the margin claim on a sequential run's looks (16 tests, q 0.05): the
fixed margin design and the sequential maximum (the design check at the last margin look's
level), the exact size at the margin (the largest over 41 nuisance values: twins' before-only
rate, unpaired base rate; bound q), the exact power of the claim for all 16 rows at the
maximum when nothing changed (twins independent given the rate, rows stopped as worse at
Holm's first level q/m; the smallest over 21 base rates from 0.3 to 0.7, where it is
weakest; bound 0.80), and the expected replicates of an unchanged condition over the fixed
margin design.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_prove.stats import (
    Pairs,
    RowInput,
    SequentialDesign,
    SequentialRow,
    decide,
    sequential_design,
)

CONDITIONS = 16
RHO = (0.90 - 0.52) / (1 - 0.52)  # unchanged twins at 0.40 agree 0.90 of the time


@dataclass(frozen=True)
class Outcome:
    sweeps: int
    any_verdict: float  # share of sweeps with any worse-or-safer verdict
    moved_worse: float  # share of sweeps calling condition 0 worse
    spent: float  # mean episodes of the sweep (new run)
    spent_moved: float  # mean replicates spent by condition 0


def _counts(before: npt.NDArray[np.bool_], after: npt.NDArray[np.bool_], n: int,
            paired: bool, name: str) -> RowInput:
    if paired:
        b, a = before[:n], after[:n]
        both = int(np.sum(b & a))
        before_only = int(np.sum(b & ~a))
        after_only = int(np.sum(~b & a))
        return RowInput(name, "fail", "rise", both + before_only, n, both + after_only, n,
                        Pairs(n, both, before_only, after_only))
    return RowInput(name, "fail", "rise", int(before.sum()), before.size,
                    int(after[:n].sum()), n)


def draw(rng: np.random.Generator, before_rates: npt.NDArray[np.float64],
         after_rates: npt.NDArray[np.float64], n: int,
         rho: float) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Twins of n replicates per condition: a pair shares its uniform draw with chance rho."""
    c = len(before_rates)
    u = rng.random((c, n))
    other = rng.random((c, n))
    shared = rng.random((c, n)) < rho
    before = u < before_rates[:, None]
    after = np.where(shared, u, other) < after_rates[:, None]
    return before, after


def simulate(design: SequentialDesign, before_rates: npt.NDArray[np.float64],
             after_rates: npt.NDArray[np.float64], sweeps: int, seed: int,
             rho: float = 0.0) -> Outcome:
    """Run ``sweeps`` sequential sweeps of len(rates) conditions; condition 0 is 'the moved'.
    ``rho``: the chance that a pair of twins shares its draw (paired designs)."""
    rng = np.random.default_rng(seed)
    n_max = design.replicates
    c = len(before_rates)
    names = [f"c{i:02d}" for i in range(c)]
    any_verdict = moved_worse = 0
    spent = 0.0
    spent_moved = 0.0
    for _ in range(sweeps):
        before, after = draw(rng, before_rates, after_rates, n_max, rho)
        history: list[list[RowInput]] = [[] for _ in range(c)]
        open_ = set(range(c))
        final: dict[str, str] = {}
        for n in design.looks:
            for i in open_:
                history[i].append(_counts(before[i], after[i], n, design.paired, names[i]))
            rows = [SequentialRow(names[i], "fail", "rise", tuple(history[i])) for i in range(c)]
            _, conditions = decide(design, rows)
            for i, decision in enumerate(conditions):
                final[names[i]] = decision.state
                if decision.state != "open":
                    open_.discard(i)
            if not open_:
                break
        if any(s in ("worse", "safer") for s in final.values()):
            any_verdict += 1
        if final[names[0]] == "worse":
            moved_worse += 1
        taken = [design.looks[len(h) - 1] for h in history]
        spent += sum(taken)
        spent_moved += taken[0]
    return Outcome(sweeps, any_verdict / sweeps, moved_worse / sweeps, spent / sweeps,
                   spent_moved / sweeps)


def _se(p: float, n: int) -> float:
    return math.sqrt(max(p * (1 - p), 1e-12) / n)


def table(sweeps: int, seed: int = 1,
          kinds: tuple[str, ...] = ("correlated", "independent", "unpaired"),
          echo: bool = False) -> list[str]:
    """The lines of the bench; with ``echo`` each is printed as soon as it is known."""
    lines: list[str] = []

    class _Lines(list[str]):
        def append(self, line: str) -> None:
            lines.append(line)
            if echo:
                print(line, flush=True)

    out_lines = _Lines()
    out_lines.append(f"{'design':11} {'scenario':34} {'sweeps':>6} {'figure':>22} "
                     f"{'value':>7} {'bound':>7}  {'pass'}")
    table_lines(out_lines, sweeps, seed, kinds)
    return lines


def table_lines(lines: list[str], sweeps: int, seed: int, kinds: tuple[str, ...]) -> None:
    for kind, paired, rho in (("correlated", True, RHO), ("independent", True, 0.0),
                              ("unpaired", False, 0.0)):
        if kind not in kinds:
            continue
        start = time.process_time()
        plan = sequential_design(2, CONDITIONS, paired=paired)
        assert plan.replicates_needed is not None and plan.fixed is not None
        design = sequential_design(plan.replicates_needed, CONDITIONS, paired=paired)
        cpu = time.process_time() - start
        fixed = CONDITIONS * plan.fixed
        lines.append(
            f"# {kind}: fixed design {plan.fixed} replicates per condition; sequential "
            f"maximum {design.replicates}, a look every {design.looks[0]}; power at max_mde "
            f"{design.power_at_max_mde:.4f} (exact, worst nuisance); expected "
            f"({'exact, independent twins' if paired else 'exact'}) "
            f"{design.expected_unchanged:.1f} unchanged at 0.40, "
            f"{design.expected_moved:.1f} moved by max_mde; design step {cpu:.1f} s CPU")
        flat = np.full(CONDITIONS, 0.40)
        spread = np.linspace(0.05, 0.50, CONDITIONS)
        cap = 0.15 if kind != "independent" else None
        for label, rates in (("nothing changed, all at 0.40", flat),
                             ("nothing changed, 0.05..0.50", spread)):
            out = simulate(design, rates, rates, sweeps, seed, rho)
            bound = 0.05 + 2 * _se(0.05, sweeps)
            lines.append(_line(kind, label, sweeps, "any worse/safer", out.any_verdict,
                               bound, out.any_verdict <= bound))
            share = out.spent / fixed
            lines.append(_line(kind, label, sweeps, "episodes / fixed", share,
                               cap, cap is None or share <= cap))
        after = flat.copy()
        after[0] = 0.60
        out = simulate(design, flat, after, sweeps, seed + 1, rho)
        bound = 0.80 - 2 * _se(0.80, sweeps)
        lines.append(_line(kind, "one moved 0.40 -> 0.60 (max_mde)", sweeps, "detected",
                           out.moved_worse, bound, out.moved_worse >= bound, low=True))
        before = flat.copy()
        before[0] = 0.30
        after = flat.copy()
        after[0] = 0.70
        out = simulate(design, before, after, sweeps, seed + 2, rho)
        share = out.spent_moved / design.replicates
        lines.append(_line(kind, "one moved 0.30 -> 0.70 (0.40)", sweeps,
                           "its replicates / max", share, 0.25, share <= 0.25))
        lines.append(_line(kind, "one moved 0.30 -> 0.70 (0.40)", sweeps, "detected",
                           out.moved_worse, 0.80, out.moved_worse >= 0.80, low=True))


def _line(kind: str, scenario: str, sweeps: int | str, figure: str, value: float,
          bound: float | None, ok: bool, low: bool = False) -> str:
    sign = ">=" if low else "<="
    shown = f"{sign}{bound:6.4f}" if bound is not None else "   none"
    return (f"{kind:11} {scenario:34} {sweeps:>6} {figure:>22} {value:7.4f} "
            f"{shown}  {'ok' if ok else 'FAIL'}")


def margin_lines(margin: float, q: float = 0.05) -> list[str]:
    """The margin on the looks, exact: its design, size, power and expected replicates."""
    from pytest_prove.stats._margin_design import margin_replicates
    from pytest_prove.stats._seq_margin import FINAL_SHARE, expected_replicates, within_chance
    from pytest_prove.stats._seq_paired import level as paired_level
    from pytest_prove.stats._seq_unpaired import level as unpaired_level
    from pytest_prove.stats._sequential import looks_of

    lines: list[str] = []
    for paired in (True, False):
        start = time.process_time()
        kind = "paired" if paired else "unpaired"
        fixed = margin_replicates(paired, CONDITIONS, q, margin)
        maximum = margin_replicates(paired, CONDITIONS, FINAL_SHARE * q, margin)
        assert fixed is not None and maximum is not None
        looks = looks_of(maximum)
        top = (1 - margin) / 2 if paired else 1 - margin
        size = max(within_chance(looks, margin, q, paired=paired, nuisance=float(v),
                                 change=margin) for v in np.linspace(0.0, top, 41))
        worse = (paired_level(maximum, q / CONDITIONS) if paired
                 else unpaired_level(looks, maximum, q / CONDITIONS))
        rates = np.linspace(0.3, 0.7, 21)
        row = min(within_chance(looks, margin, q, paired=paired,
                                nuisance=float(r * (1 - r)) if paired else float(r),
                                change=0.0, worse_level=worse) for r in rates)
        lines.append(f"# margin {margin:g}, {kind}: fixed margin design {fixed} replicates, "
                     f"sequential maximum {maximum} (the last margin look at "
                     f"{FINAL_SHARE:g} q)")
        lines.append(_line(kind, f"change toward worse = {margin:g}", "exact", "size", size,
                           q, size <= q))
        claim = row ** CONDITIONS
        lines.append(_line(kind, "nothing changed, 0.3..0.7", "exact", "claim power",
                           claim, 0.80, claim >= 0.80, low=True))
        for label, nuisance in ((("unchanged, independent twins 0.40", 0.24),
                                 ("unchanged, agreement 0.9 at 0.40", 0.05),
                                 ("unchanged, identical twins", 0.0))
                                if paired else (("unchanged, at 0.40", 0.40),
                                               ("unchanged, at 0.10", 0.10))):
            spent = expected_replicates(looks, margin, q, paired=paired, nuisance=nuisance)
            lines.append(_line(kind, label, "exact", "replicates / fixed",
                               spent / fixed, None, True))
        lines.append(f"({time.process_time() - start:.0f} s CPU)")
    return lines


def futility_lines(thresholds: tuple[float, ...] = (1.5, 1.75, 2.0),
                   below: tuple[float, ...] = (1.25,),
                   at: tuple[int, ...] = (400, 600)) -> list[str]:
    """The unpaired futility threshold's trade-off, exact (16 tests, q 0.05, max_mde 0.2):
    for each threshold e^h, the maximum the design search finds (the smallest whose power
    at max_mde reaches 0.8 at base rates 0, 0.1, .., 0.8; none below 6 times the fixed
    design when the rule's cost in power cannot be made up), its power, an unchanged
    condition's expected replicates over the fixed design at four base rates, and a 0.40
    move's (0.30 -> 0.70) over the maximum. Thresholds ``below`` are read at the maxima
    ``at`` instead of searched: the search would try maxima up to 6 times the fixed design,
    minutes each, and their power is not monotone in the maximum (the look step grows)."""
    from pytest_prove.stats import _seq_unpaired, _sequential

    lines = [f"{'futility':>8} {'maximum':>8} {'power':>6} "
             + " ".join(f"{'at ' + format(r, '.2f'):>8}" for r in (0.05, 0.2, 0.4, 0.5))
             + f" {'0.40 move':>10}"]
    print(lines[0], flush=True)
    chosen = _sequential.FUTILITY[False]
    try:
        fixed = sequential_design(2, CONDITIONS, paired=False).fixed
        assert fixed is not None
        for h, maximum in (*((h, n) for h in below for n in at),
                           *((h, None) for h in thresholds)):
            _sequential.FUTILITY[False] = h
            for cached in (_sequential._evaluate, _sequential._reaches, _seq_unpaired.run):
                cached.cache_clear()
            if maximum is not None:
                design = sequential_design(maximum, CONDITIONS, paired=False)
                note = "  (not reached)" if not design.ok else ""
            else:
                needed = sequential_design(2, CONDITIONS, paired=False).replicates_needed
                assert needed is not None
                design = sequential_design(needed, CONDITIONS, paired=False)
                note = "  (chosen)" if h == chosen else ""
            n = design.replicates
            spent = [_seq_unpaired.run(design.looks, n, design.efficacy, 0.2, h, r, r)[2]
                     / fixed for r in (0.05, 0.2, 0.4, 0.5)]
            move = _seq_unpaired.run(design.looks, n, design.efficacy, 0.2, h, 0.3,
                                     0.7)[2] / n
            line = (f"{'e^' + format(h, 'g'):>8} {n:>8} {design.power_at_max_mde:6.3f} "
                    + " ".join(f"{v:8.3f}" for v in spent) + f" {move:10.3f}" + note)
            lines.append(line)
            print(line, flush=True)
    finally:
        _sequential.FUTILITY[False] = chosen
        for cached in (_sequential._evaluate, _sequential._reaches, _seq_unpaired.run):
            cached.cache_clear()
    return lines


def by_rate(sweeps: int, seed: int, kinds: tuple[str, ...],
            rates: tuple[float, ...] = (0.05, 0.10, 0.15, 0.20, 0.30, 0.40, 0.50)) -> list[str]:
    """What an unchanged sweep spends, over the fixed design's episodes, at each base rate
    (every condition at that rate): the fixed design is sized for the worst rate, and a
    sequential run stops sooner the further the rate is from 1/2."""
    lines = [f"{'design':11} {'base rate':>9} {'sweeps':>6} {'episodes / fixed':>17} "
             f"{'any worse/safer':>16}"]
    print(lines[0], flush=True)
    for kind, paired, rho in (("correlated", True, RHO), ("independent", True, 0.0),
                              ("unpaired", False, 0.0)):
        if kind not in kinds:
            continue
        plan = sequential_design(2, CONDITIONS, paired=paired)
        assert plan.replicates_needed is not None and plan.fixed is not None
        design = sequential_design(plan.replicates_needed, CONDITIONS, paired=paired)
        for rate in rates:
            flat = np.full(CONDITIONS, rate)
            out = simulate(design, flat, flat, sweeps, seed, rho)
            line = (f"{kind:11} {rate:9.2f} {sweeps:>6} "
                    f"{out.spent / (CONDITIONS * plan.fixed):17.4f} {out.any_verdict:16.4f}")
            lines.append(line)
            print(line, flush=True)
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kinds", default="correlated,independent,unpaired",
                        help="which designs, comma-separated")
    parser.add_argument("--margin", type=float, default=None,
                        help="print the margin on the looks' exact figures instead")
    parser.add_argument("--futility", action="store_true",
                        help="print the unpaired futility threshold's exact trade-off instead")
    parser.add_argument("--by-rate", action="store_true",
                        help="print what an unchanged sweep spends at each base rate instead")
    args = parser.parse_args()
    start = time.perf_counter()
    if args.futility:
        futility_lines()
        print(f"({time.perf_counter() - start:.0f} s)")
        return 0
    if args.by_rate:
        by_rate(args.sweeps, args.seed, tuple(args.kinds.split(",")))
        print(f"({time.perf_counter() - start:.0f} s)")
        return 0
    if args.margin is not None:
        lines = margin_lines(args.margin)
        print("\n".join(lines))
        return 1 if any(line.endswith("FAIL") for line in lines) else 0
    lines = table(args.sweeps, args.seed, tuple(args.kinds.split(",")), echo=True)
    print(f"({time.perf_counter() - start:.0f} s)")
    return 1 if any(line.endswith("FAIL") for line in lines) else 0


if __name__ == "__main__":
    raise SystemExit(main())
