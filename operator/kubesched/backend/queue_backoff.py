"""backoffQ: the pods of one profile's queue that wait out their backoff, in two heaps as
kube-scheduler 1.37 keeps them.

- **rejected**: pods that plugins rejected, and that an event since (or during their
  attempt) may have helped. With SchedulerPopFromBackoffQ (kube-scheduler's feature gate,
  beta and on since 1.33; KEP-5142) the queue pops the head of this heap when activeQ is
  empty, backoff or not: a scheduler with nothing else to do need not wait. So that the
  head is the right pod, the heap is ordered by backoff expiry, counted in whole
  *windows* of :data:`WINDOW` seconds, and within a window as activeQ orders pods.
- **errors**: pods whose attempt ended in an error (no plugin rejected them). They wait
  their whole backoff, ordered by expiry only, and are never popped early.

A pod is in at most one of the two. Expiries are the queue's (see
:meth:`~kubesched.backend.queue.SchedulingQueue.backoff_expiry`); this module only keeps
the heaps.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

from kubesched.backend.queue_heap import LessFn, PodHeap
from kubesched.framework.nodeinfo import QueuedPodInfo

__all__ = ["WINDOW", "BackoffQueue", "align", "backoff_duration", "backoff_expiry", "errored"]

WINDOW = 1.0
"""kube-scheduler's backoffQ ordering window (``backoffQOrderingWindowDuration``): with
SchedulerPopFromBackoffQ, expiries are rounded down to a multiple of it, and backoffQ is
flushed to activeQ at each multiple, whole windows at a time."""


def align(t: float) -> float:
    """``t`` rounded down to a whole :data:`WINDOW`."""
    return math.floor(t / WINDOW) * WINDOW


def backoff_duration(qpi: QueuedPodInfo, initial: float, cap: float) -> float:
    """kube-scheduler 1.37's backoff of a pod that failed: ``initial`` doubling with the
    failures in a row that were errors, if the last one was, else with the rejections,
    up to ``cap``; none yet, no backoff. The cap of a gang that failed as a whole
    (``group_size`` pods) is ``cap`` times the square root of its size, as
    kube-scheduler's for a pod group."""
    count = qpi.consecutive_errors or qpi.unschedulable_count
    if count == 0:
        return 0.0
    if qpi.group_size > 1:
        cap *= math.sqrt(qpi.group_size)
    return float(min(initial * 2 ** min(count - 1, 62), cap))


def backoff_expiry(qpi: QueuedPodInfo, initial: float, cap: float, windows: bool) -> float:
    """When the pod's backoff ends: its last failure plus :func:`backoff_duration`, with
    ``windows`` (SchedulerPopFromBackoffQ) rounded down to a whole :data:`WINDOW`
    (kube-scheduler's ``BackoffExpiration``); -inf when it has none (no failure counted
    yet, or a ``cap`` of 0, which turns backoff off as in kube-scheduler)."""
    if cap <= 0 or not (qpi.consecutive_errors or qpi.unschedulable_count):
        return -math.inf
    expiry = qpi.last_failure + backoff_duration(qpi, initial, cap)
    return align(expiry) if windows else expiry


class _ByLess:
    """An activeQ position for a QueueSort that has only ``less``: equal when neither
    pod goes first, so that the heap's arrival order breaks the tie."""

    __slots__ = ("less", "qpi")

    def __init__(self, qpi: QueuedPodInfo, less: LessFn) -> None:
        self.qpi = qpi
        self.less = less

    def __lt__(self, other: _ByLess) -> bool:
        return self.less(self.qpi, other.qpi)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _ByLess):
            return NotImplemented
        return not self.less(self.qpi, other.qpi) and not self.less(other.qpi, self.qpi)

    __hash__ = None  # type: ignore[assignment]


def errored(qpi: QueuedPodInfo) -> bool:
    """The pod's last attempt ended in an error: no plugin rejected it or left it pending."""
    return not qpi.unschedulable_plugins and not qpi.pending_plugins


class BackoffQueue:
    """The two heaps (see the module doc). ``active_order`` is activeQ's key for a pod
    (``sort_key``) or, with ``less`` instead, its ``less``; neither: pods of one window
    come out in the order they went in."""

    __slots__ = ("_errors", "_order", "_rejected")

    def __init__(
        self,
        *,
        sort_key: Callable[[QueuedPodInfo], Any] | None = None,
        less: LessFn | None = None,
    ) -> None:
        self._rejected = PodHeap()
        self._errors = PodHeap()
        self._order: Callable[[QueuedPodInfo], Any] | None = sort_key
        if sort_key is None and less is not None:
            self._order = lambda qpi: _ByLess(qpi, less)

    def __len__(self) -> int:
        return len(self._rejected) + len(self._errors)

    def __bool__(self) -> bool:
        return bool(self._rejected) or bool(self._errors)

    def get(self, uid: str) -> QueuedPodInfo | None:
        return self._rejected.get(uid) or self._errors.get(uid)

    def values(self) -> Iterator[QueuedPodInfo]:
        yield from self._rejected.values()
        yield from self._errors.values()

    def push(self, qpi: QueuedPodInfo, expiry: float, *, ordered: bool) -> None:
        """Add (or move) a pod that backs off until ``expiry``; ``ordered``: within one
        expiry, rejected pods in activeQ's order (else in the order they came)."""
        uid = qpi.pod.uid
        if errored(qpi):
            self._rejected.remove(uid)
            self._errors.push(qpi, (expiry, 0))
            return
        self._errors.remove(uid)
        order = self._order
        self._rejected.push(qpi, (expiry, order(qpi) if ordered and order is not None else 0))

    def remove(self, uid: str) -> QueuedPodInfo | None:
        return self._rejected.remove(uid) or self._errors.remove(uid)

    def has_rejected(self) -> bool:
        """A rejected pod is backing off (the one :meth:`pop_rejected` would give)."""
        return bool(self._rejected)

    def pop_rejected(self) -> QueuedPodInfo | None:
        """The head of the rejected pods' heap, its backoff over or not; None: empty."""
        return self._rejected.pop()

    def earliest(self) -> float | None:
        """The earliest expiry in either heap; None when both are empty."""
        heads = [k[0] for h in (self._rejected, self._errors) if (k := h.peek_key()) is not None]
        return min(heads) if heads else None

    def pop_expired(self, done: Callable[[float], bool]) -> list[QueuedPodInfo]:
        """Take, from both heaps, the pods whose expiry ``done`` says is past: the
        rejected ones first, each heap in its order."""
        out: list[QueuedPodInfo] = []
        for heap in (self._rejected, self._errors):
            while (key := heap.peek_key()) is not None and done(key[0]):
                qpi = heap.pop()
                assert qpi is not None
                out.append(qpi)
        return out
