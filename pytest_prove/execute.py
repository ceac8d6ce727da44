"""Running an item's replicates and deciding what the item reports.

The rollout's outcome never fails its item.  The item fails when the rollout
raises (its traceback shown as pytest shows any) or breaks its contract (a
message naming the test, the value and what was expected); it is skipped when
every replicate raised ``prove.NoOutcome``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from .runner import Identity, run_block
from .seeds import derive_seed
from .state import CAPTURE_KEY, PLAN_KEY, RESULTS_KEY, SETTINGS_KEY

IDENTITIES_KEY = pytest.StashKey[list[Identity]]()

__all__ = ["IDENTITIES_KEY", "execute_rollout", "identities_of"]


def identities_of(item: pytest.Item) -> list[Identity]:
    """The episodes an item runs, with their seeds in this run (worked out once per item)."""
    found = item.stash.get(IDENTITIES_KEY, None)
    if found is None:
        found = item.stash[IDENTITIES_KEY] = _identities(item)
    return found


def _identities(item: pytest.Item) -> list[Identity]:
    plan = item.stash[PLAN_KEY]
    salt = item.config.stash[SETTINGS_KEY].salt
    return [
        Identity(
            rollout=plan.rollout_id,
            condition=dict(plan.condition),
            condition_key=plan.condition_key,
            replicate=r,
            seed=derive_seed(salt, plan.rollout_id, plan.condition_key, r),
        )
        for r in plan.replicates
    ]


def execute_rollout(item: pytest.Item, call: Callable[[Identity], Any], *,
                    is_async: bool) -> None:
    """Run the item's block, keep its records for the report, and pass, fail or skip."""
    plan = item.stash[PLAN_KEY]
    idents = identities_of(item)
    many = len(idents) > 1

    def where(ident: Identity) -> str:
        return f"{item.nodeid} (replicate {ident.replicate})" if many else item.nodeid

    results = run_block(idents, plan.declaration, call, where=where, is_async=is_async,
                        capture=item.stash.get(CAPTURE_KEY, None))
    item.stash[RESULTS_KEY] = [r.record for r in results]
    if not many and results[0].record["error"] is None:
        return  # the common case: one replicate, which ended with an outcome
    raised = [r.exception for r in results if isinstance(r.exception, Exception)]
    broken = [r.contract_error for r in results if r.contract_error is not None]
    if raised:
        if len(raised) == 1:
            raise raised[0]
        raise ExceptionGroup(f"{len(raised)} of {len(idents)} replicates raised", raised)
    if broken:
        pytest.fail("\n".join(broken), pytrace=False)
    skipped = [r.no_outcome for r in results if r.no_outcome is not None]
    if skipped and len(skipped) == len(results):
        pytest.skip(f"no outcome: {skipped[0]}")
