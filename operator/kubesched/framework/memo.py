"""Bounded memos: a dict of results keyed by what they were computed from, emptied when
it reaches its limit.

Several parsers and plugins remember what they computed per distinct input (a pod's
request figures, a compiled node affinity, a rejection Status). Most clusters have a
handful of distinct inputs, but the keys are open-ended (extended resource names,
user-written selectors), so each memo has a limit; at the limit it starts over rather
than keep an eviction order on every hit.
"""

from __future__ import annotations

from typing import TypeVar

__all__ = ["remember"]

K = TypeVar("K")
V = TypeVar("V")


def remember(memo: dict[K, V], key: K, value: V, limit: int) -> V:
    """Store ``value`` under ``key`` in ``memo`` (emptied first if it holds ``limit``
    entries) and return it."""
    if len(memo) >= limit:
        memo.clear()
    memo[key] = value
    return value
