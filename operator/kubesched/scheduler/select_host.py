"""Which of the scored nodes a pod goes to: kube-scheduler 1.37's rule.

kube-scheduler 1.37 (``schedule_one.go`` ``schedulePod``) no longer samples among the
best-scored nodes at random (1.34's reservoir sampling). It builds a max-heap of the
feasible nodes, in the order Filter found them, with Go's ``container/heap.Init``, and
pops its root. A node's ``Randomizer`` breaks ties only when scheduler extenders scored
the nodes, and kubesched has no extenders, so every tie-breaker is 0: the winner among
equally scored nodes is whichever ``heap.Init`` leaves at the root, a function of the
feasible order alone.

``heap.Init`` sifts down from the last parent to the root, swapping a parent with its
larger child (the left one when both are equal) only while the child is *strictly*
greater. So, walking from the root: a node holding the best score stays at the root of
its subtree, and otherwise the root comes from the left subtree when that subtree holds a
best-scored node, else from the right one. That walk ends at the best-scored node that
comes first in pre-order (a node, then its left subtree, then its right one), and a
heap position's pre-order rank is its path from the root read as bits (left 0, right
1), a prefix before its extensions: :func:`heap_winner` compares those paths for the
best-scored nodes only, with numpy, instead of building the heap.

kube-scheduler filters nodes in parallel, so its feasible order is the rotating scan
order only up to which goroutine finished first; kubesched filters in scan order, which
is the order kube-scheduler sees when its workers finish in index order
(docs/differences.md).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["heap_winner"]


def heap_winner(total: npt.NDArray[np.int64] | npt.NDArray[np.float64]) -> int:
    """The position in ``total`` (scores in feasible order) of the node kube-scheduler
    1.37 picks: the root of a Go max-heap built over ``total`` with ties left in place."""
    n = len(total)
    if n == 0:
        raise ValueError("no scored nodes")
    best = total.max()
    ties = np.flatnonzero(total == best)
    if len(ties) == 1 or ties[0] == 0:
        return int(ties[0])
    return int(ties[np.argmin(_preorder_keys(n)[ties])])


_KEYS: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)


def _preorder_keys(n: int) -> npt.NDArray[np.int64]:
    """Heap position -> a key that orders positions as a pre-order walk meets them, for
    at least ``n`` positions (made once per power of two and kept: a relative order that
    does not depend on the heap's size)."""
    global _KEYS
    if len(_KEYS) >= n:
        return _KEYS
    size = max(1024, 1 << (n - 1).bit_length())
    # heap position p has path bits = (p + 1) without its leading 1, at depth d
    v = np.arange(1, size + 1, dtype=np.int64)
    depth = np.frexp(v.astype(np.float64))[1].astype(np.int64) - 1  # exact below 2**53
    deepest = int(depth[-1])
    path = (v - (np.int64(1) << depth)) << (deepest - depth)  # left-aligned path bits
    # smallest path first; a prefix (same left-aligned bits, shallower) before its extensions
    _KEYS = path * (deepest + 1) + depth
    return _KEYS
