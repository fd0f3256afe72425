"""Suite-wide test setup."""

from __future__ import annotations

import asyncio


def pytest_sessionstart() -> None:
    # looptime asks the event loop policy for the loop before every test; before the first
    # async test has run, Python 3.11's policy then *creates* a loop for a sync test and
    # never closes it, and its ResourceWarning fails whichever test the GC happens to hit.
    # Marking the loop as explicitly unset makes the policy raise instead (looptime
    # expects that for sync tests).
    asyncio.set_event_loop(None)
