"""The slow, literal best-effort: every partition enumerated, as go-gpuallocator does it.

Owns a straightforward transcription of the algorithm described in
``reference/nvidia-device-plugin.md`` section f, kept as the oracle that the
fast solver in :mod:`kubegpu.placement.partition` is tested and benchmarked
against. It walks all partitions of the available list (about two million for
16 GPUs), so it must not be used to answer real requests; it must not do I/O.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from kubegpu.placement import weights as weights_

Group = tuple[int | None, ...]  # None is a padding slot


@dataclass(frozen=True)
class Outcome:
    """What the literal algorithm keeps: the first best partition and the set it returns.

    ``upstream_set`` is what go-gpuallocator returns, padding slots included
    (it can return a padded set when that set scores highest, which the
    upstream plugin then cannot use); ``chosen`` is our answer: the first
    highest-scoring *full* set of that partition, sorted.
    """

    partition: tuple[Group, ...]
    score: int
    upstream_set: Group
    chosen: tuple[int, ...]


def partitions(available: Sequence[int], size: int) -> Iterator[tuple[Group, ...]]:
    """Every partition go-gpuallocator considers, in its order (``available`` order matters)."""
    if size <= 0 or size > len(available):
        return
    if size == 1:
        for device in available:
            yield ((device,),)
        return
    padding = -len(available) % size
    items: list[int | None] = [*available, *([None] * padding)]

    def walk(rest: list[int | None], taken: tuple[Group, ...]) -> Iterator[tuple[Group, ...]]:
        if len(rest) == size:
            yield (*taken, tuple(rest))
            return
        head, tail = rest[0], rest[1:]
        for combo in itertools.combinations(range(len(tail)), size - 1):
            group = (head, *(tail[k] for k in combo))
            pads = group.count(None)
            if pads not in (0, padding):
                continue
            chosen = set(combo)
            # Padding slots are interchangeable: a group holding padding holds all of it.
            remaining = [x for k, x in enumerate(tail) if k not in chosen and not (pads and x is None)]
            yield from walk(remaining, (*taken, group))

    yield from walk(items, ())


def group_score(w: weights_.Matrix, group: Group) -> int:
    members = [g for g in group if g is not None]
    return sum(w[a][b] for k, a in enumerate(members) for b in members[k + 1 :])


def best_effort(w: weights_.Matrix, available: Sequence[int], required: Sequence[int], size: int) -> Outcome | None:
    """go-gpuallocator's best-effort over pair weights ``w``, literally; ``None`` where upstream returns ``[]``.

    ``available`` is used in the order given (upstream's tie-breaking depends on it).
    """
    if size <= 0 or len(available) < size or len(required) > size:
        return None
    need = set(required)
    best: tuple[Group, ...] | None = None
    best_score = 0
    for candidate in partitions(available, size):
        if not any(need <= set(g) and None not in g for g in candidate):
            continue
        score = sum(group_score(w, g) for g in candidate)
        if best is None or score > best_score:
            best, best_score = candidate, score
    if best is None:
        return None
    holders = [g for g in best if need <= set(g)]
    upstream = max(holders, key=lambda g: group_score(w, g))  # max() keeps the first of equals, like upstream
    full = [g for g in holders if None not in g]
    chosen = max(full, key=lambda g: group_score(w, g))
    return Outcome(best, best_score, upstream, tuple(sorted(g for g in chosen if g is not None)))
