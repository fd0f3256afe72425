"""The Event writer: a bounded queue of serialized Events drained by concurrent writers.

:meth:`EventWriter.put` never waits: the scheduler records a ``Scheduled`` Event per bind
and must not slow down for it. Several writers (``writers``) each keep one POST in
flight, so the rate the queue drains at is ``writers`` / (the API server's answer time):
at 16 writers and 10-20 ms a write on a loaded control plane, 800-1600 Events a second,
above the bind rate kubesched reaches at 1000-5000 nodes. When the queue is full anyway
(the API server cannot keep up) the newest Event is dropped and counted, as client-go's
event broadcaster drops on a full channel.

What falls behind shows on ``/metrics`` (:class:`EventWriterCollector`):
``kubesched_event_queue_length`` (queued, not yet taken by a writer),
``kubesched_event_write_lag_seconds`` (the age of the oldest Event not yet written: 0 when
the writer keeps pace), ``kubesched_events_written_total``, ``kubesched_events_failed_total``
and ``kubesched_events_dropped_total``.

On a graceful stop :meth:`flush` writes what is queued within a bounded time
(``shutdown_flush_seconds``, :mod:`kubesched.operator.settings`) and says how many were left.
Time comes from the event loop (virtual time in tests).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["EventWriter", "EventWriterCollector", "QueuedEvent"]

log = logging.getLogger("kubesched.cluster.events")

Post = Callable[["QueuedEvent"], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class QueuedEvent:
    namespace: str
    body: bytes
    """The Event, serialized."""
    reason: str
    name: str
    """The name of the object the Event is about (for the log line of a failed write)."""
    queued_at: float
    """The event loop's time when it was queued (the lag metric)."""


class EventWriter:
    """See the module docstring. ``post`` writes one Event (raises on failure)."""

    def __init__(self, post: Post, *, capacity: int = 10000, writers: int = 16) -> None:
        self._post = post
        self.capacity = max(1, capacity)
        self.writers = max(1, writers)
        self._queue: deque[QueuedEvent] = deque()
        self._inflight: dict[int, float] = {}
        """writer index -> queued_at of the Event it is writing."""
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._tasks: list[asyncio.Task[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self.written = 0
        self.failed = 0
        self.dropped = 0

    # -- the producer side ----------------------------------------------------------------
    def put(self, namespace: str, body: bytes, reason: str, name: str) -> bool:
        """Queue one Event; False when the queue was full and it was dropped."""
        if len(self._queue) >= self.capacity:
            self.dropped += 1
            if self.dropped % 1000 == 1:
                log.warning(
                    "event queue full (%d queued): dropping events (%d so far)",
                    len(self._queue),
                    self.dropped,
                )
            return False
        loop = self._loop = asyncio.get_running_loop()
        if not self._tasks:
            self._tasks = [
                loop.create_task(self._writer(i), name=f"kubesched-event-writer-{i}")
                for i in range(self.writers)
            ]
        self._queue.append(QueuedEvent(namespace, body, reason, name, loop.time()))
        self._idle.clear()
        self._wake.set()
        return True

    # -- what /metrics reads ----------------------------------------------------------------
    @property
    def queue_length(self) -> int:
        """Events queued and not yet taken by a writer."""
        return len(self._queue)

    @property
    def pending(self) -> int:
        """Events not yet written: queued plus being written."""
        return len(self._queue) + len(self._inflight)

    def lag(self) -> float:
        """Seconds since the oldest Event not yet written was queued (0: none waiting)."""
        oldest = list(self._inflight.values())
        if self._queue:
            oldest.append(self._queue[0].queued_at)
        if not oldest or self._loop is None:
            return 0.0
        return max(0.0, self._loop.time() - min(oldest))

    # -- the writers ----------------------------------------------------------------------------
    async def _writer(self, index: int) -> None:
        while True:
            if not self._queue:
                if not self._inflight:
                    self._idle.set()
                self._wake.clear()
                await self._wake.wait()
                continue
            event = self._queue.popleft()
            self._inflight[index] = event.queued_at
            try:
                await self._post(event)
                self.written += 1
            except asyncio.CancelledError:
                raise
            except Exception as e:  # an Event is never worth a failure
                self.failed += 1
                log.warning(
                    "could not write event %s for %s/%s: %s",
                    event.reason,
                    event.namespace,
                    event.name,
                    e,
                )
            finally:
                del self._inflight[index]
            if not self._queue and not self._inflight:
                self._idle.set()

    async def flush(self, within: float | None = None) -> int:
        """Wait until every Event queued so far is written (or failed), at most
        ``within`` seconds (None: no limit); returns how many were left unwritten."""
        if self._tasks and self.pending:
            try:
                async with asyncio.timeout(within):
                    await self._idle.wait()
            except TimeoutError:
                pass
        return self.pending

    async def aclose(self, within: float | None = None) -> int:
        """:meth:`flush` within ``within`` seconds, then stop the writers; the Events left
        unwritten are logged (their count) and returned."""
        left = 0
        try:
            left = await self.flush(within)
        finally:
            left = self.pending  # the writes in flight are cancelled: lost too
            tasks, self._tasks = self._tasks, []
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if left:
                log.warning(
                    "stopping with %d event(s) unwritten after %s s (shutdown_flush_seconds)",
                    left,
                    within,
                )
            self._queue.clear()
        return left


class EventWriterCollector(Collector):
    """The writer's figures for a ``CollectorRegistry`` (read at each scrape)."""

    def __init__(self, writer: Callable[[], EventWriter | None]) -> None:
        self._writer = writer

    def collect(self) -> Iterator[Metric]:
        w = self._writer()
        length = GaugeMetricFamily(
            "kubesched_event_queue_length",
            "Events queued for writing and not yet taken by a writer.",
        )
        lag = GaugeMetricFamily(
            "kubesched_event_write_lag_seconds",
            "Seconds since the oldest Event not yet written was queued (0 when none waits).",
        )
        written = CounterMetricFamily(
            "kubesched_events_written", "Events written to the API server."
        )
        failed = CounterMetricFamily(
            "kubesched_events_failed", "Event writes the API server refused or that failed."
        )
        dropped = CounterMetricFamily(
            "kubesched_events_dropped", "Events dropped because the queue was full."
        )
        length.add_metric([], w.queue_length if w else 0)
        lag.add_metric([], w.lag() if w else 0.0)
        written.add_metric([], w.written if w else 0)
        failed.add_metric([], w.failed if w else 0)
        dropped.add_metric([], w.dropped if w else 0)
        yield from (length, lag, written, failed, dropped)
