"""Fixtures of the backend's tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest

from kubesched.backend.queue import SchedulingQueue


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
