"""The allocator's time limit (kube-scheduler's DynamicResourcesArgs ``filterTimeout``,
DRASchedulerFilterTimeout, beta and on in 1.37).

kube's Filter gives the structured allocator a context with a deadline; the search checks
it on every step (``allocateOne``) and stops with ``context.DeadlineExceeded``. Here the
search steps hold a ``Deadline`` on the injected clock (the framework's ``Handle.now``:
the event loop's time, virtual in tests) and read the clock once every ``every`` steps,
so a search that fits its time pays a counter decrement per step, not a clock read. A
search shorter than ``every`` steps is never cut off (it is over in well under a
millisecond).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["CHECK_EVERY", "AllocationTimeout", "Deadline"]

CHECK_EVERY = 64
"""Search steps between clock reads: one step costs a few microseconds, so a search
overruns its limit by well under a millisecond."""


class AllocationTimeout(Exception):
    """The search ran past its deadline (kube: ``context.DeadlineExceeded``)."""


class Deadline:
    """A point on ``clock`` that the search must not pass."""

    __slots__ = ("at", "clock", "every", "left")

    def __init__(self, clock: Callable[[], float], at: float, every: int = CHECK_EVERY) -> None:
        self.clock = clock
        self.at = at
        self.every = every
        self.left = every
        """Steps until the next clock read (the search decrements it)."""

    def check(self) -> None:
        """Read the clock (the search calls it when ``left`` reaches zero); raises
        ``AllocationTimeout`` once the deadline has passed."""
        self.left = self.every
        if self.clock() >= self.at:
            raise AllocationTimeout
