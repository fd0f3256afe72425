"""The allocator's time limit (kube-scheduler's DynamicResourcesArgs ``filterTimeout``,
DRASchedulerFilterTimeout, beta and on in 1.37).

kube's Filter gives the structured allocator a context with a deadline; the search checks
it on every step (``allocateOne``) and stops with ``context.DeadlineExceeded``. Here a
search holds a ``Deadline`` on the injected clock (the framework's ``Handle.now``: the
event loop's time, virtual in tests) that reads the clock once every ``CHECK_EVERY``
steps: the first read starts the limit, a later one past it stops the search. So a
search that ends within ``CHECK_EVERY`` steps (most: well under a millisecond) never
reads the clock, and one that runs on pays a counter decrement per step; the limit
starts at most ``CHECK_EVERY`` steps late.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["CHECK_EVERY", "AllocationTimeout", "Deadline", "TimeLimit"]

CHECK_EVERY = 64
"""Search steps between clock reads: a step costs a few microseconds, so a search
overruns its limit by well under a millisecond."""


class AllocationTimeout(Exception):
    """The search ran past its deadline (kube: ``context.DeadlineExceeded``)."""


@dataclass(frozen=True, slots=True)
class TimeLimit:
    """How long one search may take, on ``clock`` (seconds)."""

    clock: Callable[[], float]
    seconds: float


class Deadline:
    """One search's limit; the search decrements ``left`` per step and calls ``check``
    when it reaches zero."""

    __slots__ = ("at", "left", "limit")

    def __init__(self, limit: TimeLimit) -> None:
        self.limit = limit
        self.at: float | None = None
        self.left = CHECK_EVERY

    def check(self) -> None:
        """Read the clock: the first read starts the limit; ``AllocationTimeout`` once
        it has passed. A clock that cannot be read (``RuntimeError``: no running event
        loop, a pure caller) sets no limit."""
        self.left = CHECK_EVERY
        try:
            now = self.limit.clock()
        except RuntimeError:
            self.left = 1 << 62
            return
        if self.at is None:
            self.at = now + self.limit.seconds
        elif now >= self.at:
            raise AllocationTimeout
