"""The pods a queue has handed out and not yet taken back, and the cluster events seen
meanwhile (kube-scheduler's in-flight pods and in-flight events).

A pod popped for a cycle is *in flight* until the scheduler reports it done or failed.
With queueing hints, a pod that fails is parked only if nothing seen while it was in
flight could have helped it, so the queue records every event (and every update of a
pod in flight) from the oldest flight's start on; events no flight can still be asked
about are dropped (:meth:`InFlightPods.prune`).
"""

from __future__ import annotations

from collections.abc import Iterator

from kubesched.framework.interface import ClusterEvent
from kubesched.framework.types import Pod

__all__ = ["InFlight", "InFlightPods", "SeenEvent"]

SeenEvent = tuple[ClusterEvent, object, object]
"""(event, old, new), as delivered to the queue."""


class InFlight:
    """What happened to a pod while it was being scheduled."""

    __slots__ = ("deleted", "latest", "replaced", "requeue", "start")

    def __init__(self, start: int, pod: Pod) -> None:
        self.start = start
        """Absolute index of the first event recorded after the pod was popped."""
        self.latest = pod
        """The pod's newest version known to the queue."""
        self.replaced = False
        """Updated while in flight: ``latest`` is what to requeue."""
        self.deleted = False
        self.requeue = False
        """Updated (relevantly) or activated meanwhile: back off, do not park it."""


class InFlightPods:
    """uid -> :class:`InFlight`, and the events recorded since the oldest flight began."""

    def __init__(self) -> None:
        self._flights: dict[str, InFlight] = {}
        self._events: list[SeenEvent] = []
        self._base = 0  # absolute index of _events[0]

    def start(self, pod: Pod) -> None:
        self._flights[pod.uid] = InFlight(self._base + len(self._events), pod)

    def get(self, uid: str) -> InFlight | None:
        return self._flights.get(uid)

    def finish(self, uid: str) -> InFlight | None:
        """The pod's flight, ended (None: it was not in flight). Its events stay readable
        (:meth:`seen`) until :meth:`prune`."""
        return self._flights.pop(uid, None)

    def record(self, event: ClusterEvent, old: object, new: object) -> None:
        """An event the pods in flight may be asked about (none in flight: dropped)."""
        if self._flights:
            self._events.append((event, old, new))

    def seen(self, flight: InFlight) -> list[SeenEvent]:
        """The events recorded since ``flight`` began."""
        return self._events[flight.start - self._base :]

    def prune(self) -> None:
        """Forget events no in-flight pod can still be asked about."""
        if not self._events:
            return
        if not self._flights:
            self._base += len(self._events)
            self._events.clear()
            return
        oldest = min(f.start for f in self._flights.values())
        drop = oldest - self._base
        if drop > 0:
            del self._events[:drop]
            self._base = oldest

    def __bool__(self) -> bool:
        return bool(self._flights)

    def __iter__(self) -> Iterator[str]:
        return iter(self._flights)
