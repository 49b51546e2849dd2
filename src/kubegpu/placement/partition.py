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
from collections.abc import Sequence

from kubegpu.placement import errors, subsets
from kubegpu.placement import weights as weights_

#: Largest node the tables are built for (2^16 entries per table).
MAX_GPUS = 16
#: Largest node served by plain Python tables; above it numpy fills and scans them.
PLAIN_GPUS = 12


@functools.lru_cache(maxsize=64)
def tables(w: weights_.Matrix, vectorised: bool | None = None) -> subsets.Tables:
    """The (cached) tables of one weight matrix; numpy-backed above :data:`PLAIN_GPUS` GPUs unless told."""
    if vectorised is None:
        vectorised = len(w) > PLAIN_GPUS
    if vectorised:
        from kubegpu.placement import vectorised as vectorised_  # numpy only where it pays

        return vectorised_.VectorTables(w)
    return subsets.Tables(w)


# --- one request ---------------------------------------------------------------------------


def _indices(mask: int) -> tuple[int, ...]:
    return tuple(b.bit_length() - 1 for b in subsets.bits(mask))


def _greedy(t: subsets.Tables, table: subsets.Lookup, cur: int, size: int) -> list[int]:
    """The lexicographically first optimal partition of ``cur`` (no must-include constraint)."""
    parts = []
    while cur:
        pick: int | None = None
        for k in subsets.sizes(cur.bit_count(), size):
            first = t.first_opening(table, cur, k)
            if first is not None and (pick is None or subsets.before(first, pick)):
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
) -> subsets.Solution:
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
        return subsets.Solution((gpu,), ((gpu,),), 0)
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
    return subsets.Solution(_indices(chosen), tuple(_indices(p) for p in parts), total)


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
