"""PodHeap: the heap under activeQ and backoffQ.

A binary heap (heapq) of queued pods with a uid index: membership, lookup and removal
are O(1); removal is lazy (a removed pod's entry stays in the heap, dead, until it
surfaces or the heap is compacted). Entries are ``(key, seq, qpi)`` tuples when a key
orders the pods, which keeps comparisons in C; with only a ``less`` function they are
wrappers whose ``__lt__`` calls it. ``seq`` grows with every push, so pods that compare
equal come out first-in first-out.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from typing import Any

from kubesched.framework.nodeinfo import QueuedPodInfo

__all__ = ["PodHeap"]

LessFn = Callable[[QueuedPodInfo, QueuedPodInfo], bool]


class _LessEntry:
    __slots__ = ("less", "qpi", "seq")

    def __init__(self, qpi: QueuedPodInfo, seq: int, less: LessFn) -> None:
        self.qpi = qpi
        self.seq = seq
        self.less = less

    def __lt__(self, other: _LessEntry) -> bool:
        if self.less(self.qpi, other.qpi):
            return True
        if self.less(other.qpi, self.qpi):
            return False
        return self.seq < other.seq


class PodHeap:
    """Pods ordered by a key given at push (``less is None``) or by ``less``."""

    __slots__ = ("_heap", "_less", "_live", "_seq")

    def __init__(self, less: LessFn | None = None) -> None:
        self._less = less
        self._heap: list[Any] = []
        self._live: dict[str, tuple[int, QueuedPodInfo]] = {}
        self._seq = 0

    def __len__(self) -> int:
        return len(self._live)

    def __bool__(self) -> bool:
        return bool(self._live)

    def __contains__(self, uid: str) -> bool:
        return uid in self._live

    def get(self, uid: str) -> QueuedPodInfo | None:
        e = self._live.get(uid)
        return None if e is None else e[1]

    def values(self) -> Iterator[QueuedPodInfo]:
        return (qpi for _, qpi in self._live.values())

    def push(self, qpi: QueuedPodInfo, key: Any = None) -> None:
        """Add (or re-add, replacing) a pod; ``key`` is ignored when ordering by less."""
        self._seq += 1
        seq = self._seq
        self._live[qpi.pod.uid] = (seq, qpi)
        if self._less is None:
            heapq.heappush(self._heap, (key, seq, qpi))
        else:
            heapq.heappush(self._heap, _LessEntry(qpi, seq, self._less))

    def remove(self, uid: str) -> QueuedPodInfo | None:
        e = self._live.pop(uid, None)
        if e is None:
            return None
        if len(self._heap) > 2 * len(self._live) + 64:
            self._compact()
        return e[1]

    def pop(self) -> QueuedPodInfo | None:
        """Remove and return the first pod; None when empty."""
        self._skip_dead()
        if not self._heap:
            return None
        e = heapq.heappop(self._heap)
        qpi: QueuedPodInfo = e[2] if self._less is None else e.qpi
        del self._live[qpi.pod.uid]
        return qpi

    def peek_key(self) -> Any:
        """The key of the first pod (keyed heaps only); None when empty."""
        self._skip_dead()
        return self._heap[0][0] if self._heap else None

    def _entry(self, e: Any) -> tuple[int, QueuedPodInfo]:
        return (e[1], e[2]) if self._less is None else (e.seq, e.qpi)

    def _is_live(self, e: Any) -> bool:
        seq, qpi = self._entry(e)
        live = self._live.get(qpi.pod.uid)
        return live is not None and live[0] == seq

    def _skip_dead(self) -> None:
        heap = self._heap
        while heap and not self._is_live(heap[0]):
            heapq.heappop(heap)

    def _compact(self) -> None:
        self._heap = [e for e in self._heap if self._is_live(e)]
        heapq.heapify(self._heap)
