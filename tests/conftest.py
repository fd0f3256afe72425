"""Suite-wide test setup."""

from __future__ import annotations

import asyncio

import pytest


def pytest_sessionstart() -> None:
    # looptime asks the event loop policy for the loop before every test; before the first
    # async test has run, Python 3.11's policy then *creates* a loop for a sync test and
    # never closes it, and its ResourceWarning fails whichever test the GC happens to hit.
    # Marking the loop as explicitly unset makes the policy raise instead (looptime
    # expects that for sync tests).
    asyncio.set_event_loop(None)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # e2e tests (marked by tests/e2e/conftest.py) run after unit and integration tests:
    # the cheap failures come first. A stable sort keeps every other order as collected.
    items.sort(key=lambda item: item.get_closest_marker("e2e") is not None)
