"""QueueSet: one SchedulingQueue per profile, popped round-robin.

kube-scheduler keeps a single activeQ for all profiles, ordered by the one QueueSort
all profiles must share. kubesched lets each profile order its own pods, so each profile
has its own queue, and the scheduling loop takes turns among the profiles that have a
pod ready: a busy profile cannot starve a quiet one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from kubesched.backend.queue_events import EVENTS_HELD
from kubesched.framework.interface import ClusterEvent
from kubesched.framework.nodeinfo import QueuedPodInfo
from kubesched.framework.types import Pod

if TYPE_CHECKING:
    from kubesched.backend.queue import SchedulingQueue

__all__ = ["QueueClosed", "QueueSet"]

log = logging.getLogger(__name__)


class QueueClosed(Exception):
    """``QueueSet.pop`` was waiting, or called, after ``close``."""


class QueueSet:
    """Profile name -> SchedulingQueue, with a pop that waits on all of them."""

    def __init__(self) -> None:
        self._queues: dict[str, SchedulingQueue] = {}
        self._order: list[str] = []
        self._cursor = 0
        self._ready = asyncio.Event()
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._running = False
        self._closed = False
        self._holding = False
        self._held = False

    # -- membership --------------------------------------------------------------------
    def add_queue(self, name: str, q: SchedulingQueue) -> None:
        """Add (or replace) the queue of profile ``name``; started at once if running."""
        if name in self._queues:
            self.remove_queue(name)
        self._queues[name] = q
        self._order.append(name)
        q.add_listener(self._ready.set)
        if self._running:
            self._start(name, q)
        if q.can_pop():
            self._ready.set()

    def remove_queue(self, name: str) -> SchedulingQueue | None:
        """Detach a profile's queue (its pods stay in it; its run() task is stopped)."""
        q = self._queues.pop(name, None)
        if q is None:
            return None
        i = self._order.index(name)
        del self._order[i]
        if i < self._cursor:
            self._cursor -= 1
        if self._order:
            self._cursor %= len(self._order)
        else:
            self._cursor = 0
        q.remove_listener(self._ready.set)
        task = self._tasks.pop(name, None)
        if task is not None:
            task.cancel()
        return q

    def queue(self, name: str) -> SchedulingQueue | None:
        return self._queues.get(name)

    def queues(self) -> dict[str, SchedulingQueue]:
        return dict(self._queues)

    # -- popping -----------------------------------------------------------------------
    def pop_nowait(self) -> tuple[str, QueuedPodInfo] | None:
        """The next pod of the next profile (in turn) that has one in activeQ; if none
        has, of the next whose backoffQ gives one early (kube-scheduler's one activeQ
        comes before its backoffQ, whichever profile a pod is for)."""
        order = self._order
        n = len(order)
        for backoff in (False, True):
            for i in range(n):
                idx = (self._cursor + i) % n
                name = order[idx]
                qpi = self._queues[name].pop_nowait(backoff=backoff)
                if qpi is not None:
                    self._cursor = (idx + 1) % n
                    return name, qpi
        return None

    async def pop(self) -> tuple[str, QueuedPodInfo]:
        """Wait until some profile has a pod in activeQ; raises QueueClosed after close."""
        while True:
            if self._closed:
                raise QueueClosed("the scheduling queues are closed")
            got = self.pop_nowait()
            if got is not None:
                return got
            self._ready.clear()
            await self._ready.wait()

    # -- broadcasts --------------------------------------------------------------------
    def hold_moves(self) -> None:
        """Until :meth:`release_moves`, cluster events move no parked pod: the initial
        listing, before any cycle. Each PodGroup or Workload of a listing would re-run
        PreEnqueue for every gang member held so far (328 gangs over 3000 members: a
        million calls, 2.5 s of CPU before the first bind); with no cycle in between,
        looking once at the end finds the same."""
        self._holding = True

    def release_moves(self) -> None:
        """Every parked pod is looked at once if an event came while held: the held ones
        run PreEnqueue again, the unschedulable ones move on (a wildcard event)."""
        held, self._holding, self._held = self._held, False, False
        if held:
            for q in self._queues.values():
                q.recheck_parked(EVENTS_HELD)

    def _hold(self) -> bool:
        """True while moves are held (the event is noted for :meth:`release_moves`)."""
        if self._holding:
            self._held = True
        return self._holding

    def move_all_to_active_or_backoff(
        self, event: ClusterEvent, old: object = None, new: object = None
    ) -> None:
        if self._hold():
            return
        for q in self._queues.values():
            q.move_all_to_active_or_backoff(event, old, new)

    def assigned_pod_added(self, pod: Pod) -> None:
        if self._hold():
            return
        for q in self._queues.values():
            q.assigned_pod_added(pod)

    def assigned_pod_updated(self, old: Pod, new: Pod) -> None:
        if self._hold():
            return
        for q in self._queues.values():
            q.assigned_pod_updated(old, new)

    def activate(self, pods: Iterable[Pod]) -> None:
        pods = list(pods)
        for q in self._queues.values():
            q.activate(pods)

    def pending_counts(self) -> dict[str, int]:
        """Pods per queue kind, summed over the profiles."""
        total: dict[str, int] = {}
        for q in self._queues.values():
            for k, v in q.pending_counts().items():
                total[k] = total.get(k, 0) + v
        return total

    # -- running -----------------------------------------------------------------------
    async def run(self) -> None:
        """Run every queue's ``run()`` (queues added later too) until cancelled."""
        self._running = True
        for name, q in self._queues.items():
            self._start(name, q)
        try:
            await asyncio.Future()
        finally:
            self._running = False
            tasks = list(self._tasks.values())
            self._tasks.clear()
            for t in tasks:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await t

    def _start(self, name: str, q: SchedulingQueue) -> None:
        task = asyncio.create_task(q.run(), name=f"kubesched-queue-{name}")
        task.add_done_callback(self._task_done)
        self._tasks[name] = task

    @staticmethod
    def _task_done(task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("queue task %s failed", task.get_name(), exc_info=task.exception())

    def close(self) -> None:
        """Close every queue and make waiting ``pop()`` calls raise QueueClosed."""
        self._closed = True
        for q in self._queues.values():
            q.close()
        self._ready.set()
