"""Kopf watch handlers: watch events -> the object store and the scheduler's EventHandlers.

With ``watch_engine: kopf`` every watched kind arrives through ``@kopf.on.event``; by
default (``direct``) they come from ``kubesched.cluster.informer`` instead, into the same
:meth:`WatchRouter.dispatch`. The handlers are stateless, so Kopf never writes an
annotation or a finalizer to a user's pod (change handlers would). Each handler only
hands the raw dict to :meth:`WatchRouter.dispatch`, which

* keeps the store (``KubeCluster.objects``) current and supplies the ``old`` object,
* turns Kopf's listing events (type ``None``) into ADDED, or MODIFIED for an object the
  store already holds, and drops replays of a version already seen,
* calls ``EventHandlers.on_event`` (cache, queues, nominator),
* reports a malformed object as a Kubernetes Event on that object, once per version.

Kopf relists after a watch expires (410 Gone) but reports nothing for objects deleted
while it was disconnected (the informers do). :meth:`WatchRouter.reconcile` closes that
gap: it lists kinds from the API server and synthesizes DELETED for objects the store
still holds but the server no longer has. ``run`` lists every kind with it at start
(those the informers do not list), for pods and nodes periodically (``resync_seconds``),
and for Kopf's kinds after Kopf's own first listing.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any

from kubesched.cluster.kinds import OPTIONAL_KINDS, WATCHED, Kind
from kubesched.cluster.kube import KubeCluster
from kubesched.cluster.prefetch import Page, Prefetched
from kubesched.framework.cluster_port import NotFound
from kubesched.scheduler.eventhandlers import EventHandlers

if TYPE_CHECKING:  # Kopf is imported once the cache is synced (see operator/run.py)
    import kopf

__all__ = ["DIRECT_KINDS", "WatchRouter", "build_registry"]

log = logging.getLogger("kubesched.operator.handlers")

Obj = Mapping[str, Any]


def _rv(obj: Obj) -> int | None:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or "")
    except ValueError:
        return None


def _uid(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


class WatchRouter:
    """The one path from a watch (or a relist) into the store and the scheduler."""

    def __init__(
        self,
        cluster: KubeCluster,
        *,
        scheduler_names: Collection[str],
        reporting_controller: str,
    ) -> None:
        self.cluster = cluster
        self.scheduler_names = frozenset(scheduler_names)
        self.reporting_controller = reporting_controller
        self.handlers: EventHandlers | None = None
        self._reported: dict[str, str] = {}
        """uid -> resourceVersion of the last malformed version reported."""
        self.listeners: list[Callable[[str, str, Obj, Obj | None], None]] = []
        """Called after EventHandlers with every delivered event (e.g. PodGroup status)."""

    def attach(self, handlers: EventHandlers) -> None:
        self.handlers = handlers

    # -- the start's held pods (kubesched.scheduler.held_pods) ------------------------------------
    def hold_pending(self) -> None:
        """Let the scheduler hold back the plain pending pods the listings deliver from
        now on (``Scheduler.hold_pending``): this router offers it each one."""
        if self.handlers is not None:
            self.handlers.sched.hold_pending(self._deliver_added_pod)

    def _deliver_added_pod(self, obj: Obj) -> None:
        self._deliver("Pod", "ADDED", obj, None)

    # -- events ---------------------------------------------------------------------------------
    def dispatch(self, kind: str, event_type: str | None, obj: dict[str, Any]) -> None:
        """``event_type``: ADDED, MODIFIED, DELETED, or None (Kopf's listing)."""
        held = None
        if self.handlers is not None:
            sched = self.handlers.sched
            held = sched.held
            if held is not None and not held.holding:
                sched.release_held()  # news after the start's listing: the held pods first
                held = None
        store = self.cluster
        if event_type == "DELETED":
            gone = store.remove(kind, obj)
            if gone is None:
                return  # never seen, or already deleted by a reconciliation
            self._reported.pop(_uid(obj), None)
            self._deliver(kind, "DELETED", obj, None)
            return
        if event_type not in (None, "ADDED", "MODIFIED"):
            return  # BOOKMARK and the like carry no object change
        old: Obj | None = store.get(
            kind,
            str((obj.get("metadata") or {}).get("namespace") or ""),
            str((obj.get("metadata") or {}).get("name") or ""),
        )
        if old is not None:
            if _uid(old) != _uid(obj):
                # Deleted and re-created while we were not watching: two events.
                store.remove(kind, old)
                self._deliver(kind, "DELETED", old, None)
                old = None
            else:
                new_rv, old_rv = _rv(obj), _rv(old)
                if new_rv is not None and old_rv is not None and new_rv <= old_rv:
                    return  # a replay (relist) of what we hold, or older
        store.put(kind, obj)
        if held is not None and old is None and kind == "Pod" and held.hold(obj):
            return
        self._deliver(kind, "ADDED" if old is None else "MODIFIED", obj, old)

    def _deliver(self, kind: str, event_type: str, obj: Obj, old: Obj | None) -> None:
        if self.handlers is None:
            return
        try:
            self.handlers.on_event(kind, event_type, obj, old)
            for listener in self.listeners:
                listener(kind, event_type, obj, old)
        except Exception:  # a bug in a handler must not stop the watch
            meta = obj.get("metadata") or {}
            log.exception(
                "handling %s %s %s/%s failed",
                event_type,
                kind,
                meta.get("namespace") or "",
                meta.get("name"),
            )

    def on_bad_object(self, kind: str, obj: Obj, message: str) -> None:
        """EventHandlers' callback: an Event on the object, once per version."""
        meta = obj.get("metadata") or {}
        uid, rv = _uid(obj), str(meta.get("resourceVersion") or "")
        log.warning("skipping malformed %s: %s", kind, message)
        if kind == "Pod":
            spec = obj.get("spec")
            name = spec.get("schedulerName") if isinstance(spec, Mapping) else None
            if (name or "default-scheduler") not in self.scheduler_names:
                return  # not ours to complain about
            controller = str(name or self.reporting_controller)
            reason, action = "FailedScheduling", "Scheduling"
        else:
            controller, reason, action = self.reporting_controller, "InvalidObject", "Watching"
        if not uid or self._reported.get(uid) == rv:
            return
        self._reported[uid] = rv
        ref = {
            "apiVersion": str(obj.get("apiVersion") or "v1"),
            "kind": kind,
            "name": str(meta.get("name") or ""),
            "uid": uid,
        }
        if meta.get("namespace"):
            ref["namespace"] = str(meta["namespace"])
        self.cluster.post_event(
            ref,
            event_type="Warning",
            reason=reason,
            action=action,
            message=message,
            reporting_controller=controller,
        )

    # -- relist -----------------------------------------------------------------------------------
    async def reconcile(
        self, kinds: Collection[str] = ("Node", "Pod"), *, prefetched: Prefetched | None = None
    ) -> int:
        """List ``kinds`` from the API server (a consistent read) and make the store agree:
        newer versions are applied, objects the server no longer has are DELETED.
        Returns the number of deletions synthesized. ``prefetched``: a kind's first
        listing, made ahead (:meth:`kubesched.cluster.prefetch.Prefetch.take`), taken
        instead of listing (a kind it has none of is listed). It may be older than what
        the store holds, so it synthesizes no deletions (at the initial sync, the only
        caller, the store holds none of the kind yet)."""
        deleted = 0
        for kind in kinds:
            try:  # the prefetch raises NotFound as the LIST would (an optional kind)
                pages = await prefetched(kind) if prefetched is not None else None
                store = self.cluster.objects.get(kind, {}) if pages is None else {}
                before = {key: _uid(o) for key, o in store.items()}
                listed: set[tuple[str, str]] = set()
                source = self.cluster.list_pages(kind) if pages is None else _replay(pages)
                # page by page: one page of decoded JSON at a time, not thousands of pods
                async for items, _ in source:
                    for item in items:
                        item.setdefault("kind", kind)
                        listed.add((self.cluster.key_of(kind, item), _uid(item)))
                        self.dispatch(kind, None, item)
            except NotFound:
                if kind not in OPTIONAL_KINDS:
                    raise
                log.info("%s is not served (its CRD is not installed): none listed", kind)
                continue
            store = self.cluster.objects.get(kind, {})
            for key, uid in before.items():
                current = store.get(key)
                if (key, uid) in listed or current is None or _uid(current) != uid:
                    continue  # still there, or the watch already caught up
                log.info("%s %s is gone from the API server: forgetting it", kind, key)
                self.dispatch(kind, "DELETED", current)
                deleted += 1
        return deleted


async def _replay(pages: list[Page]) -> AsyncIterator[Page]:
    for page in pages:
        yield page


DIRECT_KINDS = frozenset(w.kind for w in WATCHED)
"""Watched by ``kubesched.cluster.informer`` instead of Kopf with ``watch_engine: direct``:
every watched kind. Each informer watches from its own listing's resourceVersion (so a
deletion between the start's listing and the watch arrives as an event) and
synthesizes DELETED on a relist after 410 Gone, which Kopf's watches do not."""


def build_registry(router: WatchRouter, *, skip: Collection[str] = ()) -> kopf.OperatorRegistry:
    """A registry of its own (not Kopf's global one), so tests can build several.
    ``skip``: kinds watched otherwise (the direct informers)."""
    import kopf

    registry = kopf.OperatorRegistry()
    for w in WATCHED:
        if w.kind not in skip:
            _register(registry, router, w)
    return registry


def _register(registry: kopf.OperatorRegistry, router: WatchRouter, w: Kind) -> None:
    import kopf

    group, _, version = w.group_version.rpartition("/")
    kind = w.kind

    async def on_event(event: Mapping[str, Any], **_: Any) -> None:
        obj = event.get("object")
        if isinstance(obj, dict):
            router.dispatch(kind, event.get("type"), obj)

    handler: Callable[..., Any] = on_event
    handler.__name__ = handler.__qualname__ = f"watch_{w.plural}"
    kopf.on.event(group, version, w.plural, registry=registry, id=f"watch-{w.plural}")(handler)
