"""Replicate numbers and endings kept in a byte a replicate, for the controller.

The controller keeps, for the run it writes, how every stored episode ended and which
replicates pytest's selection kept.  Kept as Python sets and dicts of tuples, that is a few
hundred bytes an episode: 30 MB at 100,000 episodes.  Replicates are numbered 0, 1, 2, ...
within a condition, so each condition keeps one byte array indexed by replicate instead;
a number far past the ones seen so far (a hand-edited run) goes to a small dict beside it,
so that no stray number makes a huge array.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from itertools import accumulate, repeat
from typing import Final, final

__all__ = ["ENDINGS", "Endings", "ReplicateSet"]

#: How an episode ended, as the run's counts class it (``record.ending``); code 0 is "none".
ENDINGS: Final = ("with_outcome", "no_outcome", "errored")
_CODE: Final = {name: code for code, name in enumerate(ENDINGS, start=1)}


def _dense(index: int, length: int) -> bool:
    """Whether replicate ``index`` goes in the array (it grows at most to twice its length
    plus a few thousand at a time)."""
    return 0 <= index < 2 * length + 4096


def _all_dense(values: list[int], length: int) -> bool:
    """Whether every number of ``values``, put one by one in an array ``length`` long,
    would go in the array (see :func:`_dense`)."""
    low, high = min(values), max(values)
    if low < 0:
        return False
    if high < 2 * length + 4096 or (values[0] <= length and values == list(
            range(values[0], values[0] + len(values)))):
        # All within reach of the array as it is, or a run 0, 1, 2, ... from its end
        # (each number then one past the array's end at most): decided in C.
        return True
    return all(_dense(index, before + 1) for index, before in zip(
        values, accumulate(values, max, initial=length - 1), strict=False))


@final
class _Codes:
    """One condition's replicates: a code byte each (0: not there)."""

    __slots__ = ("array", "low", "sparse")

    def __init__(self) -> None:
        self.array = bytearray()
        self.sparse: dict[int, int] | None = None
        self.low: int | None = None  # the least number >= 0 kept aside

    def get(self, index: int) -> int:
        if 0 <= index < len(self.array):
            return self.array[index]
        return 0 if self.sparse is None else self.sparse.get(index, 0)

    def put(self, index: int, code: int) -> None:
        array = self.array
        if index < len(array) and index >= 0:
            array[index] = code
        elif _dense(index, len(array)):
            self.grow(index + 1)
            array[index] = code
        else:
            if self.sparse is None:
                self.sparse = {}
            self.sparse[index] = code
            if index >= 0 and (self.low is None or index < self.low):
                self.low = index

    def grow(self, length: int) -> None:
        """Make the array ``length`` long; the numbers kept aside that it now reaches move
        into it (else :meth:`get` would read them as absent: under xdist a number far ahead
        comes first when another worker starts there)."""
        array = self.array
        array.extend(bytes(length - len(array)))
        if self.low is not None and _dense(self.low, len(array)):
            self._absorb()

    def _absorb(self) -> None:
        """Move into the array every number kept aside that it reaches, nearest first,
        growing it as putting them one by one would."""
        sparse, array = self.sparse, self.array
        assert sparse is not None
        for index in sorted(i for i in sparse if i >= 0):
            if not _dense(index, len(array)):
                break
            if index >= len(array):
                array.extend(bytes(index + 1 - len(array)))
            array[index] = sparse.pop(index)
        self.low = min((i for i in sparse if i >= 0), default=None)
        if not sparse:
            self.sparse = None

    def indices(self) -> Iterator[int]:
        yield from (i for i, code in enumerate(self.array) if code)
        if self.sparse:
            yield from sorted(i for i, code in self.sparse.items() if code)

    def size(self) -> int:
        """How many numbers are there."""
        array, sparse = self.array, self.sparse
        return len(array) - array.count(0) + (sum(1 for c in sparse.values() if c)
                                              if sparse else 0)

    def present(self, indices: Iterable[int]) -> int:
        """How many of ``indices`` are there."""
        return sum(1 for i in indices if self.get(i))

    def present_below(self, stop: int) -> int:
        """How many of 0 .. stop-1 are there."""
        array = self.array
        head = min(stop, len(array))
        found = head - array.count(0, 0, head)
        if stop > head and self.sparse:
            found += sum(1 for i, c in self.sparse.items() if c and head <= i < stop)
        return found


@final
class Endings:
    """How each stored episode of a run ended, by (rollout, condition key, replicate): a
    byte an episode, and the counts kept as episodes come (a replaced one counts where it
    now stands)."""

    __slots__ = ("_conditions", "_counts", "_total")

    def __init__(self) -> None:
        self._conditions: dict[tuple[str, str], _Codes] = {}
        self._counts = [0, 0, 0, 0]
        self._total = 0

    def put(self, rollout: str, condition_key: str, replicate: int, end: str) -> None:
        codes = self._conditions.get((rollout, condition_key))
        if codes is None:
            codes = self._conditions[(rollout, condition_key)] = _Codes()
        code = _CODE[end]
        old = codes.get(replicate)
        if old:
            self._counts[old] -= 1
        else:
            self._total += 1
        self._counts[code] += 1
        codes.put(replicate, code)

    def __len__(self) -> int:
        return self._total

    def count(self, end: str) -> int:
        return self._counts[_CODE[end]]

    def get(self, rollout: str, condition_key: str, replicate: int) -> str | None:
        codes = self._conditions.get((rollout, condition_key))
        code = 0 if codes is None else codes.get(replicate)
        return ENDINGS[code - 1] if code else None

    def keys(self) -> set[tuple[str, str, int]]:
        """Every identity held (built on demand: a set of tuples is big)."""
        return {(rid, key, r) for (rid, key), codes in self._conditions.items()
                for r in codes.indices()}

    def by_rollout(self) -> dict[str, int]:
        """How many episodes each rollout holds (a pass over its conditions, not episodes)."""
        found: dict[str, int] = {}
        for (rollout, _), codes in self._conditions.items():
            found[rollout] = found.get(rollout, 0) + codes.size()
        return found

    def in_condition(self, rollout: str, condition_key: str) -> int:
        """How many episodes the condition holds."""
        codes = self._conditions.get((rollout, condition_key))
        return 0 if codes is None else codes.size()

    def held(self, rollout: str, condition_key: str, replicates: int | Iterable[int]) -> int:
        """How many of ``replicates`` (a count n: 0 .. n-1) this condition holds."""
        codes = self._conditions.get((rollout, condition_key))
        if codes is None:
            return 0
        if isinstance(replicates, int):
            return codes.present_below(replicates)
        return codes.present(replicates)


@final
class ReplicateSet:
    """A set of replicate numbers, a byte each (see the module's note)."""

    __slots__ = ("_codes", "_size")

    def __init__(self, items: Iterable[int] = ()) -> None:
        self._codes = _Codes()
        self._size = 0
        self.update(items)

    def add(self, index: int) -> None:
        if not self._codes.get(index):
            self._size += 1
            self._codes.put(index, 1)

    def update(self, items: Iterable[int]) -> None:
        values = list(map(int, items))
        codes = self._codes
        array = codes.array
        if values and _all_dense(values, len(array)):
            # Each number would go in the array, taken one by one (the array as long as
            # the largest number before it): so mark them all at once, in C.  A plan of
            # 100,000 replicates went through add() one by one, a few tenths of a second
            # at the end of every session.
            top = max(values)
            if top >= len(array):
                codes.grow(top + 1)
            zeros = array.count(0)
            deque(map(array.__setitem__, values, repeat(1)), maxlen=0)
            self._size += zeros - array.count(0)
            return
        add = self.add
        for index in values:
            if 0 <= index < len(array):
                if not array[index]:
                    array[index] = 1
                    self._size += 1
            else:
                add(index)

    def __contains__(self, index: object) -> bool:
        return isinstance(index, int) and bool(self._codes.get(index))

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[int]:
        return self._codes.indices()

    def missing_below(self, stop: int) -> list[int]:
        """The numbers of 0 .. stop-1 not in the set, in order."""
        array = self._codes.array
        head = min(stop, len(array))
        found = [i for i in range(head) if not array[i]] if array.count(0, 0, head) else []
        found.extend(i for i in range(head, stop) if not self._codes.get(i))
        return found
