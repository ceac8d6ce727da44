"""--prove-shard K/N and pytest-prove merge: slices of one sweep, run apart, joined into one run."""

from __future__ import annotations

import json
import shutil
import textwrap
from operator import itemgetter
from pathlib import Path
from typing import Any

import pytest

from pytest_prove.cli import main
from pytest_prove.declare.spec import condition_key
from pytest_prove.plugin.shards import shard_of
from pytest_prove.store import Run, Store
from pytest_prove.store.episodes import plain

#: Four conditions whose failure rate SWEEP_BUMP raises for "cancel".
SWEEP = textwrap.dedent(
    """
    import os
    import random

    import pytest
    import pytest_prove as prove

    RATES = {"refund": 0.1, "password": 0.2, "billing": 0.3, "cancel": 0.2}
    BUMP = float(os.environ.get("SWEEP_BUMP", "0"))


    @prove.rollout(replicates=int(os.environ.get("SWEEP_REPLICATES", "10")),
                   failures=["unresolved"], successes=["resolved"])
    @pytest.mark.parametrize("ticket", sorted(RATES))
    def test_agent(ticket, prove_seed):
        rng = random.Random(prove_seed)
        bad = rng.random() < RATES[ticket] + (BUMP if ticket == "cancel" else 0)
        return prove.Episode("unresolved" if bad else "resolved", meta={"case_id": ticket})
    """
)


@pytest.fixture
def sweep(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_agent=SWEEP)
    return pytester


def shard(pytester: pytest.Pytester, k: int, n: int, store: str, *args: str
          ) -> pytest.RunResult:
    return pytester.runpytest(f"--prove-store={store}", f"--prove-shard={k}/{n}",
                              f"--prove-name=part-{k}", "-p", "no:randomly", *args)


def gather(pytester: pytest.Pytester, stores: list[str], into: str = "merged") -> Path:
    """Copy each shard's run folder into one store, as CI's artifacts would be."""
    target = pytester.path / into
    (target / "runs").mkdir(parents=True, exist_ok=True)
    for store in stores:
        for run in (pytester.path / store / "runs").iterdir():
            if run.is_dir():
                shutil.copytree(run, target / "runs" / f"{store}-{run.name}")
        for baseline in (pytester.path / store / "baselines").glob("*.baseline"):
            (target / "baselines").mkdir(exist_ok=True)
            shutil.copy2(baseline, target / "baselines" / baseline.name)
    return target


def cli(store: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["--store", str(store), *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def twins(run: Run) -> set[tuple[str, int, int, str | None]]:
    return {(e["condition_key"], e["replicate"], e["seed"], e.get("outcome"))
            for e in run.episodes}


@pytest.mark.slow
def test_three_shards_merged_are_the_whole_sweep_with_its_verdict(
        sweep: pytest.Pytester, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWEEP_REPLICATES", "31")  # 124 items: 42, 41 and 41 a shard
    # A fixed salt: SWEEP_BUMP takes about 19 of cancel's 31 twins apart (0.2 -> 0.8, all
    # one way); the verdict needs 7 (mid-p 0.5^7 under Holm's 0.05/4), and on a new salt 6
    # or fewer came 4.5e-6 of the time. This salt takes 22 apart.
    sweep.runpytest("--prove-store=base", "--prove-save-baseline=main", "-p", "no:randomly",
                    "--prove-salt=shard").assert_outcomes(passed=124)
    for store in ("s1", "s2", "s3", "whole"):
        (sweep.path / store / "baselines").mkdir(parents=True)
        shutil.copy2(sweep.path / "base/baselines/main.baseline", sweep.path / store / "baselines")
    monkeypatch.setenv("SWEEP_BUMP", "0.6")
    whole = sweep.runpytest("--prove-store=whole", "--prove-baseline=main",
                            "--prove-name=whole", "-p", "no:randomly")
    whole.assert_outcomes(passed=124, failed=1)  # the gate's report
    sizes = []
    for k, store in enumerate(("s1", "s2", "s3"), start=1):
        extra = ("-n", "2") if k == 3 else ()
        result = shard(sweep, k, 3, store, "--prove-baseline=main", *extra)
        assert result.ret == 0  # a shard compares nothing: the gate is after the merge
        result.stdout.fnmatch_lines([f"*shard {k}/3: paired with baseline 'main'*not compared*"])
        run = Store(sweep.path / store).load(f"part-{k}")
        assert run.status == "complete"
        assert run.manifest["shard"]["index"] == k and run.manifest["shard"]["count"] == 3
        sizes.append(len(run.episodes))
        per_condition = {key: len(reps) for reps in run.manifest["shard"]["slice"].values()
                         for key, reps in reps.items()}
        assert set(per_condition.values()) <= {10, 11}, per_condition  # 31 dealt to 3
    # Each condition's 31 replicates are 10, 10 and 11; which shard takes the 11th depends
    # on the condition alone, so the shards' sizes are 41 each, give or take a few.
    assert sum(sizes) == 124 and all(40 <= size <= 44 for size in sizes), sizes
    store = gather(sweep, ["s1", "s2", "s3"])
    code, out, err = cli(store, capsys, "merge", "part-1", "part-2", "part-3", "--name", "all")
    assert code == 0, err
    assert "merged 3 of 3 shards into run 'all'" in out and "complete" in out
    merged = Store(store).load("all")
    alone = Store(sweep.path / "whole").load("whole")
    assert merged.status == "complete"
    assert twins(merged) == twins(alone) and len(twins(merged)) == 124
    code, out, _ = cli(store, capsys, "check", "baseline:main", "all")
    code_whole, out_whole, _ = cli(sweep.path / "whole", capsys, "check", "baseline:main",
                                   "whole")
    assert code == code_whole == 4
    assert out.splitlines()[0] == out_whole.splitlines()[0]
    assert out.splitlines()[0].startswith("worse")
    # The merged run is a run like any other: it can become a baseline.
    code, out, _ = cli(store, capsys, "merge", "part-1", "part-2", "part-3", "--name", "again",
                       "--save-baseline", "next")
    assert code == 0 and "baseline 'next' saved from run 'again'" in out


def test_a_missing_shard_leaves_the_merge_incomplete_and_check_names_the_slice(
        sweep: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    for k in (1, 3):
        assert shard(sweep, k, 3, f"s{k}", "--prove-salt=nightly").ret == 0
    store = gather(sweep, ["s1", "s3"])
    code, out, _ = cli(store, capsys, "merge", "part-1", "part-3", "--name", "some")
    assert code == 0
    assert "merged 2 of 3 shards" in out and "incomplete: slice(s) 2/3 missing" in out
    assert Store(store).load("some").status == "incomplete"
    code, out, _ = cli(store, capsys, "show", "some")
    assert code == 0 and "merged from shards 1/3 'part-1', 3/3 'part-3'; missing 2/3" in out
    code, out, _ = cli(store, capsys, "show", "part-1")
    held = sum(len(reps) for keys in Store(store).load("part-1").manifest["shard"]["slice"]
               .values() for reps in keys.values())
    assert held in (13, 14, 15)  # 10 replicates of each of 4 conditions, dealt to 3 shards
    assert code == 0 and f"shard 1/3 of its sweep: {held} replicates in its slice" in out
    code, out, _ = cli(store, capsys, "check", "some", "some")
    assert code == 4
    # The refusal leads, before a verdict line that could be read as a pass, and ends it.
    refusal = "check failed: run 'some' merges 2 of 3 shards: slice(s) 2/3 missing"
    assert out.splitlines()[0].startswith(refusal)
    # Repeated last, before the other reason: a run checked against itself.
    assert out.splitlines()[-2].startswith(refusal)
    assert "are the same run" in out.splitlines()[-1]
    code, out, _ = cli(store, capsys, "merge", "part-1", "part-3", "--name", "more",
                       "--save-baseline", "b")
    assert code == 1 and "not saved: baseline 'b'" in out and "2/3 missing" in out
    assert not list((store / "baselines").glob("b.*"))


def test_shards_of_other_salts_twice_run_or_duplicated_are_refused(
        sweep: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    assert shard(sweep, 1, 2, "a", "--prove-salt=one").ret == 0
    assert shard(sweep, 2, 2, "b", "--prove-salt=two").ret == 0
    assert shard(sweep, 2, 2, "c", "--prove-salt=one").ret == 0
    assert shard(sweep, 2, 2, "d", "--prove-salt=one").ret == 0
    store = gather(sweep, ["a", "b", "c", "d"])
    a, b, c, d = (Store(sweep.path / s).load(f"part-{k}").run_id
                  for s, k in (("a", 1), ("b", 2), ("c", 2), ("d", 2)))
    code, _, err = cli(store, capsys, "merge", a, b, "--name", "x")
    assert code == 1 and "differ in salt" in err and "--prove-salt" in err
    code, _, err = cli(store, capsys, "merge", a, c, d, "--name", "x")
    assert code == 1 and "shard 2/2 is given twice" in err and "that shard ran twice" in err
    code, _, err = cli(store, capsys, "merge", a, a, "--name", "x")
    assert code == 1 and "shard 1/2 is given twice" in err and "named twice" in err
    # An episode in the wrong shard's run (an edited or mixed-up file) is refused.
    other = next((store / "runs").glob("c-*")) / "episodes.jsonl"
    first = (next((store / "runs").glob("a-*")) / "episodes.jsonl").read_text().splitlines()[0]
    with other.open("a") as fh:
        fh.write(first + "\n")
    code, _, err = cli(store, capsys, "merge", a, c, "--name", "x")
    assert code == 1 and "belongs to shard 1/2" in err
    assert not any(m.get("name") == "x" for _, m in Store(store).runs())


def test_the_slice_is_the_same_whatever_the_order_and_selection(
        sweep: pytest.Pytester) -> None:
    assert shard(sweep, 2, 3, "plain", "--prove-salt=s").ret == 0
    assert shard(sweep, 2, 3, "narrow", "--prove-salt=s", "-k", "refund or cancel",
                 "-p", "no:cacheprovider").ret == 0
    # Items collected in another order (as pytest-randomly shuffles them) make the same slice.
    sweep.makeconftest("""
        import pytest

        @pytest.hookimpl(tryfirst=True)
        def pytest_collection_modifyitems(items):
            items.reverse()
    """)
    assert shard(sweep, 2, 3, "reversed", "--prove-salt=s").ret == 0
    plain = Store(sweep.path / "plain").load("part-2")
    narrow = Store(sweep.path / "narrow").load("part-2")
    backwards = Store(sweep.path / "reversed").load("part-2")
    assert plain.manifest["shard"] == narrow.manifest["shard"] == backwards.manifest["shard"]
    assert twins(plain) == twins(backwards)
    kept = {(e["condition_key"], e["replicate"]) for e in narrow.episodes}
    assert kept == {(e["condition_key"], e["replicate"]) for e in plain.episodes
                    if "refund" in e["condition_key"] or "cancel" in e["condition_key"]}


@pytest.mark.parametrize(("args", "words"), [
    (("--prove-shard=1/3",), "must share one salt"),
    (("--prove-shard=4/3",), "expected K/N with 1 <= K <= N"),
    (("--prove-shard=0/3",), "expected K/N"),
    (("--prove-shard=a/b",), "expected K/N"),
    (("--prove-shard=1/2", "--prove-salt=s", "--prove-save-baseline=b"),
     "a baseline holds a whole"),
    (("--prove-salt=../x",), "salt"),
])
def test_bad_shard_options_are_refused_before_anything_runs(
        sweep: pytest.Pytester, args: tuple[str, ...], words: str) -> None:
    result = sweep.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{words}*"])
    assert "Traceback" not in result.stderr.str()
    assert not (sweep.path / ".prove" / "runs").exists()


def test_a_shard_resumes_only_as_itself(sweep: pytest.Pytester) -> None:
    assert shard(sweep, 1, 2, "st", "--prove-salt=s", "--prove-replicates=4").ret == 0
    result = sweep.runpytest("--prove-store=st", "--prove-resume=part-1", "--prove-shard=2/2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*is shard 1/2 of its sweep; resume it with --prove-shard=1/2*"])
    result = sweep.runpytest("--prove-store=st", "--prove-resume=part-1", "--prove-shard=1/2",
                             "--prove-replicates=4")
    result.stdout.fnmatch_lines(["*nothing left to run*"])


def test_a_shard_with_no_item_is_refused_and_the_plan_is_the_whole_sweeps(
        sweep: pytest.Pytester) -> None:
    # One replicate a condition: 4 items, so at least one of 5 shards holds none.
    keys = [condition_key({"ticket": t}) for t in ("billing", "cancel", "password", "refund")]
    taken = {shard_of("test_agent.py::test_agent", key, 0, 5) for key in keys}
    empty = min(set(range(1, 6)) - taken)
    result = shard(sweep, empty, 5, "few", "--prove-salt=s", "--prove-replicates=1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--prove-shard={empty}/5: none of the sweep's 4 rollout "
                                 f"item(s) falls in slice {empty} of 5*into fewer shards*"])
    result = shard(sweep, 2, 3, "plan", "--prove-salt=s", "--prove-plan")
    mine = sum(shard_of("test_agent.py::test_agent", key, r, 3) == 2
               for key in keys for r in range(10))
    result.stdout.fnmatch_lines([
        "pytest-prove plan: 40 episodes: 1 rollout(s), 4 condition(s)*",
        "*q 0.05 over 4 tests*",
        f"shard 2/3: this session runs {mine} of these 40 rollout items*"])


def test_a_merge_that_lacks_a_rollout_of_the_baseline_fails_the_check(
        sweep: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    other = SWEEP.replace("def test_agent", "def test_other")
    sweep.makepyfile(test_other=other)
    sweep.runpytest("--prove-store=base", "--prove-save-baseline=main", "-p", "no:randomly",
                    "--prove-replicates=6").assert_outcomes(passed=48)
    (sweep.path / "test_other.py").unlink()  # the rollout is gone, not left out on purpose
    stores = []
    for k in (1, 2):
        store = sweep.path / f"s{k}"
        (store / "baselines").mkdir(parents=True)
        shutil.copy2(sweep.path / "base/baselines/main.baseline", store / "baselines")
        assert shard(sweep, k, 2, f"s{k}", "--prove-baseline=main",
                     "--prove-replicates=6").ret == 0
        stores.append(f"s{k}")
    store = gather(sweep, stores)
    assert cli(store, capsys, "merge", "part-1", "part-2", "--name", "all")[0] == 0
    code, out, _ = cli(store, capsys, "check", "baseline:main", "all")
    assert code == 4
    assert "check failed" in out and "test_other" in out and "did not collect" in out


def test_last_failed_on_a_shard_reruns_every_failure_of_that_shard(
        pytester: pytest.Pytester) -> None:
    # --lf narrows collection itself (a file without failures is not collected, and a
    # file's passed items are not either); the slice must not be cut again from what is
    # left, or most of a shard's failures would fall to other shards and never rerun.
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_a=textwrap.dedent("""
        import pytest_prove as prove

        @prove.rollout(replicates=12, failures=["bad"], successes=["good"])
        def test_a(prove_seed):
            return prove.Episode("good")
        """), test_b=textwrap.dedent("""
        import pytest_prove as prove

        @prove.rollout(replicates=12, failures=["bad"], successes=["good"])
        def test_b(prove_replicate):
            assert prove_replicate % 3 != 1
            return prove.Episode("good")
        """))
    first = shard(pytester, 2, 2, "st", "--prove-salt=s")
    failed = {line.split()[1] for line in first.outlines if line.startswith("FAILED ")}
    assert 1 <= len(failed) <= 4 and all("test_b" in f for f in failed), first.outlines
    sliced = Store(pytester.path / "st").load("part-2").manifest["shard"]["slice"]
    again = pytester.runpytest("--prove-store=st", "--prove-shard=2/2", "--prove-name=again",
                               "--lf", "-p", "no:randomly", "--prove-salt=s")
    assert {line.split()[1] for line in again.outlines if line.startswith("FAILED ")} == failed
    rerun = Store(pytester.path / "st").load("again").manifest["shard"]["slice"]
    assert set(rerun) == {"test_b.py::test_b"}
    assert set(rerun["test_b.py::test_b"]["{}"]) <= set(sliced["test_b.py::test_b"]["{}"])


def test_two_merges_into_one_name_at_once_write_one_run(
        sweep: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from filelock import FileLock

    from pytest_prove.store import merging
    from pytest_prove.store.merging import merge_runs

    for k in (1, 2):
        assert shard(sweep, k, 2, "st", "--prove-salt=s", "--prove-replicates=4").ret == 0
    store = Store(sweep.path / "st")
    shards = [store.load("part-1"), store.load("part-2")]
    # The first merge stops just after finding the name free, until the second is about to
    # take the store's merge lock (which the first holds), or has ended: without a lock both
    # found the name free and both wrote a run.  (It waited for the second's end or two
    # seconds; with the lock, the second cannot end first, so it waited the two seconds.)
    second_goes_on, first_waits = threading.Event(), threading.Event()
    new_run = Store.new_run
    first = threading.current_thread

    def slow_new_run(self: Store, **kwargs: object) -> object:
        if first().name == "merge-1":
            first_waits.set()
            assert second_goes_on.wait(60)
        return new_run(self, **kwargs)  # type: ignore[arg-type]

    class SeenLock(FileLock):
        def acquire(self, *args: Any, **kwargs: Any) -> Any:
            if first().name == "merge-2":
                second_goes_on.set()
            return super().acquire(*args, **kwargs)

    monkeypatch.setattr(Store, "new_run", slow_new_run)
    monkeypatch.setattr(merging, "FileLock", SeenLock)
    outcomes: dict[str, str] = {}

    def merge(label: str) -> None:
        try:
            merge_runs(Store(sweep.path / "st"), shards, "all")
            outcomes[label] = "merged"
        except Exception as exc:  # noqa: BLE001 - the refusal is what is checked
            outcomes[label] = str(exc)
        finally:
            if label == "merge-2":
                second_goes_on.set()

    one = threading.Thread(target=merge, args=("merge-1",), name="merge-1")
    one.start()
    assert first_waits.wait(60)
    two = threading.Thread(target=merge, args=("merge-2",), name="merge-2")
    two.start()
    one.join(60)
    two.join(60)
    assert outcomes["merge-1"] == "merged"
    assert "a run named 'all' is already in" in outcomes["merge-2"]
    assert [m["name"] for _, m in store.runs()].count("all") == 1


USAGE = textwrap.dedent(
    """
    import pytest
    import pytest_prove as prove


    @prove.rollout(replicates=4, failures=["unresolved"], successes=["resolved"])
    @pytest.mark.parametrize("ticket", ["refund", "billing"])
    def test_agent(ticket, prove_replicate):
        prove.usage("sim-1", input=90, output=12)
        if ticket == "billing" and prove_replicate % 2:
            prove.usage("sim-2", input=1, output=1)
        return prove.Episode("resolved")
    """
)


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
def test_shards_of_format_1_and_2_merge_into_one_run_of_format_2(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    """A shard left by an earlier pytest-prove (format 1: usage nested) merges with one of
    format 2 (one model's usage flat): the merged run is of format 2, and every episode
    reads back with the usage its shard holds."""
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_agent=USAGE)
    for k in (1, 2):
        shard(pytester, k, 2, f"s{k}", "--prove-salt=fixed").assert_outcomes(passed=4,
                                                                             deselected=4)
    old = next((pytester.path / "s1" / "runs").glob("*/manifest.json")).parent
    held = [plain(r) for r in Store(pytester.path / "s1").read(old).episodes]
    manifest = json.loads((old / "manifest.json").read_text())
    (old / "manifest.json").write_text(json.dumps({**manifest, "format": 1}))
    (old / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in held))
    store = gather(pytester, ["s1", "s2"])
    code, _, err = cli(store, capsys, "merge", "part-1", "part-2", "--name", "all")
    assert code == 0, err
    merged = Store(store).load("all")
    assert merged.manifest["format"] == 2
    shards = [*held, *(plain(r) for r in Store(pytester.path / "s2").load("part-2").episodes)]
    key = itemgetter("condition_key", "replicate")
    assert sorted((plain(r) for r in merged.episodes), key=key) == sorted(shards, key=key)
    lines = (merged.path / "episodes.jsonl").read_text().splitlines()
    assert sum('"model":"sim-1"' in line for line in lines) == 6  # 2 of 8 used two models
