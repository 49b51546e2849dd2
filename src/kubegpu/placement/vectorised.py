"""numpy-backed partition tables for nodes too large for plain Python tables (13-16 GPUs).

Owns filling the ``2^n``-entry tables of :mod:`kubegpu.placement.partition`
with vectorised operations (all masks of one popcount at once) and scanning
large candidate lists in one pass. Same interface and same answers as the
plain :class:`~kubegpu.placement.subsets.Tables`; only imported when a node
needs it, so processes placing on ordinary nodes never load numpy. Must not do
I/O, read clocks or start threads.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from kubegpu.placement import subsets
from kubegpu.placement import weights as weights_

Array = npt.NDArray[Any]

# Candidate counts up to this are scanned in plain Python, where numpy's per-call overhead would dominate.
_SMALL = 48
# Elements of one temporary 2-D block; small blocks stay in cache.
_CHUNK = 1 << 16


@functools.cache
def _popcounts(n: int) -> Array:
    counts = np.zeros(1 << n, dtype=np.int32)
    masks = np.arange(1 << n, dtype=np.int32)
    for bit in range(n):
        counts += (masks >> bit) & 1
    return counts


@functools.cache
def _layer(n: int, popcount: int) -> tuple[Array, Array]:
    """Masks of ``n`` bits with ``popcount`` bits set, and per mask the values of its bits, ascending."""
    masks = np.flatnonzero(_popcounts(n) == popcount).astype(np.int32)
    present = ((masks[:, None] >> np.arange(n, dtype=np.int32)) & 1).astype(bool)
    # A stable sort of "absent" puts each row's set bits first, in ascending order.
    positions = np.argsort(~present, axis=1, kind="stable")[:, :popcount].astype(np.int32)
    return masks, np.left_shift(np.int32(1), positions)


@functools.cache
def _combos(m: int, k: int) -> Array:
    """All ``k``-combinations of ``range(m)`` in lexicographic order, one per row."""
    if k == 0:
        return np.zeros((1, 0), dtype=np.intp)
    return np.array(list(itertools.combinations(range(m), k)), dtype=np.intp).reshape(-1, k)


@functools.cache
def _reversed_bits(n: int) -> Array:
    """``rev[mask]``: larger means lexicographically earlier (its lowest differing GPU is in it)."""
    masks = np.arange(1 << n, dtype=np.int32)
    rev = np.zeros(1 << n, dtype=np.int32)
    for bit in range(n):
        rev |= ((masks >> bit) & 1) << (n - 1 - bit)
    return rev


def _subsets(low: int, pool: Sequence[int], k: int) -> Array:
    """Masks ``low | c`` for every ``(k-1)``-combination ``c`` of the bit values in ``pool``, lexicographic."""
    if k == 1:
        return np.full(1, low, dtype=np.int64)
    sums: Array = np.asarray(pool, dtype=np.int64)[_combos(len(pool), k - 1)].sum(axis=1)
    return sums + low


class VectorTables(subsets.Tables):
    """:class:`~kubegpu.placement.subsets.Tables` held in numpy arrays and filled a popcount at a time."""

    def __init__(self, w: weights_.Matrix) -> None:
        # Every score is at most the sum of all pair weights; int32 halves the memory traffic when it fits.
        self.dtype = np.int32 if sum(sum(row) for row in w) // 2 < 2**31 else np.int64
        super().__init__(w)

    def _set_scores(self, w: weights_.Matrix) -> Array:
        n = len(w)
        scores: Array = np.zeros(1 << n, dtype=self.dtype)
        for high in range(n):
            # Adding GPU ``high`` to any subset of the lower GPUs adds its weights to them.
            row: Array = np.zeros(1 << high, dtype=self.dtype)
            for low in range(high):
                row[1 << low : 2 << low] = row[: 1 << low] + w[high][low]
            scores[1 << high : 2 << high] = scores[: 1 << high] + row
        return scores

    @property
    def nbytes(self) -> int:
        return int(np.asarray(self.score).nbytes + sum(np.asarray(t).nbytes for t in self._best.values()))

    def _new_table(self) -> Array:
        return np.full(1 << self.n, -1, dtype=self.dtype)

    def _fill(self, size: int, residue: int) -> None:
        table = self._best[size]
        assert isinstance(table, np.ndarray)
        for count in range(residue, self.n + 1, size):
            masks, bits = _layer(self.n, count)
            if count == 0:
                table[0] = 0
            elif residue == 0:
                table[masks] = self._max_split(table, masks, bits, _combos(count - 1, size - 1) + 1, lowest=True)
            else:
                table[masks] = self._max_split(table, masks, bits, _combos(count, residue), lowest=False)

    def _max_split(self, table: Array, masks: Array, bits: Array, combos: Array, *, lowest: bool) -> Array:
        """Per mask, the best ``score(first) + table[mask - first]`` over first sets given as bit positions.

        ``combos`` rows are positions into each mask's ascending bits; with
        ``lowest`` the mask's lowest bit joins every first set.
        """
        best = np.empty(len(masks), dtype=self.dtype)
        columns = [combos[:, c] for c in range(combos.shape[1])]
        step = max(1, _CHUNK // len(combos))
        for start in range(0, len(masks), step):
            rows = slice(start, start + step)
            part = bits[rows]
            first = np.empty((len(part), len(combos)), dtype=part.dtype)
            if lowest:
                first[:] = part[:, :1]
                for column in columns:
                    first += part[:, column]
            else:
                np.take(part, columns[0], axis=1, out=first)
                for column in columns[1:]:
                    first += part[:, column]
            values = np.take(np.asarray(self.score), first)
            values += np.take(table, masks[rows, None] ^ first)
            best[rows] = values.max(axis=1)
        return best

    def first_opening(self, table: subsets.Lookup, cur: int, k: int) -> int | None:
        low = cur & -cur
        pool = subsets.bits(cur ^ low)
        if k - 1 > len(pool) or math.comb(len(pool), k - 1) <= _SMALL:
            return super().first_opening(table, cur, k)
        firsts = _subsets(low, pool, k)
        array = np.asarray(table)
        hit = (np.asarray(self.score)[firsts] + array[cur ^ firsts]) == array[cur]
        at = int(hit.argmax())
        return int(firsts[at]) if hit[at] else None

    def constrained_opening(self, table: subsets.Lookup, cur: int, need: int, size: int) -> int:
        array, scores, rev = np.asarray(table), np.asarray(self.score), _reversed_bits(self.n)
        low = cur & -cur
        # Every full set holding all must-include GPUs, and the best partition around each.
        free = np.asarray(subsets.bits(cur & ~need), dtype=np.int64)
        holders = need + free[_combos(len(free), size - need.bit_count())].sum(axis=1)
        values = scores[holders] + array[cur ^ holders]
        optimum = int(values.max())
        optimal = holders[values == optimum]
        pick: int | None = None
        with_low = optimal[(optimal & low) != 0]
        if len(with_low):
            pick = int(with_low[int(rev[with_low].argmax())])
        rest = optimal[(optimal & low) == 0]
        if len(rest) and not low & need:
            goal = optimum - scores[rest]
            pool = subsets.bits(cur & ~need & ~low)
            for k in subsets.sizes(cur.bit_count(), size):
                if k - 1 > len(pool) or k + size > cur.bit_count():  # S and T must both fit
                    continue
                firsts = _subsets(low, pool, k)
                if pick is not None:  # only sets before the best one found so far can still win
                    firsts = firsts[rev[firsts] > rev[pick]]
                step = max(1, _CHUNK // len(rest))
                for start in range(0, len(firsts), step):
                    block = firsts[start : start + step, None]
                    ok = ((block & rest) == 0) & (scores[block] + array[(cur ^ rest) ^ block] == goal)
                    hit = ok.any(axis=1)
                    if hit.any():
                        pick = int(block[int(hit.argmax()), 0])
                        break
        if pick is None:
            raise AssertionError(f"partition table inconsistent at mask {cur:#x}")
        return pick
