"""The scheduling queue's moves on cluster events: which parked pods (unschedulable or
gated) an event, an activation, a finished backoff or a long wait sends back towards
activeQ, asked through the pods' rejecting plugins' queueing hints.

:class:`QueueMoves` is mixed into :class:`~kubesched.backend.queue.SchedulingQueue`,
whose pools and placement rules (``_requeue``, ``_move_to_active``) it runs on; the
queue's module doc says where pods go and why.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from kubesched.backend.queue_backoff import BackoffQueue, align
from kubesched.backend.queue_events import (
    EVENT_UNSCHEDULABLE_TIMEOUT,
    QueueingHints,
    Strategy,
    event_label,
    pod_update_event,
)
from kubesched.backend.queue_gates import GatedPool
from kubesched.backend.queue_inflight import InFlightPods
from kubesched.framework.interface import ActionType, ClusterEvent, EventResource
from kubesched.framework.nodeinfo import QueuedPodInfo
from kubesched.framework.types import Pod

__all__ = ["QueueMoves"]


class QueueMoves:
    """Cluster-event moves: methods of the SchedulingQueue, which mixes them in."""

    if TYPE_CHECKING:  # what the SchedulingQueue provides
        _hints: QueueingHints
        _unsched: dict[str, QueuedPodInfo]
        _gated: GatedPool
        _backoff: BackoffQueue
        _in_flight: InFlightPods
        _cycle: int
        _move_request_cycle: int
        _use_hints: bool
        _clock: Callable[[], float]
        pop_from_backoff: bool
        max_unschedulable_duration: float
        on_incoming: Callable[[str, str], None] | None

        def _notify(self) -> None: ...

        def _move_to_active(
            self,
            qpi: QueuedPodInfo,
            event: str,
            *,
            from_backoff: bool = False,
            parked: bool = False,
        ) -> bool: ...

        def _requeue(
            self,
            qpi: QueuedPodInfo,
            strategy: Strategy,
            event: str,
            *,
            now: float | None = None,
            parked: bool = False,
        ) -> str: ...

        def _poppable(self, where: str) -> bool: ...

    def move_all_to_active_or_backoff(
        self,
        event: ClusterEvent,
        old: object = None,
        new: object = None,
        *,
        pre_check: Callable[[Pod], bool] | None = None,
    ) -> None:
        """Move the parked pods this event may help (``pre_check`` narrows them first)."""
        if not self._hints.interested(event):
            return
        pods = list(self._unsched.values())
        if self._gated:
            # Gated pods only for an event their gating plugin registered for: with
            # thousands of gated pods, every bind would otherwise walk all of them.
            gaters = self._hints.gaters_for(event)
            if event.resource is EventResource.WILDCARD:
                pods += self._gated.values()
            elif gaters:
                pods += self._gated.held_by(gaters)
        if pre_check is not None:
            pods = [q for q in pods if pre_check(q.pod)]
        self._move_pods(pods, event, old, new)

    def recheck_parked(self, event: ClusterEvent) -> None:
        """Every gated pod runs PreEnqueue again and every unschedulable one moves on
        (``event``: a wildcard), as if each event since was delivered: for events a
        :class:`~kubesched.backend.queue_set.QueueSet` held while no cycle ran."""
        activated = False
        for uid, qpi in list(self._gated.items()):
            self._gated.pop(uid)
            activated |= self._move_to_active(qpi, event_label(event), parked=True)
        if activated:
            self._notify()
        if self._unsched:
            self._move_pods(list(self._unsched.values()), event, None, None)

    def assigned_pod_added(self, pod: Pod) -> None:
        self.move_all_to_active_or_backoff(
            ClusterEvent(EventResource.ASSIGNED_POD, ActionType.ADD), None, pod
        )

    def assigned_pod_updated(self, old: Pod, new: Pod) -> None:
        self.move_all_to_active_or_backoff(pod_update_event(old, new), old, new)

    def activate(self, pods: Iterable[Pod]) -> None:
        """Move these pods to activeQ now, backoff or not (gated ones re-run PreEnqueue).
        A pod in flight is requeued with backoff instead of parked, if it fails."""
        activated = False
        for pod in pods:
            uid = pod.uid
            qpi = self._unsched.pop(uid, None) or self._gated.pop(uid)
            if qpi is not None:
                activated |= self._move_to_active(qpi, "ForceActivate", parked=True)
                continue
            if (qpi := self._backoff.remove(uid)) is not None:
                activated |= self._move_to_active(qpi, "ForceActivate", from_backoff=True)
                continue
            flight = self._in_flight.get(uid)
            if flight is not None:
                flight.requeue = True
                self._move_request_cycle = self._cycle
        if activated:
            self._notify()

    def flush_backoff_completed(self) -> None:
        """Move the pods whose backoff is over to activeQ: with ``pop_from_backoff``,
        those whose expiry's window is past (kube-scheduler flushes at each whole
        second), else those whose expiry is now or past."""
        now = self._clock()
        if self.pop_from_backoff:
            window = align(now)
            expired = self._backoff.pop_expired(lambda expiry: expiry < window)
        else:
            expired = self._backoff.pop_expired(lambda expiry: expiry <= now)
        activated = False
        for qpi in expired:
            activated |= self._move_to_active(qpi, "BackoffComplete", from_backoff=True)
        if activated:
            self._notify()

    def flush_unschedulable_left_over(self) -> None:
        """kube-scheduler's flushUnschedulableEntitiesLeftover: the parked pods, gated ones
        included, queued or last flushed longer than ``max_unschedulable_duration`` ago
        move on as on a wildcard event (a gated one runs PreEnqueue again)."""
        now, limit = self._clock(), self.max_unschedulable_duration
        stale = [
            q
            for pool in (self._unsched, self._gated)
            for q in pool.values()
            if now - max(q.timestamp, q.flushed_at) > limit
        ]
        for q in stale:
            q.flushed_at, q.flushed = now, True
        if stale:
            self._move_pods(stale, EVENT_UNSCHEDULABLE_TIMEOUT, None, None)

    # -- internals ---------------------------------------------------------------------
    def _mover(self, qpi: QueuedPodInfo, event: ClusterEvent, old: object, new: object) -> str:
        """The label of the event that moves this pod (asked only if counted)."""
        if self.on_incoming is None:
            return ""
        return self._hints.mover(qpi, event, old, new)

    def _move_pods(
        self, pods: list[QueuedPodInfo], event: ClusterEvent, old: object, new: object
    ) -> None:
        activated = False
        now = self._clock()
        for qpi in pods:
            uid = qpi.pod.uid
            if qpi.gated:
                if self._hints.ungates(qpi, event, old, new):
                    self._gated.pop(uid)
                    mover = self._mover(qpi, event, old, new)
                    activated |= self._move_to_active(qpi, mover, parked=True)
                continue
            strategy = self._hints.worth(qpi, event, old, new)
            if strategy is not Strategy.SKIP:
                del self._unsched[uid]
                mover = self._mover(qpi, event, old, new)
                activated |= self._poppable(
                    self._requeue(qpi, strategy, mover, now=now, parked=True)
                )
        self._move_request_cycle = self._cycle
        if self._use_hints:
            self._in_flight.record(event, old, new)
        if activated:
            self._notify()
