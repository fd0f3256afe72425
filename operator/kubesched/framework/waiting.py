"""A pod held at Permit: reserved on a node until every waiting plugin allows it,
one rejects it, or a plugin's timeout passes (a rejection naming that plugin)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from kubesched.framework.status import Code, Status
from kubesched.framework.types import Pod

__all__ = ["PodInPreBind", "WaitingPodImpl"]


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
        # One timer per plugin: a plugin that allows stops its own timer (kube's Allow).
        self._timers = {
            name: loop.call_later(t, self._timeout, name, t) for name, t in sorted(timeouts.items())
        }

    @property
    def pod(self) -> Pod:
        return self._pod

    @property
    def node_name(self) -> str:
        return self._node_name

    def pending_plugins(self) -> list[str]:
        return sorted(self._pending)

    def _timeout(self, plugin: str, seconds: float) -> None:
        self.reject(
            plugin, f"rejected due to timeout after waiting {_duration(seconds)} at plugin {plugin}"
        )

    def allow(self, plugin: str) -> None:
        timer = self._timers.pop(plugin, None)
        if timer is not None:
            timer.cancel()
        self._pending.discard(plugin)
        if not self._pending:
            self._finish(None)

    def reject(self, plugin: str, message: str) -> None:
        self._finish(Status(Code.UNSCHEDULABLE, message, plugin=plugin))

    def preempt(self, plugin: str, message: str) -> None:
        """Evicted by preemption (kube's ``Preempt``): an error, not a rejection."""
        self._finish(Status(Code.ERROR, message, plugin=plugin))

    def _finish(self, status: Status | None) -> None:
        if self._future.done():
            return
        for t in self._timers.values():
            t.cancel()
        self._future.set_result(status)
        self._on_done(self._pod.uid)

    async def wait(self) -> Status | None:
        return await self._future

    def done(self) -> bool:
        return self._future.done()


class PodInPreBind:
    """A pod whose PreBind plugins are running (kube's podInPreBind): preemption cancels it
    here, in memory, instead of deleting it, and its binding cycle, once PreBind is done,
    fails with the cause instead of binding (:meth:`mark_prebound`)."""

    __slots__ = ("canceled", "cause", "finished")

    def __init__(self) -> None:
        self.canceled = False
        self.finished = False
        self.cause = ""

    def cancel(self, message: str) -> bool:
        """Cancel the binding (True), unless PreBind is over: the pod is being bound."""
        if self.finished:
            return False
        if not self.canceled:
            self.cause = message
        self.canceled = True
        return True

    def mark_prebound(self) -> bool:
        """PreBind is done: bind (True), unless it was cancelled meanwhile."""
        if self.canceled:
            return False
        self.finished = True
        return True


def _duration(seconds: float) -> str:
    """Go's ``time.Duration`` text for the common cases: 500ms, 10s, 1m30s, 1h0m0s."""
    if seconds == 0:
        return "0s"
    if seconds < 1:
        return f"{seconds * 1000:g}ms"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    out = f"{secs:g}s"
    if hours or minutes:
        out = f"{int(minutes)}m{out}"
    if hours:
        out = f"{int(hours)}h{out}"
    return out
