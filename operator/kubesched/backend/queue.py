"""The scheduling queue of one profile: activeQ, backoffQ, the unschedulable pool and the
gated pool, with kube-scheduler's rules for moving pods between them.

- activeQ: pods ready to be tried, in QueueSort order; ``pop_nowait`` takes the head.
- backoffQ: pods that failed and wait out their backoff (``initial * 2^(failures-1)``,
  capped), counted from the last failure; then they go to activeQ. As kube-scheduler
  1.37 with its SchedulerPopFromBackoffQ feature (on by default), a pod that plugins
  rejected is popped from backoffQ whenever activeQ is empty, backoff or not; expiries
  are counted in whole seconds and flushed a whole second at a time; PreEnqueue runs as
  a pod enters backoffQ, not as it leaves (:mod:`kubesched.backend.queue_backoff`).
- unschedulable pool: pods rejected by plugins. A cluster event that one of the rejecting
  plugins registered for (and whose queueing hint agrees) moves them to backoffQ, or to
  activeQ if their backoff is already over; so does staying longer than
  ``max_unschedulable_duration``.
- gated pool: pods a PreEnqueue plugin holds back. They were never tried; they go
  straight to activeQ once every PreEnqueue plugin passes (on an update of the pod, or
  an event the gating plugin registered for).

A pod between ``pop_nowait`` and ``done``/``add_unschedulable`` is *in flight*. With
queueing hints (the default, as in kube-scheduler) the queue remembers the cluster events
seen meanwhile (:mod:`kubesched.backend.queue_inflight`), and a pod that fails goes to
backoffQ only if one of those events could have helped it; without hints, any move
request since its cycle began does.

The moves on cluster events, activations, finished backoffs and long waits are
:class:`~kubesched.backend.queue_moves.QueueMoves`'s, mixed in. All methods are
synchronous and run on the event loop thread; :meth:`run` is the only coroutine. Time
comes from ``clock`` (the running loop's clock by default), so tests run in virtual time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from kubesched.backend.queue_backoff import (
    WINDOW,
    BackoffQueue,
    align,
    backoff_duration,
    backoff_expiry,
    errored,
)
from kubesched.backend.queue_events import (
    QueueingHints,
    Strategy,
    is_pod_updated,
    pod_update_event,
)
from kubesched.backend.queue_gates import GatedPool, PreEnqueueGate
from kubesched.backend.queue_heap import PodHeap
from kubesched.backend.queue_inflight import InFlightPods
from kubesched.backend.queue_moves import QueueMoves
from kubesched.framework.interface import (
    ClusterEventWithHint,
    PreEnqueuePlugin,
)
from kubesched.framework.nodeinfo import QueuedPodInfo
from kubesched.framework.types import Pod

__all__ = [
    "ACTIVE",
    "BACKOFF",
    "GATED",
    "UNSCHEDULABLE",
    "SchedulingQueue",
]

log = logging.getLogger(__name__)

ACTIVE = "active"
BACKOFF = "backoff"
UNSCHEDULABLE = "unschedulable"
GATED = "gated"

_NO_EVENTS: Mapping[str, Sequence[ClusterEventWithHint]] = MappingProxyType({})

_POD_ADD = "UnscheduledPodAdd"

UNSCHEDULABLE_FLUSH_INTERVAL = 30.0
"""How often the unschedulable pool is checked for pods past the limit (kube: 30 s)."""


def _default_sort_key(qpi: QueuedPodInfo) -> tuple[int, float]:
    # PrioritySort: higher priority first, then earlier timestamp.
    return (-qpi.pod.priority, qpi.timestamp)


def _loop_time() -> float:
    return asyncio.get_running_loop().time()


class SchedulingQueue(QueueMoves):
    """kube-scheduler's PriorityQueue for one profile (see the module docstring).

    ``sort_key`` (smaller first) is used when given, else ``less``; with neither, pods
    go by priority, then queue timestamp (PrioritySort). ``events`` maps each plugin,
    PreEnqueue plugins included, to the cluster events it registered. The backoff
    defaults (1 s doubling to 10 s) and the 5-minute limit in the unschedulable pool are
    kube-scheduler's. ``queueing_hints=False`` restores kube-scheduler's behaviour
    without the SchedulerQueueingHints feature: a pod that fails goes to backoffQ after
    *any* move request received since its cycle began. ``pop_from_backoff=False`` is
    kube-scheduler without its SchedulerPopFromBackoffQ feature: a pod leaves backoffQ
    only when its backoff is over (to the instant), and runs PreEnqueue then.
    ``on_change`` is called whenever a pod can be popped (it entered activeQ, or
    backoffQ's rejected pods; also: :meth:`add_listener`). :attr:`on_incoming`, when
    set, is told of every pod that enters a queue (see its doc).
    """

    def __init__(
        self,
        *,
        less: Callable[[QueuedPodInfo, QueuedPodInfo], bool] | None = None,
        sort_key: Callable[[QueuedPodInfo], Any] | None = None,
        pre_enqueue: Sequence[PreEnqueuePlugin] = (),
        events: Mapping[str, Sequence[ClusterEventWithHint]] = _NO_EVENTS,
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        max_unschedulable_duration: float = 300.0,
        clock: Callable[[], float] | None = None,
        on_change: Callable[[], None] | None = None,
        queueing_hints: bool = True,
        pop_from_backoff: bool = True,
    ) -> None:
        if sort_key is None and less is None:
            sort_key = _default_sort_key
        self._sort_key = sort_key
        self._less = less
        self.pre_enqueue = PreEnqueueGate(pre_enqueue)
        """The PreEnqueue plugins (``pre_enqueue.observe`` times each run)."""
        self._hints = QueueingHints(events)
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_unschedulable_duration = max_unschedulable_duration
        self._clock: Callable[[], float] = clock or _loop_time
        self._listeners: list[Callable[[], None]] = [on_change] if on_change else []
        self._use_hints = queueing_hints
        self.pop_from_backoff = pop_from_backoff

        self._arrivals = 0  # QueuedPodInfo.seq
        self._reserved: dict[str, tuple[float, int]] = {}
        """uid -> the arrival (timestamp, seq) kept for a pod held back (:meth:`reserve`)."""
        self._active = PodHeap(None if sort_key is not None else less)
        self._backoff = BackoffQueue(sort_key=sort_key, less=less)
        self._unsched: dict[str, QueuedPodInfo] = {}
        self._gated = GatedPool()
        self._in_flight = InFlightPods()
        self._cycle = 0
        self._move_request_cycle = -1
        self._closed = False
        self._wake = asyncio.Event()
        self._run_deadline = float("inf")
        self.on_incoming: Callable[[str, str], None] | None = None
        """Called with (queue, event) as a pod enters activeQ, backoffQ or the parked
        pools from elsewhere, as kube-scheduler counts ``scheduler_queue_incoming_pods_total``:
        queue ``active``, ``backoff`` or ``unschedulable`` (the gated pool is part of
        kube's), event kube's label of what moved it (``UnscheduledPodAdd``,
        ``ScheduleAttemptFailure``, ``BackoffComplete``, ``PopFromBackoffQ``, ``NodeAdd``,
        ...). A pod that stays parked (an event that does not move it, a pod still
        gated) is not counted."""

    # -- listeners ---------------------------------------------------------------------
    def add_listener(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` whenever a pod becomes poppable (QueueSet wakes pop())."""
        self._listeners.append(callback)

    def remove_listener(self, callback: Callable[[], None]) -> None:
        if callback in self._listeners:
            self._listeners.remove(callback)

    def _notify(self) -> None:
        for cb in self._listeners:
            cb()

    # -- adding, updating, deleting ----------------------------------------------------
    def add(self, pod: Pod) -> None:
        """A new unscheduled pod: PreEnqueue, then activeQ or the gated pool.
        A pod the queue already knows (same uid) is updated instead."""
        existing = self.get(pod.uid)
        if existing is not None:
            self.update(existing.pod, pod)
            return
        if (flight := self._in_flight.get(pod.uid)) is not None:
            self.update(flight.latest, pod)
            return
        arrival = self._reserved.pop(pod.uid, None) if self._reserved else None
        if arrival is None:
            self._arrivals += 1
            arrival = (self._clock(), self._arrivals)
        qpi = QueuedPodInfo(pod=pod, timestamp=arrival[0], seq=arrival[1])
        if self._move_to_active(qpi, _POD_ADD):
            self._notify()

    def reserve(self, uid: str) -> tuple[float, int]:
        """The arrival (timestamp, seq) of a pod that is added later but must take its
        place in the queue's order as if added now: :meth:`add` gives it this one. The
        start holds back plain pending pods this way (``kubesched.scheduler.held_pods``)."""
        self._arrivals += 1
        arrival = self._reserved[uid] = (self._clock(), self._arrivals)
        return arrival

    def drop_reservations(self) -> None:
        """Forget arrivals reserved for pods that never came (malformed, deleted)."""
        self._reserved.clear()

    def is_active(self, uid: str) -> bool:
        """Whether the pod waits in activeQ."""
        return uid in self._active

    def update(self, old: Pod | None, new: Pod) -> None:
        uid = new.uid
        if new.node_name:
            # Bound: no longer the queue's business.
            self.delete(new)
            return
        flight = self._in_flight.get(uid)
        if flight is not None:
            flight.latest, flight.replaced = new, True
            if self._use_hints and old is not None:
                # As kube-scheduler 1.37: the update joins the events seen while pods are
                # in flight; if this attempt fails, its rejectors' hints are asked about it.
                self._in_flight.record(pod_update_event(old, new), old, new)
            elif is_pod_updated(old, new):
                flight.requeue = True
            return
        if (qpi := self._gated.pop(uid)) is not None:
            qpi.pod = new
            mover = self._target_update(qpi, old, new)
            if self._move_to_active(qpi, mover, parked=True):
                self._notify()
            return
        if (qpi := self._active.get(uid) or self._backoff.get(uid)) is not None:
            qpi.pod = new
            return
        if (qpi := self._unsched.get(uid)) is not None:
            qpi.pod = new
            if self._use_hints and old is not None:
                # kube-scheduler 1.37 asks the pod's rejecting plugins' hints about any
                # update of its own (the event's resource: TargetPod, UnscheduledPod
                # here); one that names no kind of change is a general update.
                strategy = self._hints.worth(qpi, pod_update_event(old, new), old, new)
            elif is_pod_updated(old, new):
                strategy = Strategy.AFTER_BACKOFF
            else:
                return
            if strategy is not Strategy.SKIP:
                del self._unsched[uid]
                mover = self._target_update(qpi, old, new)
                if self._poppable(self._requeue(qpi, strategy, mover, parked=True)):
                    self._notify()
            return
        self.add(new)

    def delete(self, pod: Pod) -> None:
        uid = pod.uid
        if self._active.remove(uid) is not None or self._backoff.remove(uid) is not None:
            return
        if self._unsched.pop(uid, None) is None and self._gated.pop(uid) is None:
            flight = self._in_flight.get(uid)
            if flight is not None:
                flight.deleted = True

    # -- popping -----------------------------------------------------------------------
    def pop_nowait(self, *, backoff: bool = True) -> QueuedPodInfo | None:
        """The head of activeQ, now in flight; if activeQ is empty, the head of backoffQ's
        rejected pods (``pop_from_backoff``, unless ``backoff`` is False); None if
        neither has one or the queue is closed."""
        if self._closed:
            return None
        qpi = self._active.pop()
        if qpi is None and backoff and self.pop_from_backoff:
            # kube-scheduler 1.37 (SchedulerPopFromBackoffQ): nothing else to do, so a
            # rejected pod need not wait out its backoff.
            qpi = self._backoff.pop_rejected()
            if qpi is not None:
                self._incoming(ACTIVE, "PopFromBackoffQ")
        if qpi is None:
            return None
        self._cycle += 1
        self._start_flight(qpi)
        return qpi

    def take(self, uid: str) -> QueuedPodInfo | None:
        """Take a queued pod out of activeQ, backoffQ or the unschedulable pool, in
        flight as if popped (a whole-group cycle gathers a gang's members this way;
        see :mod:`kubesched.scheduler.gang_cycle`). None: not there (gated, in flight,
        unknown) or the queue is closed."""
        if self._closed:
            return None
        qpi = self._active.remove(uid) or self._backoff.remove(uid) or self._unsched.pop(uid, None)
        if qpi is None:
            return None
        self._start_flight(qpi)
        return qpi

    def _start_flight(self, qpi: QueuedPodInfo) -> None:
        """A new attempt of a pod just taken out of the queues: counted, and in flight."""
        qpi.attempts += 1
        if qpi.initial_attempt_timestamp is None:
            qpi.initial_attempt_timestamp = self._clock()
        # A fresh attempt: the rejectors of the last one no longer apply, and it fails
        # alone unless a whole-group cycle says otherwise.
        qpi.unschedulable_plugins.clear()
        qpi.pending_plugins.clear()
        qpi.group_size = 1
        self._in_flight.start(qpi.pod)

    def done(self, uid: str) -> None:
        """The pod's scheduling (and binding) ended; idempotent."""
        if self._in_flight.finish(uid) is not None:
            self._in_flight.prune()

    def scheduling_cycle(self) -> int:
        return self._cycle

    def add_unschedulable(self, qpi: QueuedPodInfo, *, scheduling_cycle: int) -> None:
        """Requeue a pod after a failed attempt; also ends its flight (as ``done``).

        No rejecting plugins (an Error): backoffQ. Otherwise the unschedulable pool,
        unless something seen while it was in flight could have helped it: then
        backoffQ (activeQ right away if a Pending plugin's event came)."""
        uid = qpi.pod.uid
        flight = self._in_flight.finish(uid)
        if self.get(uid) is not None:
            log.warning("pod %s is already queued; not requeued again", qpi.pod.key)
            self._in_flight.prune()
            return
        if flight is not None and flight.replaced:
            qpi.pod = flight.latest
        if flight is not None and flight.deleted:
            self._in_flight.prune()
            return
        now = self._clock()
        qpi.timestamp = now
        qpi.last_failure = now
        qpi.flushed = False
        strategy = Strategy.SKIP
        if errored(qpi):
            qpi.consecutive_errors += 1
        else:
            qpi.unschedulable_count += 1
            qpi.consecutive_errors = 0
        if qpi.consecutive_errors or (flight is not None and flight.requeue):
            strategy = Strategy.AFTER_BACKOFF
        elif flight is not None and self._use_hints:
            for event, old, new in self._in_flight.seen(flight):
                strategy = max(strategy, self._hints.worth(qpi, event, old, new))
                if strategy is Strategy.IMMEDIATELY:
                    break
        elif self._move_request_cycle >= scheduling_cycle:
            strategy = Strategy.AFTER_BACKOFF
        self._in_flight.prune()
        if self._poppable(self._requeue(qpi, strategy, "ScheduleAttemptFailure", now=now)):
            self._notify()

    def next_wakeup(self) -> float | None:
        """When :meth:`flush_backoff_completed` will next move a pod; None if backoffQ
        is empty. With ``pop_from_backoff``, at the window after the earliest expiry's."""
        expiry = self._backoff.earliest()
        if expiry is None or not self.pop_from_backoff:
            return expiry
        return expiry + WINDOW

    async def run(self) -> None:
        """Flush backoffQ as backoffs expire and the unschedulable pool every 30 s,
        until cancelled or closed."""
        next_left_over = self._clock() + UNSCHEDULABLE_FLUSH_INTERVAL
        try:
            while not self._closed:
                self.flush_backoff_completed()
                now = self._clock()
                if now >= next_left_over:
                    self.flush_unschedulable_left_over()
                    next_left_over = now + UNSCHEDULABLE_FLUSH_INTERVAL
                wakeup = self.next_wakeup()
                deadline = next_left_over if wakeup is None else min(wakeup, next_left_over)
                self._run_deadline = deadline
                self._wake.clear()
                try:
                    async with asyncio.timeout(max(0.0, deadline - now)):
                        await self._wake.wait()
                except TimeoutError:
                    pass
        finally:
            self._run_deadline = float("inf")

    # -- reading -----------------------------------------------------------------------
    def pending_counts(self) -> dict[str, int]:
        """Pods per queue (the ``scheduler_pending_pods{queue}`` metric)."""
        return {
            ACTIVE: len(self._active),
            BACKOFF: len(self._backoff),
            UNSCHEDULABLE: len(self._unsched),
            GATED: len(self._gated),
        }

    def get(self, uid: str) -> QueuedPodInfo | None:
        """The queued pod with this uid, in whichever queue (not in flight)."""
        return (
            self._active.get(uid)
            or self._backoff.get(uid)
            or self._unsched.get(uid)
            or self._gated.get(uid)
        )

    def pending_pods(self) -> list[tuple[QueuedPodInfo, str]]:
        out = [(q, ACTIVE) for q in self._active.values()]
        out += [(q, BACKOFF) for q in self._backoff.values()]
        out += [(q, UNSCHEDULABLE) for q in self._unsched.values()]
        out += [(q, GATED) for q in self._gated.values()]
        return out

    def in_flight(self) -> list[str]:
        """Uids of the pods between pop and done."""
        return list(self._in_flight)

    def can_pop(self) -> bool:
        """:meth:`pop_nowait` would give a pod: one is in activeQ, or (``pop_from_backoff``)
        among backoffQ's rejected pods."""
        if self._closed:
            return False
        return bool(self._active) or (self.pop_from_backoff and self._backoff.has_rejected())

    def idle(self) -> bool:
        return not self._active and not self._backoff and not self._in_flight

    def close(self) -> None:
        self._closed = True
        self._wake.set()
        self._notify()

    @property
    def closed(self) -> bool:
        return self._closed

    # -- internals ---------------------------------------------------------------------
    def backoff_duration(self, qpi: QueuedPodInfo) -> float:
        """The pod's backoff (:func:`~kubesched.backend.queue_backoff.backoff_duration`)."""
        return backoff_duration(qpi, self.initial_backoff, self.max_backoff)

    def backoff_expiry(self, qpi: QueuedPodInfo) -> float:
        """When the pod's backoff ends (:func:`~kubesched.backend.queue_backoff.backoff_expiry`)."""
        return backoff_expiry(qpi, self.initial_backoff, self.max_backoff, self.pop_from_backoff)

    def _backing_off(self, qpi: QueuedPodInfo, now: float) -> bool:
        if self.pop_from_backoff:
            # kube: backing off while the expiry's window is not before now's
            return self.backoff_expiry(qpi) >= align(now)
        return self.backoff_expiry(qpi) > now

    def _push_active(self, qpi: QueuedPodInfo) -> None:
        key = self._sort_key
        self._active.push(qpi, None if key is None else key(qpi))

    def _push_backoff(self, qpi: QueuedPodInfo) -> None:
        expiry = self.backoff_expiry(qpi)
        self._backoff.push(qpi, expiry, ordered=self.pop_from_backoff)
        if expiry + (WINDOW if self.pop_from_backoff else 0.0) < self._run_deadline:
            self._wake.set()

    def _move_to_active(
        self, qpi: QueuedPodInfo, event: str, *, from_backoff: bool = False, parked: bool = False
    ) -> bool:
        """activeQ if PreEnqueue passes, else the gated pool. True: activeQ. A pod
        ``from_backoff`` passed PreEnqueue as it entered backoffQ (``pop_from_backoff``).
        ``event`` names the move (:attr:`on_incoming`); a pod ``parked`` came from the
        parked pools, and is not counted if it goes back there."""
        if (from_backoff and self.pop_from_backoff) or self.pre_enqueue.passes(qpi):
            self._push_active(qpi)
            self._incoming(ACTIVE, event)
            return True
        self._gated.put(qpi)
        if not parked:
            self._incoming(UNSCHEDULABLE, event)
        return False

    def _requeue(
        self,
        qpi: QueuedPodInfo,
        strategy: Strategy,
        event: str,
        *,
        now: float | None = None,
        parked: bool = False,
    ) -> str:
        """Place a pod that is in no queue; returns where it went (``event``, ``parked``:
        as :meth:`_move_to_active`'s)."""
        if strategy is Strategy.SKIP:
            self._unsched[qpi.pod.uid] = qpi
            if not parked:
                self._incoming(UNSCHEDULABLE, event)
            return UNSCHEDULABLE
        now = self._clock() if now is None else now
        if strategy is Strategy.AFTER_BACKOFF and self._backing_off(qpi, now):
            if self.pop_from_backoff and not self.pre_enqueue.passes(qpi):
                self._gated.put(qpi)  # kube: PreEnqueue as it enters backoffQ
                if not parked:
                    self._incoming(UNSCHEDULABLE, event)
                return GATED
            self._push_backoff(qpi)
            self._incoming(BACKOFF, event)
            return BACKOFF
        return ACTIVE if self._move_to_active(qpi, event, parked=parked) else GATED

    def _incoming(self, queue: str, event: str) -> None:
        if self.on_incoming is not None:
            self.on_incoming(queue, event)

    def _target_update(self, qpi: QueuedPodInfo, old: Pod | None, new: Pod) -> str:
        """The label of the pod's own update that moves it (kube's TargetPod events)."""
        if self.on_incoming is None:
            return ""
        if old is None:
            return "TargetPodUpdate"
        return self._hints.mover(qpi, pod_update_event(old, new), old, new, target=True)

    def _poppable(self, where: str) -> bool:
        """A pod just placed ``where`` can be popped (listeners are to be told)."""
        return where == ACTIVE or (where == BACKOFF and self.pop_from_backoff)
