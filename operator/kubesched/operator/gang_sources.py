"""The foreign gang APIs, watched when (and while) the API server serves them.

Kubernetes' ``scheduling.k8s.io/v1beta1`` PodGroup and Workload exist only on 1.35+
clusters with the ``GenericWorkload`` gate and that API version on; scheduler-plugins'
``scheduling.x-k8s.io/v1alpha1`` PodGroup only where its CRD is installed. Each is
watched by a :class:`kubesched.cluster.informer.Informer` (LIST + WATCH into the same
``WatchRouter.dispatch`` as every other kind), started when API discovery lists the
resource and stopped when it goes away (its objects then DELETED from the store, so
their gangs wait as for a missing PodGroup). Discovery is polled every
:data:`DISCOVERY_INTERVAL` seconds: a CRD installed or an API turned on later is picked
up without a restart. Each change of what is served is logged (``gang APIs served: ...``).

A kind served but not listable by our credentials (the ClusterRole lacks ``list``/``watch``
on it: an older chart on a cluster that turned the API on) is never passed over in
silence. Before its informer starts, one ``GET ...?limit=1`` asks the API server; its 403
is :class:`GangAPIForbidden`, carrying the server's own message. In the first pass (the
initial sync) it fails ``kubesched run``, as a missing read rule for any other watched kind
does: its gangs could not be scheduled as gangs. In later passes (an API served after
start) it is logged as an ERROR at each poll and the kind is tried again at the next one,
so granting the rule is enough.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kubesched.api.gangs import STORE_KINDS, WORKLOAD_STORE_KIND, GangAPI
from kubesched.cluster.informer import Dispatch, Informer
from kubesched.cluster.kinds import LIST_PATHS
from kubesched.cluster.kube import KubeCluster
from kubesched.framework.cluster_port import ClusterError, NotFound

__all__ = ["DISCOVERY_INTERVAL", "SOURCES", "GangAPIForbidden", "GangSources", "Source"]

log = logging.getLogger("kubesched.operator.gang_sources")

Documents = Callable[[str], Awaitable[dict[str, Any] | None]]
"""``Prefetch.take_document``: a discovery document read at the start, or None."""

DISCOVERY_INTERVAL = 30.0
"""Seconds between discovery polls: how long a CRD installed later waits to be watched."""


@dataclass(frozen=True, slots=True)
class Source:
    kind: str
    """The store's kind (kubesched.api.gangs.STORE_KINDS)."""
    group_version: str
    plural: str

    @property
    def label(self) -> str:
        return f"{self.group_version} {self.kind.partition('.')[0]}"


SOURCES: tuple[Source, ...] = (
    Source(STORE_KINDS[GangAPI.UPSTREAM], GangAPI.UPSTREAM.value, "podgroups"),
    Source(WORKLOAD_STORE_KIND, GangAPI.UPSTREAM.value, "workloads"),
    Source(STORE_KINDS[GangAPI.SCHEDULER_PLUGINS], GangAPI.SCHEDULER_PLUGINS.value, "podgroups"),
)
"""The kinds watched only while served (ours, kubesched.dev, is watched by Kopf)."""


class GangAPIForbidden(ClusterError):
    """A served gang kind that the API server refuses to list to us (403)."""

    retryable = False
    code = "403"


class GangSources:
    """Discovery polls -> informers of the foreign gang kinds (see the module doc)."""

    def __init__(
        self,
        cluster: KubeCluster,
        dispatch: Dispatch,
        *,
        interval: float = DISCOVERY_INTERVAL,
        informer: Callable[[str], Informer] | None = None,
    ) -> None:
        self.cluster = cluster
        self.dispatch = dispatch
        self.interval = interval
        self._informer = informer or (lambda kind: Informer(cluster, kind, dispatch))
        self.running: dict[str, tuple[Informer, asyncio.Task[None]]] = {}
        self.served: frozenset[str] | None = None
        """Store kinds served at the last poll (None before the first)."""

    async def discover(self, prefetched: Documents | None = None) -> frozenset[str]:
        """The store kinds of :data:`SOURCES` the API server serves now. ``prefetched``:
        the start's reads of the discovery documents (``Prefetch.take_document``), taken
        instead of reading them again."""
        served: set[str] = set()
        resources: dict[str, set[str]] = {}
        for source in SOURCES:
            gv = source.group_version
            if gv not in resources:
                path = f"/apis/{gv}"
                try:
                    doc = await prefetched(path) if prefetched is not None else None
                    if doc is None:
                        doc = await self.cluster.request("GET", path)
                except NotFound:
                    doc = None
                resources[gv] = {
                    str(r.get("name"))
                    for r in ((doc or {}).get("resources") or ())
                    if isinstance(r, dict)
                }
            if source.plural in resources[gv]:
                served.add(source.kind)
        return frozenset(served)

    async def poll(self, prefetched: Documents | None = None) -> None:
        """One discovery pass: start and stop informers to match, log what changed. The
        first pass waits until the new informers listed (the initial sync)."""
        served = await self.discover(prefetched)
        if served != self.served:
            on = [s.label for s in SOURCES if s.kind in served]
            off = [s.label for s in SOURCES if s.kind not in served]
            log.info(
                "gang APIs served: kubesched.dev/v1alpha1 PodGroup (CRD)%s%s",
                "".join(f", {x}" for x in on),
                f"; not served: {', '.join(off)}" if off else "",
            )
        first = self.served is None
        self.served = served
        for source in SOURCES:
            if source.kind not in served and source.kind in self.running:
                await self._stop(source.kind)
        new = [s for s in SOURCES if s.kind in served and s.kind not in self.running]
        listable = []
        for source in new:  # all asked before any starts: a refusal starts nothing
            try:
                await self._check_listable(source)
            except GangAPIForbidden as e:
                if first:
                    raise
                log.error("%s; retrying at the next discovery poll", e)
                continue
            listable.append(source)
        started = []
        for source in listable:
            inf = self._informer(source.kind)
            task = asyncio.ensure_future(inf.run())
            self.running[source.kind] = (inf, task)
            started.append((source, inf, task))
        if first:
            for source, inf, task in started:
                # or its end: an informer that failed before it listed never syncs
                synced = asyncio.ensure_future(inf.synced.wait())
                await asyncio.wait({synced, task}, return_when=asyncio.FIRST_COMPLETED)
                synced.cancel()
                if task.done() and not inf.synced.is_set():
                    self.running.pop(source.kind, None)
                    error = None if task.cancelled() else task.exception()
                    log.warning("listing %s failed (%s): retrying at the next discovery poll",
                                source.label, error)  # fmt: skip

    async def _check_listable(self, source: Source) -> None:
        """Raise :class:`GangAPIForbidden` when the API server refuses to list
        ``source`` to us (see the module doc); other errors propagate as they are."""
        prefix, plural = LIST_PATHS[source.kind]
        try:
            await self.cluster.request("GET", f"{prefix}/{plural}", query={"limit": "1"})
        except ClusterError as e:
            if e.code != "403":
                raise
            group = source.group_version.partition("/")[0]
            raise GangAPIForbidden(
                f"{source.label} is served, but kubesched may not list it ({e}): its gangs "
                f"cannot be scheduled until list and watch on {plural}.{group} are granted "
                "(the Helm chart's ClusterRole has them)"
            ) from e

    async def start(self, prefetched: Documents | None = None) -> None:
        """The first poll (before the first cycle). A served kind we may not list fails
        it (:class:`GangAPIForbidden`, the API server's 403); any other failed discovery
        is logged and retried by :meth:`run`, never fatal: the foreign APIs are optional."""
        try:
            await self.poll(prefetched)
        except GangAPIForbidden:
            raise
        except (ClusterError, OSError, TimeoutError) as e:
            log.warning("gang API discovery failed (%s): retrying later", e)

    async def _stop(self, kind: str) -> None:
        _, task = self.running.pop(kind)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        for obj in list(self.cluster.objects.get(kind, {}).values()):
            self.dispatch(kind, "DELETED", dict(obj))
        log.info("%s is no longer served: its objects are forgotten", kind)

    async def run(self) -> None:
        """Poll until cancelled (the informers are cancelled with it)."""
        try:
            while True:
                await asyncio.sleep(self.interval)
                try:
                    await self.poll()
                except (ClusterError, OSError, TimeoutError) as e:
                    log.warning("gang API discovery failed (%s): retrying later", e)
        finally:
            # the informers end with it, before the stop closes the connections under
            # them: one still unwinding then would start closing its watch's connection
            # after the stop's wait for the connections being closed
            stopped = [task for _, task in self.running.values()]
            self.running.clear()
            for task in stopped:
                task.cancel()
            await asyncio.gather(*stopped, return_exceptions=True)

    def tasks(self) -> list[asyncio.Task[Any]]:
        return [t for _, t in self.running.values()]
