"""The per-weight-matrix partition tables over GPU subsets (bit masks), in plain Python.

Owns :class:`Tables` — for one weight matrix and one set size, the best score of
every mask of GPUs, filled lazily per size — and the mask helpers the solver and
the numpy tables share (:func:`bits`, :func:`sizes`, :func:`before`). How a request
walks the tables, and which implementation a node gets, is
:mod:`kubegpu.placement.partition`'s; :mod:`kubegpu.placement.vectorised` fills the
same tables with numpy. Pure: no I/O, clocks or threads.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kubegpu.placement import weights as weights_


class Lookup(Protocol):
    """A table indexed by mask: a list here, a numpy array in :mod:`kubegpu.placement.vectorised`."""

    def __getitem__(self, mask: int, /) -> Any: ...

    def __len__(self) -> int: ...


@dataclass(frozen=True)
class Solution:
    """The answer and the partition it came from.

    ``chosen`` is sorted; ``partition`` lists the sets in upstream's order (by
    lowest GPU), the padded set holding only its real GPUs; ``score`` is the
    partition's total under the weights used.
    """

    chosen: tuple[int, ...]
    partition: tuple[tuple[int, ...], ...]
    score: int


def before(a: int, b: int) -> bool:
    """True when set ``a`` comes before set ``b`` in upstream's lexicographic order."""
    diff = a ^ b
    return bool(diff & -diff & a)


def bits(mask: int) -> list[int]:
    """The single-bit masks of ``mask``, lowest first."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low)
        mask ^= low
    return out


def sizes(count: int, size: int) -> list[int]:
    """Sizes the set holding the lowest GPU may have when ``count`` GPUs remain."""
    due = count % size  # the padded set is still to come iff the count is off a multiple
    return ([size] if count >= size else []) + ([due] if due else [])


@functools.cache
def _masks_by_popcount(n: int) -> list[list[int]]:
    layers: list[list[int]] = [[] for _ in range(n + 1)]
    for mask in range(1 << n):
        layers[mask.bit_count()].append(mask)
    return layers


class Tables:
    """Set scores and per-size partition optima for one weight matrix, as plain lists, filled lazily.

    ``score[mask]`` is the set score of ``mask``; ``best(size, residue)[mask]``
    the best partition total of ``mask``. The scanning methods are what a
    request needs; :class:`kubegpu.placement.vectorised.VectorTables` does the
    same with numpy for large nodes.
    """

    def __init__(self, w: weights_.Matrix) -> None:
        self.n = len(w)
        self.score: Lookup = self._set_scores(w)
        self._best: dict[int, Lookup] = {}
        self._filled: dict[int, set[int]] = {}

    def _set_scores(self, w: weights_.Matrix) -> Lookup:
        scores = [0]
        for high in range(len(w)):
            # Adding GPU ``high`` to any subset of the lower GPUs adds its weights to them.
            row = [0]
            for low in range(high):
                row += [x + w[high][low] for x in row]
            scores += [s + r for s, r in zip(scores, row, strict=True)]
        return scores

    def best(self, size: int, residue: int) -> Lookup:
        """The table of partition optima for ``size``, filled for popcounts ≡ 0 and ≡ ``residue``."""
        if size not in self._best:
            self._best[size] = self._new_table()
            self._filled[size] = set()
        filled = self._filled[size]
        for r in (0, residue) if residue else (0,):
            if r not in filled:
                self._fill(size, r)
                filled.add(r)
        return self._best[size]

    def prepare(self, sizes: Sequence[int] | None = None) -> None:
        """Fill every table the given sizes (default: all) can need, so later requests only look up."""
        for size in range(2, self.n + 1) if sizes is None else sizes:
            if 2 <= size <= self.n:
                for residue in range(1, size):
                    self.best(size, residue)

    @property
    def nbytes(self) -> int:
        """Approximate bytes held by the tables."""
        return 8 * (len(self.score) + sum(len(t) for t in self._best.values()))

    def _new_table(self) -> Lookup:
        return [-1] * (1 << self.n)

    def _fill(self, size: int, residue: int) -> None:
        """Optimum of every mask whose popcount ≡ ``residue`` (mod ``size``); residue 0 must be filled first.

        Residue 0: the set holding the mask's lowest GPU is any full set around
        it, the rest is again residue 0. Otherwise the padded set may be any
        ``residue`` GPUs of the mask and the rest is residue 0, so no order is needed.
        """
        table = self._best[size]
        assert isinstance(table, list)
        score = self.score
        for count in range(residue, self.n + 1, size):
            for mask in _masks_by_popcount(self.n)[count]:
                if count == 0:
                    table[0] = 0
                    continue
                if residue == 0:
                    low = mask & -mask
                    firsts = (low + sum(c) for c in itertools.combinations(bits(mask ^ low), size - 1))
                else:
                    firsts = (sum(c) for c in itertools.combinations(bits(mask), residue))
                table[mask] = max(score[f] + table[mask ^ f] for f in firsts)

    def first_opening(self, table: Lookup, cur: int, k: int) -> int | None:
        """The lexicographically first set of ``k`` holding ``cur``'s lowest GPU that opens an optimal partition."""
        low = cur & -cur
        pool = bits(cur ^ low)
        if k - 1 > len(pool):
            return None
        target, score = table[cur], self.score
        for combo in itertools.combinations(pool, k - 1):
            first = low + sum(combo)
            if score[first] + table[cur ^ first] == target:
                return first
        return None

    def constrained_opening(self, table: Lookup, cur: int, need: int, size: int) -> int:
        """The first set of the first optimal partition of ``cur`` that keeps ``need`` in one full set.

        It is either an optimal set ``T`` holding ``need`` and the lowest GPU,
        or a set ``S`` avoiding ``need`` that opens an optimal partition of
        ``cur - T`` for some optimal ``T``, whichever comes first.
        """
        low, score = cur & -cur, self.score
        holders = [need + sum(c) for c in itertools.combinations(bits(cur & ~need), size - need.bit_count())]
        values = [score[t] + table[cur ^ t] for t in holders]
        optimum = max(values)
        optimal = [t for t, v in zip(holders, values, strict=True) if v == optimum]
        pick: int | None = None
        for t in optimal:
            if t & low and (pick is None or before(t, pick)):
                pick = t
        rest = [t for t in optimal if not t & low]
        if rest and not low & need:
            pool = bits(cur & ~need & ~low)
            for k in sizes(cur.bit_count(), size):
                if k - 1 > len(pool) or k + size > cur.bit_count():  # S and T must both fit
                    continue
                for combo in itertools.combinations(pool, k - 1):
                    first = low + sum(combo)
                    if pick is not None and not before(first, pick):
                        break  # lexicographic order: every later candidate comes after the pick too
                    gain = score[first]
                    if any(not first & t and gain + table[cur ^ t ^ first] == optimum - score[t] for t in rest):
                        pick = first
                        break
        if pick is None:
            raise AssertionError(f"partition table inconsistent at mask {cur:#x}")
        return pick
