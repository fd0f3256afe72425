"""A pod held at Permit: reserved on a node until every waiting plugin allows it,
one rejects it, or a plugin's timeout passes (a rejection naming that plugin)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from kubesched.framework.status import Code, Status
from kubesched.framework.types import Pod

__all__ = ["WaitingPodImpl"]


class WaitingPodImpl:
    def __init__(
        self,
        pod: Pod,
        node_name: str,
        timeouts: dict[str, float],
        on_done: Callable[[str], None],
    ) -> None:
        self._pod = pod
        self._node_name = node_name
        self._pending = set(timeouts)
        self._on_done = on_done
        loop = asyncio.get_running_loop()
        self._future: asyncio.Future[Status | None] = loop.create_future()
        self._timers = [
            loop.call_later(t, self._timeout, name) for name, t in sorted(timeouts.items())
        ]

    @property
    def pod(self) -> Pod:
        return self._pod

    @property
    def node_name(self) -> str:
        return self._node_name

    def pending_plugins(self) -> list[str]:
        return sorted(self._pending)

    def _timeout(self, plugin: str) -> None:
        self.reject(plugin, "rejected due to timeout after waiting at permit")

    def allow(self, plugin: str) -> None:
        self._pending.discard(plugin)
        if not self._pending:
            self._finish(None)

    def reject(self, plugin: str, message: str) -> None:
        self._finish(Status(Code.UNSCHEDULABLE, message, plugin=plugin))

    def _finish(self, status: Status | None) -> None:
        if self._future.done():
            return
        for t in self._timers:
            t.cancel()
        self._future.set_result(status)
        self._on_done(self._pod.uid)

    async def wait(self) -> Status | None:
        return await self._future

    def done(self) -> bool:
        return self._future.done()
