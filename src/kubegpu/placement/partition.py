"""The exact, fast whole-node partition solver behind ``best-effort`` and ``topology``.

Owns the answer to go-gpuallocator's question — among all partitions of the
available GPUs into sets of ``size`` (one short "padded" set when the count
does not divide), which partition scores highest, and which of its sets to
return — without enumerating the partitions. It must return exactly the set
that upstream's enumeration returns (same objective, same tie-breaking when
``available`` is sorted), so :mod:`kubegpu.placement.reference` is its oracle.
Must not do I/O, read clocks or start threads; its only state is a cache of
per-weight-matrix tables, which memoises and never changes an answer.

How it stays exact and fast:

* Upstream walks partitions depth first: the set holding the lowest remaining
  GPU, in lexicographic order, then the rest recursively; it keeps the *first*
  partition with the highest score. That is the lexicographically first optimal
  partition, which a greedy walk recovers once the optimum of every remainder is
  known: at each step take the first candidate set ``S`` (holding the lowest
  remaining GPU) with ``score(S) + best(rest) == best(cur)``.
* ``best(mask)`` depends only on the mask and the size, not on the request, so
  it is tabulated once per weight matrix and size over all ``2^n`` masks
  (vectorised over masks of one popcount) and cached; a request then costs a
  handful of table lookups per step. A mask's popcount modulo ``size`` says
  whether the padded set is still to come, so one table per size serves every
  available list.
* Lexicographic order between two sets (also between a full and a padded one,
  padding sorting after every GPU) is decided by the lowest GPU in which they
  differ: the set holding it comes first.
* Must-include GPUs (kubelet's init-container reuse) must sit together in one
  full set ``T``. The optimum is ``max_T score(T) + best(rest)``; a first set
  ``S`` avoiding them is admissible iff it opens an optimal partition of
  ``cur - T`` for some optimal ``T``, which is checked for all optimal ``T`` at
  once.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from kubegpu.placement import errors
from kubegpu.placement import weights as weights_

#: Largest node the tables are built for (2^16 entries per table).
MAX_GPUS = 16

# Candidate counts up to this are scanned in plain Python, where numpy's per-call overhead would dominate.
_SMALL = 48
# Elements of one temporary 2-D block while filling tables; small blocks stay in cache.
_CHUNK = 1 << 16

Array = npt.NDArray[Any]


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


# --- combinatorics shared by every topology of one size --------------------------------------


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


def _before(a: int, b: int) -> bool:
    """True when set ``a`` comes before set ``b`` in upstream's lexicographic order."""
    diff = a ^ b
    return bool(diff & -diff & a)


def _subsets(low: int, pool: Sequence[int], k: int) -> Array:
    """Masks ``low | c`` for every ``(k-1)``-combination ``c`` of the bit values in ``pool``, lexicographic."""
    if k == 1:
        return np.full(1, low, dtype=np.int64)
    sums: Array = np.asarray(pool, dtype=np.int64)[_combos(len(pool), k - 1)].sum(axis=1)
    return sums + low


# --- per weight matrix ---------------------------------------------------------------------


class Tables:
    """Set scores and per-size partition optima for one weight matrix, filled lazily."""

    def __init__(self, w: weights_.Matrix) -> None:
        n = len(w)
        self.n = n
        # Every score is at most the sum of all pair weights; int32 halves the memory traffic when it fits.
        total = sum(sum(row) for row in w) // 2
        self.dtype = np.int32 if total < 2**31 else np.int64
        self.set_score = self._set_scores(w, self.dtype)
        self.set_score_list: list[int] = self.set_score.tolist()
        self._best: dict[int, Array] = {}
        self._best_list: dict[int, list[int]] = {}
        self._filled: dict[int, set[int]] = {}

    @staticmethod
    def _set_scores(w: weights_.Matrix, dtype: type[np.signedinteger[Any]]) -> Array:
        n = len(w)
        scores = np.zeros(1 << n, dtype=dtype)
        for high in range(n):
            # Adding GPU ``high`` to any subset of the lower GPUs adds its weights to them.
            row = np.zeros(1 << high, dtype=dtype)
            for low in range(high):
                row[1 << low : 2 << low] = row[: 1 << low] + w[high][low]
            scores[1 << high : 2 << high] = scores[: 1 << high] + row
        return scores

    def best(self, size: int, residue: int) -> tuple[Array, list[int]]:
        """The table of partition optima for ``size``, filled for popcounts ≡ 0 and ≡ ``residue``."""
        if size not in self._best:
            self._best[size] = np.full(1 << self.n, -1, dtype=self.dtype)
            self._filled[size] = set()
        filled = self._filled[size]
        for r in (0, residue) if residue else (0,):
            if r not in filled:
                self._fill(size, r)
                filled.add(r)
                self._best_list.pop(size, None)
        if size not in self._best_list:
            self._best_list[size] = self._best[size].tolist()
        return self._best[size], self._best_list[size]

    def prepare(self, sizes: Sequence[int] | None = None) -> None:
        """Fill every table the given sizes (default: all) can need, so later requests only look up."""
        for size in range(2, self.n + 1) if sizes is None else sizes:
            if 2 <= size <= self.n:
                for residue in range(1, size):
                    self.best(size, residue)

    def _fill(self, size: int, residue: int) -> None:
        """Optimum of every mask whose popcount ≡ ``residue`` (mod ``size``); residue 0 must be filled first.

        Residue 0: the set holding the mask's lowest GPU is any full set around
        it, the rest is again residue 0. Otherwise the padded set may be any
        ``residue`` GPUs of the mask and the rest is residue 0, so no order is needed.
        """
        table = self._best[size]
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
        step = max(1, _CHUNK // len(combos))  # small blocks stay in cache
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
            values = np.take(self.set_score, first)
            values += np.take(table, masks[rows, None] ^ first)
            best[rows] = values.max(axis=1)
        return best


@functools.lru_cache(maxsize=64)
def tables(w: weights_.Matrix) -> Tables:
    """The (cached) tables of one weight matrix."""
    return Tables(w)


# --- one request ---------------------------------------------------------------------------


def _bits(mask: int) -> list[int]:
    out = []
    while mask:
        low = mask & -mask
        out.append(low)
        mask ^= low
    return out


def _indices(mask: int) -> tuple[int, ...]:
    return tuple(b.bit_length() - 1 for b in _bits(mask))


def _first_opening(t: Tables, table: Array, best: list[int], cur: int, k: int) -> int | None:
    """The lexicographically first set of ``k`` holding ``cur``'s lowest GPU that opens an optimal partition."""
    low = cur & -cur
    pool = _bits(cur ^ low)
    if k - 1 > len(pool):
        return None
    target = best[cur]
    if math.comb(len(pool), k - 1) <= _SMALL:
        scores = t.set_score_list
        for combo in itertools.combinations(pool, k - 1):
            first = low + sum(combo)
            if scores[first] + best[cur ^ first] == target:
                return first
        return None
    firsts = _subsets(low, pool, k)
    hit = (t.set_score[firsts] + table[cur ^ firsts]) == target
    at = int(hit.argmax())
    return int(firsts[at]) if hit[at] else None


def _sizes(count: int, size: int) -> list[int]:
    """Sizes the set holding the lowest GPU may have when ``count`` GPUs remain."""
    due = count % size  # the padded set is still to come iff the count is off a multiple
    return ([size] if count >= size else []) + ([due] if due else [])


def _greedy(t: Tables, table: Array, best: list[int], cur: int, size: int) -> list[int]:
    """The lexicographically first optimal partition of ``cur`` (no must-include constraint)."""
    parts = []
    while cur:
        pick: int | None = None
        for k in _sizes(cur.bit_count(), size):
            first = _first_opening(t, table, best, cur, k)
            if first is not None and (pick is None or _before(first, pick)):
                pick = first
        if pick is None:  # cannot happen for a consistent table; guards against silent wrong answers
            raise AssertionError(f"partition table inconsistent at mask {cur:#x}")
        parts.append(pick)
        cur ^= pick
    return parts


def _constrained(t: Tables, table: Array, cur: int, need: int, size: int) -> tuple[list[int], int]:
    """Sets chosen while the must-include GPUs ``need`` wait for their set, ending with that set."""
    rev = _reversed_bits(t.n)
    scores = t.set_score
    parts: list[int] = []
    while True:
        low = cur & -cur
        # Every full set holding all must-include GPUs, and the best partition around each.
        free = np.asarray(_bits(cur & ~need), dtype=np.int64)
        holders = need + free[_combos(len(free), size - need.bit_count())].sum(axis=1)
        values = scores[holders] + table[cur ^ holders]
        optimum = int(values.max())
        optimal = holders[values == optimum]
        pick: int | None = None
        with_low = optimal[(optimal & low) != 0]
        if len(with_low):
            pick = int(with_low[int(rev[with_low].argmax())])
        rest = optimal[(optimal & low) == 0]
        if len(rest) and not low & need:
            # T must still fit after S: S opens an optimal partition of cur - T for some optimal T.
            goal = optimum - scores[rest]
            pool = _bits(cur & ~need & ~low)
            for k in _sizes(cur.bit_count(), size):
                if k - 1 > len(pool) or k + size > cur.bit_count():  # S and T must both fit
                    continue
                firsts = _subsets(low, pool, k)
                if pick is not None:  # only sets before the best one found so far can still win
                    firsts = firsts[rev[firsts] > rev[pick]]
                step = max(1, _CHUNK // len(rest))
                for start in range(0, len(firsts), step):
                    block = firsts[start : start + step, None]
                    ok = ((block & rest) == 0) & (scores[block] + table[(cur ^ rest) ^ block] == goal)
                    hit = ok.any(axis=1)
                    if hit.any():
                        first = int(block[int(hit.argmax()), 0])
                        if pick is None or _before(first, pick):
                            pick = first
                        break
        if pick is None:
            raise AssertionError(f"partition table inconsistent at mask {cur:#x}")
        parts.append(pick)
        cur ^= pick
        if pick & need:
            return parts, cur


def solve(w: weights_.Matrix, available: Sequence[int], must_include: Sequence[int], size: int) -> Solution:
    """go-gpuallocator's best-effort answer under pair weights ``w``, exactly, in milliseconds.

    Parameters:
        w: symmetric pair weights, one row per GPU of the node (at most :data:`MAX_GPUS`).
        available: GPU indices that may be chosen; order does not matter.
        must_include: GPU indices that must be in the answer (a subset of ``available``).
        size: how many GPUs to choose.

    Raises :class:`~kubegpu.placement.errors.PlacementError` naming the problem
    when the request cannot be answered.

    One deliberate difference from upstream: when upstream would return the
    padded set (fewer GPUs than asked, padded with nil — the plugin then fails),
    the first highest-scoring full set of the same partition is returned.
    """
    n = len(w)
    avail, need = check(n, available, must_include, size)
    if n > MAX_GPUS:
        raise errors.PlacementError(f"partition placement supports at most {MAX_GPUS} GPUs per node, this one has {n}")
    if size == 1:
        # Upstream's size-1 candidates are the single GPUs in order: the must-include one, else the lowest.
        gpu = need.bit_length() - 1 if need else (avail & -avail).bit_length() - 1
        return Solution((gpu,), ((gpu,),), 0)
    t = tables(w)
    table, best = t.best(size, avail.bit_count() % size)
    parts: list[int] = []
    cur = avail
    if need:
        parts, cur = _constrained(t, table, cur, need, size)
    parts += _greedy(t, table, best, cur, size)
    scores = t.set_score_list
    if need:
        chosen = next(p for p in parts if p & need)
    else:
        full = [p for p in parts if p.bit_count() == size]
        top = max(scores[p] for p in full)
        chosen = next(p for p in full if scores[p] == top)
    return Solution(_indices(chosen), tuple(_indices(p) for p in parts), sum(scores[p] for p in parts))


def check(n: int, available: Sequence[int], must_include: Sequence[int], size: int) -> tuple[int, int]:
    """Validate a whole-GPU request on an ``n``-GPU node; return the available and must-include masks."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise errors.PlacementError(f"size must be a positive number of GPUs, got {size!r}")
    avail = 0
    for gpu in available:
        _check_index(gpu, n, "available")
        if avail >> gpu & 1:
            raise errors.PlacementError(f"GPU {gpu} is listed twice in available")
        avail |= 1 << gpu
    need = 0
    for gpu in must_include:
        _check_index(gpu, n, "must-include")
        if need >> gpu & 1:
            raise errors.PlacementError(f"GPU {gpu} is listed twice in must-include")
        if not avail >> gpu & 1:
            raise errors.PlacementError(f"must-include GPU {gpu} is not in the available list")
        need |= 1 << gpu
    if need.bit_count() > size:
        raise errors.PlacementError(f"must-include lists {need.bit_count()} GPUs but the request is for {size}")
    if avail.bit_count() < size:
        raise errors.PlacementError(f"cannot pick {size} GPUs from {avail.bit_count()} available")
    return avail, need


def _check_index(gpu: object, n: int, where: str) -> None:
    if isinstance(gpu, bool) or not isinstance(gpu, int) or not 0 <= gpu < n:
        raise errors.PlacementError(f"{where} GPU {gpu!r} is not on this node (GPUs 0-{n - 1})")
