"""A lean informer: LIST + WATCH of one kind, each event decoded with orjson into a dict.

``kubesched run --watch-engine direct`` (the default) feeds every watched kind (pods,
nodes, budgets, volumes, the DRA kinds, PodGroups, ...: ``kinds.WATCHED``) through this
instead of Kopf's per-event machinery (per-object memories, loggers, throttler, indexing,
diffbase essence and diff, per-object worker tasks, batching), which was 20-27% of the
event loop at a few hundred pods a second (see docs/bench.md). Kopf keeps the handlers
that act on objects: the SchedulingProfiles' change handlers.

The protocol, as client-go's reflector:

* LIST (pages of ``limit``, each delivered as it arrives) gives the objects and a
  resourceVersion; each item is delivered with type ``None`` ("listed": the router makes
  it ADDED, or MODIFIED, or drops it as a replay of a version it holds);
* WATCH from that resourceVersion with ``allowWatchBookmarks``; ``BOOKMARK`` events only
  move the resourceVersion; a watch the server ends (``timeoutSeconds``) is resumed from
  the last resourceVersion at once;
* ``410 Gone`` (as the watch's HTTP status or as an ``ERROR`` event) -> relist, and every
  object delivered before that the listing no longer has gets a synthesized ``DELETED``
  (its last version seen): deletions missed while the watch was behind are not lost;
* any other failure (connection, timeout, 5xx, a broken line) -> reconnect from the last
  resourceVersion after a backoff (``backoff_initial`` doubling up to ``backoff_max``,
  reset once a watch delivers);
* an optional kind (``kinds.OPTIONAL_KINDS``: a CRD not installed, an API group the
  server does not serve) answering ``404`` is an empty listing: what was delivered
  before is DELETED, the informer counts as synced, and it lists again every
  ``absent_poll`` seconds, so a CRD installed later is watched without a restart.

Objects are trimmed (:func:`kubesched.cluster.managed_fields.trim`: no ``managedFields``) before they
are delivered. The requests go through :meth:`KubeCluster.open
<kubesched.cluster.kube_http.KubeHTTP.open>` (our sessions, with the configuration's auth).
The informer only reads: nothing is ever written to the watched objects.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson

from kubesched.cluster import aio
from kubesched.cluster.kinds import LIST_PATHS, OPTIONAL_KINDS, REQUIRED_KINDS
from kubesched.cluster.kube import KubeCluster
from kubesched.cluster.managed_fields import STRUCT_ORDER_KINDS, trim, without_managed_fields
from kubesched.cluster.prefetch import Page
from kubesched.framework.cluster_port import ClusterError, NotFound

__all__ = ["Dispatch", "Informer", "Lines", "WatchGone"]

log = logging.getLogger("kubesched.cluster.informer")

Dispatch = Callable[[str, str | None, dict[str, Any]], None]
"""``(kind, event_type, obj)``: event_type is ADDED, MODIFIED, DELETED or None (listed)."""


class WatchGone(Exception):
    """410 Gone: the resourceVersion is too old; a relist is needed."""


class Informer:
    """LIST + WATCH of ``kind`` into ``dispatch`` until cancelled (see the module doc)."""

    def __init__(
        self,
        cluster: KubeCluster,
        kind: str,
        dispatch: Dispatch,
        *,
        server_timeout: int = 300,
        client_timeout: float = 330.0,
        connect_timeout: float = 10.0,
        page_size: int = 500,
        backoff_initial: float = 0.5,
        backoff_max: float = 30.0,
        absent_poll: float = 60.0,
        watch_after: asyncio.Event | None = None,
        prefetched: Callable[[], Awaitable[list[Page] | None]] | None = None,
    ) -> None:
        prefix, plural = LIST_PATHS[kind]
        self.cluster = cluster
        self.kind = kind
        self.path = f"{prefix}/{plural}"
        self.dispatch = dispatch
        self.server_timeout = server_timeout
        self.client_timeout = client_timeout
        self.connect_timeout = connect_timeout
        self.page_size = page_size
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.resource_version = ""
        self.known: dict[str, dict[str, Any]] = {}
        """key -> the last version delivered (for the deletions a relist reveals)."""
        self.synced = asyncio.Event()
        """Set after the first listing was delivered."""
        self.lists = 0
        self.watches = 0
        self.optional = kind in OPTIONAL_KINDS
        self.absent_poll = absent_poll
        self.served: bool | None = None
        """Whether the last listing found the kind served (None before the first)."""
        self.watch_after = watch_after
        """The first watch waits for it (after the first listing): nothing is missed, the
        watch starts from the listing's resourceVersion (see ``run``'s start-up)."""
        self.prefetched = prefetched
        """The first listing, made ahead (:mod:`kubesched.cluster.prefetch`); None when
        it was not (the informer lists then)."""

    # -- the loop ---------------------------------------------------------------------------------
    async def run(self) -> None:
        backoff = self.backoff_initial
        need_list = True
        while True:
            try:
                if need_list:
                    if not await self.relist():
                        await asyncio.sleep(self.absent_poll)  # not served: look again
                        continue
                    need_list = False
                    backoff = self.backoff_initial
                if self.watch_after is not None:
                    await self.watch_after.wait()
                    self.watch_after = None
                delivered = await self.watch()
                if delivered:
                    backoff = self.backoff_initial
                continue  # the server ended the watch: resume at once
            except asyncio.CancelledError:
                raise
            except WatchGone as e:
                log.info("%s watch: %s: relisting", self.kind,
                         str(e) or f"resourceVersion {self.resource_version} is gone")  # fmt: skip
                need_list = True
                continue
            except aio.errors(ClusterError, TimeoutError, ValueError) as e:
                if (
                    isinstance(e, ClusterError)
                    and (e.code == "403" or (e.code == "404" and self.kind in REQUIRED_KINDS))
                    and not self.synced.is_set()
                ):
                    # Not allowed to list at all, or a kind that must be served is not:
                    # start-up fails with the API server's words (kube-scheduler would
                    # wait forever for this cache), instead of retrying in the background
                    # while nothing is ever scheduled.
                    raise
                log.warning("%s watch failed (%s: %s): retrying in %.1fs", self.kind,
                            type(e).__name__, e, backoff)  # fmt: skip
            await asyncio.sleep(backoff)
            backoff = min(self.backoff_max, backoff * 2)

    # -- LIST ---------------------------------------------------------------------------------------
    async def relist(self) -> bool:
        """One LIST, delivered page by page as each arrives, so the whole listing's
        decoded JSON never piles up before the first object is handled. The pages are one
        consistent snapshot (the continue token pins the first page's resourceVersion),
        so delivering them one by one is the same as delivering the whole listing; a
        listing that fails halfway leaves ``known`` as it was and the next relist starts
        over (what was delivered is real state, and replays of it are dropped). False:
        an optional kind the API server does not serve (404), listed as none."""
        key_of, kind, dispatch = self.cluster.key_of, self.kind, self.dispatch
        before: dict[str, dict[str, Any]] = self.known
        known: dict[str, dict[str, Any]] = {}
        rv = ""
        served = True
        try:
            async for items, page_rv in self._pages():
                rv = page_rv or rv
                for item in items:
                    item.setdefault("kind", kind)
                    known[key_of(kind, item)] = item
                    dispatch(kind, None, item)
        except NotFound:
            if not self.optional:
                raise
            served, rv = False, ""
            before = {**before, **known}  # a CRD deleted between two pages: all of it
            known = {}
        if served != self.served and (served is False or self.served is False):
            if served:
                log.info("%s is served now: %d listed", kind, len(known))
            else:
                log.info("%s is not served (its CRD is not installed, or its API group is off):"
                         " none listed; looking again every %.0f s", kind, self.absent_poll)  # fmt: skip
        self.served = served
        self.lists += 1
        self.known = known
        self.resource_version = rv
        for key, last in before.items():
            now = known.get(key)
            if now is not None and _uid(now) == _uid(last):
                continue
            if now is None:
                log.info("%s %s vanished while the watch was behind: DELETED", kind, key)
            self.dispatch(kind, "DELETED", last)  # gone, or re-created under a new uid
        self.synced.set()
        return served

    async def _pages(self) -> AsyncIterator[Page]:
        prefetched, self.prefetched = self.prefetched, None
        pages = await prefetched() if prefetched is not None else None
        if pages is not None:
            for page in pages:
                yield page
            return
        async for page in self.cluster.list_pages(self.kind, self.page_size):
            yield page

    # -- WATCH --------------------------------------------------------------------------------------
    async def watch(self) -> int:
        """One watch request; returns the number of events delivered."""
        query = {
            "watch": "1",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(self.server_timeout),
        }
        if self.resource_version:
            query["resourceVersion"] = self.resource_version
        self.watches += 1
        delivered = 0
        async with self.cluster.open(
            "GET", self.path, query=query, total=self.client_timeout, connect=self.connect_timeout
        ) as resp:
            if resp.status == 410:
                raise WatchGone()
            if resp.status == 404 and self.optional:
                # the relist finds it gone and deletes what it held
                raise WatchGone("not served any more (404)")
            if resp.status != 200:
                body = await resp.read()
                raise ClusterError(f"watch {self.path}: {resp.status} {body[:200]!r}")
            lines = Lines()
            cut = self.kind in STRUCT_ORDER_KINDS
            async for chunk in resp.content.iter_any():
                for line in lines.feed(chunk):
                    self._event(orjson.loads(without_managed_fields(line) if cut else line))
                    delivered += 1
        return delivered

    def _event(self, event: dict[str, Any]) -> None:
        kind = self.kind
        event_type = event.get("type")
        obj = event.get("object")
        if not isinstance(obj, dict):
            return
        if event_type == "ERROR":
            if obj.get("code") == 410:
                raise WatchGone()
            raise ClusterError(f"watch {self.path}: {obj.get('code')} {obj.get('message')}")
        meta = obj.get("metadata") or {}
        rv = meta.get("resourceVersion")
        if rv:
            self.resource_version = str(rv)
        if event_type == "BOOKMARK":
            return
        trim(obj)
        key = self.cluster.key_of(kind, obj)
        if event_type == "DELETED":
            self.known.pop(key, None)
        elif event_type in ("ADDED", "MODIFIED"):
            self.known[key] = obj
        else:
            return
        self.dispatch(kind, event_type, obj)


class Lines:
    """A watch stream's events, one JSON document a line, out of the reads as they come.
    The pieces of a line not yet ended are kept as read and joined once, when its end
    arrives: an event longer than a read (a node listing many images, an object with
    large annotations) costs one copy, not one per read."""

    __slots__ = ("_pieces",)

    def __init__(self) -> None:
        self._pieces: list[bytes] = []
        """The unfinished line, as read (none: the last read ended a line)."""

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines ``chunk`` ends (empty ones left out), without their newlines."""
        if b"\n" not in chunk:
            if chunk:
                self._pieces.append(chunk)
            return []
        lines = chunk.split(b"\n")
        if self._pieces:
            self._pieces.append(lines[0])
            lines[0] = b"".join(self._pieces)
            self._pieces = []
        rest = lines.pop()
        if rest:
            self._pieces.append(rest)
        return [line for line in lines if line]

    def pending(self) -> list[bytes]:
        """The pieces of the unfinished line, as read."""
        return list(self._pieces)


def _uid(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")
