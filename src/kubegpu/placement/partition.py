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
  it is tabulated once per weight matrix and size over all ``2^n`` masks and
  cached; a request then costs a handful of table lookups per step. A mask's
  popcount modulo ``size`` says whether the padded set is still to come, so
  one table per size serves every available list.
* Lexicographic order between two sets (also between a full and a padded one,
  padding sorting after every GPU) is decided by the lowest GPU in which they
  differ: the set holding it comes first.
* Must-include GPUs (kubelet's init-container reuse) must sit together in one
  full set ``T``. The optimum is ``max_T score(T) + best(rest)``; a first set
  ``S`` avoiding them is admissible iff it opens an optimal partition of
  ``cur - T`` for some optimal ``T``.

Nodes of up to :data:`PLAIN_GPUS` GPUs use plain Python tables (a few
thousand entries); larger ones use :mod:`kubegpu.placement.vectorised`, which
imports numpy, so a plugin on an ordinary node never loads it.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kubegpu.placement import errors
from kubegpu.placement import weights as weights_

#: Largest node the tables are built for (2^16 entries per table).
MAX_GPUS = 16
#: Largest node served by plain Python tables; above it numpy fills and scans them.
PLAIN_GPUS = 12


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


@functools.lru_cache(maxsize=64)
def tables(w: weights_.Matrix, vectorised: bool | None = None) -> Tables:
    """The (cached) tables of one weight matrix; numpy-backed above :data:`PLAIN_GPUS` GPUs unless told."""
    if vectorised is None:
        vectorised = len(w) > PLAIN_GPUS
    if vectorised:
        from kubegpu.placement import vectorised as vectorised_  # numpy only where it pays

        return vectorised_.VectorTables(w)
    return Tables(w)


# --- one request ---------------------------------------------------------------------------


def _indices(mask: int) -> tuple[int, ...]:
    return tuple(b.bit_length() - 1 for b in bits(mask))


def _greedy(t: Tables, table: Lookup, cur: int, size: int) -> list[int]:
    """The lexicographically first optimal partition of ``cur`` (no must-include constraint)."""
    parts = []
    while cur:
        pick: int | None = None
        for k in sizes(cur.bit_count(), size):
            first = t.first_opening(table, cur, k)
            if first is not None and (pick is None or before(first, pick)):
                pick = first
        if pick is None:  # cannot happen for a consistent table; guards against silent wrong answers
            raise AssertionError(f"partition table inconsistent at mask {cur:#x}")
        parts.append(pick)
        cur ^= pick
    return parts


def solve(
    w: weights_.Matrix,
    available: Sequence[int],
    must_include: Sequence[int],
    size: int,
    *,
    vectorised: bool | None = None,
) -> Solution:
    """go-gpuallocator's best-effort answer under pair weights ``w``, exactly, in milliseconds.

    Parameters:
        w: symmetric pair weights, one row per GPU of the node (at most :data:`MAX_GPUS`).
        available: GPU indices that may be chosen; order does not matter.
        must_include: GPU indices that must be in the answer (a subset of ``available``).
        size: how many GPUs to choose.
        vectorised: force the numpy (True) or plain (False) tables; default by node size.

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
    t = tables(w, vectorised)
    table = t.best(size, avail.bit_count() % size)
    parts: list[int] = []
    cur = avail
    while need and not any(p & need for p in parts):
        parts.append(t.constrained_opening(table, cur, need, size))
        cur ^= parts[-1]
    parts += _greedy(t, table, cur, size)
    score = t.score
    if need:
        chosen = next(p for p in parts if p & need)
    else:
        full = [p for p in parts if p.bit_count() == size]
        top = max(int(score[p]) for p in full)
        chosen = next(p for p in full if score[p] == top)
    total = sum(int(score[p]) for p in parts)
    return Solution(_indices(chosen), tuple(_indices(p) for p in parts), total)


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
