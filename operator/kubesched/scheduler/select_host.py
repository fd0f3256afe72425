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
best-scored node, else from the right one. :func:`heap_winner` walks that path in
O(ties x depth) instead of building the heap.

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
    # Positions of the best-scored nodes and all their ancestors in the implicit heap.
    marked: set[int] = set()
    for p in ties.tolist():
        while p not in marked:
            marked.add(p)
            if p == 0:
                break
            p = (p - 1) // 2
    is_best = set(ties.tolist())
    i = 0
    while i not in is_best:
        left = 2 * i + 1
        i = left if left in marked else left + 1
    return i
