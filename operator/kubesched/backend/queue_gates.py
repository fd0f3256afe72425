"""The PreEnqueue plugins of one profile's queue: whether a pod may enter activeQ (or,
with SchedulerPopFromBackoffQ, backoffQ), or waits in the gated pool."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from kubesched.framework.interface import PreEnqueuePlugin
from kubesched.framework.nodeinfo import QueuedPodInfo

__all__ = ["PreEnqueueGate"]

log = logging.getLogger("kubesched.backend.queue")


class PreEnqueueGate:
    """Runs the PreEnqueue plugins on a pod, the one that gated it last first, and
    records the outcome on it (``gated``, ``gating_plugin``, ``message``)."""

    def __init__(self, plugins: Sequence[PreEnqueuePlugin]) -> None:
        self.plugins = tuple(plugins)
        self.observe: Callable[[float], None] | None = None
        """Called with the seconds each run took, plugins or none (kube-scheduler's
        PreEnqueue extension point duration)."""

    def passes(self, qpi: QueuedPodInfo) -> bool:
        if (observe := self.observe) is None:
            return self._passes(qpi)
        t0 = time.perf_counter()
        try:
            return self._passes(qpi)
        finally:
            observe(time.perf_counter() - t0)

    def _passes(self, qpi: QueuedPodInfo) -> bool:
        plugins = self.plugins
        if not plugins:
            return True
        if qpi.gating_plugin:
            plugins = tuple(sorted(plugins, key=lambda p: p.name != qpi.gating_plugin))
        for pl in plugins:
            try:
                status = pl.pre_enqueue(qpi.pod)
            except Exception as e:  # a broken plugin gates the pod; the loop goes on
                log.exception("PreEnqueue plugin %s failed on pod %s", pl.name, qpi.pod.key)
                qpi.gated, qpi.gating_plugin, qpi.message = True, pl.name, str(e)
                return False
            if status is not None and not status.is_success():
                qpi.gated, qpi.gating_plugin, qpi.message = True, pl.name, status.message()
                qpi.flushed = False  # kube: a flushed pod gated again is no longer counted
                return False
        qpi.gated, qpi.gating_plugin = False, ""
        return True
