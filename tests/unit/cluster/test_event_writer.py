"""The Event writer under virtual time: it keeps pace with a bind rate by writing several
Events at once, shows its lag on /metrics, drops (and counts) on a full queue, and on a
stop writes what is queued within the bound it is given."""

from __future__ import annotations

import asyncio
import logging

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from kubesched.cluster.event_writer import EventWriter, EventWriterCollector, QueuedEvent


class FakeAPI:
    """Answers each Event write after ``latency`` seconds; ``fail`` names refused Events."""

    def __init__(self, latency: float, fail: frozenset[str] = frozenset()) -> None:
        self.latency = latency
        self.fail = fail
        self.written: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0

    async def post(self, event: QueuedEvent) -> None:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.latency)
        finally:
            self.in_flight -= 1
        if event.name in self.fail:
            raise RuntimeError("the server said no")
        self.written.append(event.name)


def put(writer: EventWriter, name: str) -> bool:
    return writer.put("ns", b"{}", "Scheduled", name)


async def binds(writer: EventWriter, per_second: int, seconds: int) -> None:
    """One Event per bind at ``per_second`` binds a second."""
    for i in range(per_second * seconds):
        put(writer, f"p{i}")
        await asyncio.sleep(1 / per_second)


@pytest.mark.looptime
async def test_sixteen_writers_keep_pace_with_700_binds_a_second_at_20_ms_a_write() -> None:
    api = FakeAPI(latency=0.02)
    writer = EventWriter(api.post, capacity=10000, writers=16)
    lags: list[float] = []

    async def sample() -> None:
        while True:
            await asyncio.sleep(0.5)
            lags.append(writer.lag())

    sampler = asyncio.create_task(sample())
    await binds(writer, per_second=700, seconds=5)
    sampler.cancel()
    # At the last bind only the writes in flight are outstanding: nothing piles up.
    assert writer.pending <= 16
    assert max(lags) < 0.1
    assert await writer.flush(within=1.0) == 0
    assert len(api.written) == 3500
    assert 1 < api.max_in_flight <= 16


@pytest.mark.looptime
async def test_one_writer_falls_behind_and_the_lag_shows_it() -> None:
    api = FakeAPI(latency=0.02)  # 50 Events a second at most
    writer = EventWriter(api.post, capacity=10000, writers=1)
    await binds(writer, per_second=100, seconds=2)
    assert writer.queue_length == pytest.approx(100, abs=2)
    assert writer.lag() == pytest.approx(1.0, abs=0.05)  # the oldest waits since t=1 s
    registry = CollectorRegistry()
    registry.register(EventWriterCollector(lambda: writer))
    text = generate_latest(registry).decode()
    assert (
        "kubesched_event_queue_length 99.0" in text or "kubesched_event_queue_length 100.0" in text
    )
    assert "kubesched_event_write_lag_seconds 1.0" in text
    assert (
        "kubesched_events_written_total 100.0" in text
        or "kubesched_events_written_total 99.0" in text
    )


@pytest.mark.looptime
async def test_a_full_queue_drops_the_newest_and_counts_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api = FakeAPI(latency=1.0)
    writer = EventWriter(api.post, capacity=3, writers=1)
    accepted = [put(writer, f"p{i}") for i in range(5)]
    assert accepted == [True, True, True, False, False]
    assert writer.dropped == 2
    assert "event queue full (3 queued)" in caplog.text
    assert await writer.flush() == 0
    assert api.written == ["p0", "p1", "p2"]


@pytest.mark.looptime
async def test_a_failed_write_is_logged_counted_and_the_rest_are_written(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api = FakeAPI(latency=0.01, fail=frozenset({"p1"}))
    writer = EventWriter(api.post, writers=2)
    for i in range(4):
        put(writer, f"p{i}")
    with caplog.at_level(logging.WARNING):
        assert await writer.flush() == 0
    assert sorted(api.written) == ["p0", "p2", "p3"]
    assert writer.failed == 1 and writer.written == 3
    assert "could not write event Scheduled for ns/p1: the server said no" in caplog.text


@pytest.mark.looptime
async def test_stop_writes_a_backlog_that_fits_in_the_bound() -> None:
    api = FakeAPI(latency=0.02)
    writer = EventWriter(api.post, capacity=20000, writers=16)
    for i in range(10000):  # a burst bound faster than any writer: all queued at once
        put(writer, f"p{i}")
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    assert await writer.aclose(within=20.0) == 0
    # 10000 Events, 16 at a time, 20 ms each
    assert loop.time() - t0 == pytest.approx(10000 / 16 * 0.02, rel=0.02)
    assert len(set(api.written)) == 10000


@pytest.mark.looptime
async def test_stop_gives_up_at_the_bound_and_says_how_many_were_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api = FakeAPI(latency=0.1)
    writer = EventWriter(api.post, writers=2)
    for i in range(100):  # 5 s of writes
        put(writer, f"p{i}")
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    left = await writer.aclose(within=1.05)
    assert loop.time() - t0 == pytest.approx(1.05, abs=0.01)
    assert len(api.written) == 20
    assert left == 80
    assert "stopping with 80 event(s) unwritten after 1.05 s" in caplog.text
    await asyncio.sleep(10)
    assert len(api.written) == 20  # the writers are gone


@pytest.mark.looptime
async def test_flush_of_an_idle_writer_returns_at_once() -> None:
    writer = EventWriter(FakeAPI(latency=1.0).post)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    assert await writer.flush(within=5.0) == 0
    assert await writer.aclose(within=5.0) == 0
    assert loop.time() - t0 == 0
    assert writer.lag() == 0.0
