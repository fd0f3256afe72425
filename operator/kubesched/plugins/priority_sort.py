"""PrioritySort: the default QueueSort. Higher ``spec.priority`` first; among equals, the
pod queued earlier (FIFO), then arrival order."""

from __future__ import annotations

from kubesched.framework.interface import Handle, QueueSortPlugin
from kubesched.framework.nodeinfo import QueuedPodInfo
from kubesched.framework.registry import NoArgs

__all__ = ["NAME", "PrioritySort", "new"]

NAME = "PrioritySort"


class PrioritySort(QueueSortPlugin):
    name = NAME

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        pa, pb = a.pod.priority, b.pod.priority
        if pa != pb:
            return pa > pb
        if a.timestamp != b.timestamp:
            return a.timestamp < b.timestamp
        return a.seq < b.seq

    def sort_key(self, qpi: QueuedPodInfo) -> tuple[int, float, int]:
        return (-qpi.pod.priority, qpi.timestamp, qpi.seq)


def new(args: NoArgs, handle: Handle) -> PrioritySort:
    return PrioritySort()
