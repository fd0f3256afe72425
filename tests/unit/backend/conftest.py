"""Fixtures of the backend's tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from kubesched.backend.queue import SchedulingQueue
from kubesched.backend.queue_set import QueueSet
from tests.unit.backend.queue_helpers import queue


@pytest.fixture
async def running() -> AsyncIterator[Callable[[SchedulingQueue], None]]:
    """Start ``q.run()`` in the background for the test's duration."""
    tasks: list[asyncio.Task[None]] = []

    def start(q: SchedulingQueue) -> None:
        tasks.append(asyncio.create_task(q.run()))

    yield start
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


@pytest.fixture
def served(
    running: Callable[[SchedulingQueue], None],
) -> Callable[..., tuple[QueueSet, SchedulingQueue]]:
    """A queue (``queue(**kw)``) in a QueueSet as profile "p", its ``run()`` going."""

    def make(**kw: Any) -> tuple[QueueSet, SchedulingQueue]:
        qs, q = QueueSet(), queue(**kw)
        qs.add_queue("p", q)
        running(q)
        return qs, q

    return make
