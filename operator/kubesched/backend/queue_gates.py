"""The PreEnqueue plugins of one profile's queue: whether a pod may enter activeQ (or,
with SchedulerPopFromBackoffQ, backoffQ), or waits in the gated pool; and that pool."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, ItemsView, Sequence, ValuesView

from kubesched.framework.interface import PreEnqueuePlugin
from kubesched.framework.nodeinfo import QueuedPodInfo

__all__ = ["GatedPool", "PreEnqueueGate"]

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


class GatedPool:
    """The gated pool: the pods a PreEnqueue plugin holds, by uid in the order they came,
    and by the plugin holding each (:attr:`QueuedPodInfo.gating_plugin
    <kubesched.framework.nodeinfo.QueuedPodInfo.gating_plugin>`, set only while a pod is
    out of the pool), so that an event only one plugin registered for looks at that
    plugin's pods, not at every gated pod (thousands of gated pods, an event every bind)."""

    __slots__ = ("_by_plugin", "_plugin_of", "_pods")

    def __init__(self) -> None:
        self._pods: dict[str, QueuedPodInfo] = {}
        self._plugin_of: dict[str, str] = {}
        self._by_plugin: dict[str, dict[str, QueuedPodInfo]] = {}

    def __len__(self) -> int:
        return len(self._pods)

    def __bool__(self) -> bool:
        return bool(self._pods)

    def __contains__(self, uid: str) -> bool:
        return uid in self._pods

    def get(self, uid: str) -> QueuedPodInfo | None:
        return self._pods.get(uid)

    def values(self) -> ValuesView[QueuedPodInfo]:
        return self._pods.values()

    def items(self) -> ItemsView[str, QueuedPodInfo]:
        return self._pods.items()

    def put(self, qpi: QueuedPodInfo) -> None:
        """Hold ``qpi`` (gated by its ``gating_plugin``), last in order."""
        uid = qpi.pod.uid
        self.pop(uid)
        self._pods[uid] = qpi
        self._plugin_of[uid] = qpi.gating_plugin
        self._by_plugin.setdefault(qpi.gating_plugin, {})[uid] = qpi

    def pop(self, uid: str) -> QueuedPodInfo | None:
        qpi = self._pods.pop(uid, None)
        if qpi is not None:
            plugin = self._plugin_of.pop(uid)
            group = self._by_plugin[plugin]
            del group[uid]
            if not group:
                del self._by_plugin[plugin]
        return qpi

    def held_by(self, plugins: Collection[str]) -> list[QueuedPodInfo]:
        """The pods these plugins hold, in the pool's order."""
        groups = [g for p in plugins if (g := self._by_plugin.get(p))]
        if not groups:
            return []
        if len(groups) == 1:
            return list(groups[0].values())
        plugin_of = self._plugin_of
        return [q for uid, q in self._pods.items() if plugin_of[uid] in plugins]
