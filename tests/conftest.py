"""Suite-wide test setup."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

HELM_TESTS = Path(__file__).parent / "helm"


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


def pytest_collection_finish(session: pytest.Session) -> None:
    # The chart tests' helm binaries, built (or found in the build's cache) before any
    # test runs when CI did not name them (tests/helm/chart.py, prepare_helms).
    if any(
        HELM_TESTS in item.path.parents or "helm" in getattr(item, "fixturenames", ())
        for item in session.items
    ):
        from tests.helm.chart import prepare_helms

        prepare_helms()
