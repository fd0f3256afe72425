"""An event loop with virtual time, for the simulator.

When every task is waiting on a timer, the loop jumps its clock to the next timer
instead of sleeping, so backoffs and Permit timeouts cost no wall time while the
scheduler's logic sees exactly the delays it asked for. The simulator does no I/O, so
nothing else can wake the loop.
"""

from __future__ import annotations

import asyncio
import selectors
from typing import Any

__all__ = ["VirtualTimeLoop"]


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        super().__init__(selectors.SelectSelector())
        self._virtual_now = 0.0
        selector: Any = self._selector  # type: ignore[attr-defined]
        real_select = selector.select

        def select(timeout: float | None = None) -> Any:
            if timeout is not None and timeout > 0:
                self._virtual_now += timeout
            return real_select(0 if timeout is not None else None)

        selector.select = select

    def time(self) -> float:
        return self._virtual_now
