"""The real-cluster adapter: ClusterPort writes, Events and the ObjectStore over the API server.

Every request goes through :class:`~kubesched.cluster.kube_http.KubeHTTP`, KubeCluster's
base class (:mod:`kubesched.cluster.kube_http`): aiohttp sessions of our own per
connection pool, bodies serialized once with orjson, none of kubernetes_asyncio's
generated models, and the API server's answers mapped to the ClusterPort's errors (404 ->
:class:`NotFound`, 409 -> :class:`Conflict`, 429, 5xx, timeouts and lost connections ->
a retryable :class:`ClusterError`, other 4xx -> one with ``retryable=False``).
DynamicResources' claim writes are made as :mod:`kubesched.cluster.kube_claims` says.

Events are fire-and-forget: :meth:`KubeCluster.record_event` puts the write on the
bounded queue of an :class:`~kubesched.cluster.event_writer.EventWriter` and returns;
its writers (``event_writers``, one write in flight each) drain it. A failed write is
logged and never fails a binding or a status update; when the queue is full (the API
server cannot keep up) the Event is dropped and counted. :meth:`KubeCluster.aclose`
writes what is queued within a bounded time (a graceful stop).

The store half (:meth:`get`, :meth:`list`) holds the watched objects as plain dicts
(what :meth:`list_pages` and the informers decode is trimmed first:
:func:`~kubesched.cluster.managed_fields.trim`),
kind -> key -> object, kept by the operator's watch handlers (:meth:`put`,
:meth:`remove`). Keys are ``namespace/name`` or, for cluster-scoped kinds, ``name``.
"""

from __future__ import annotations

import builtins
import copy
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import orjson
from kubernetes_asyncio import client as k8s_client

from kubesched.api.meta import micro_time, rfc3339
from kubesched.cluster import kube_claims
from kubesched.cluster.event_writer import EventWriter, QueuedEvent
from kubesched.cluster.kinds import LIST_PATHS, in_namespace, object_key
from kubesched.cluster.kube_http import STRATEGIC_MERGE, KubeHTTP
from kubesched.cluster.managed_fields import (
    STRUCT_ORDER_KINDS,
    decode_list,
    without_managed_fields,
)
from kubesched.cluster.sessions import EVENTS, LISTS, RateLimiter
from kubesched.framework.cluster_port import (
    ClusterError,
    Conflict,
    NotFound,
    PodCondition,
    condition_of,
)
from kubesched.framework.types import Pod

__all__ = [
    "LIST_PAGE_SIZE",
    "KubeCluster",
]


Obj = Mapping[str, Any]

NOTE_MAX_BYTES = 1024
"""events.k8s.io/v1 rejects a ``note`` longer than 1 kB; longer messages are cut."""

LIST_PAGE_SIZE = 500
"""Objects per LIST request (``limit``; client-go's reflector pages by 500 too)."""


def _truncate(text: str, limit: int = NOTE_MAX_BYTES) -> str:
    raw = text.encode()
    if len(raw) <= limit:
        return text
    return raw[: limit - 3].decode(errors="ignore") + "..."


class KubeCluster(KubeHTTP):
    """ClusterPort + ObjectStore for a real API server (see the module docstring); its
    requests are :class:`KubeHTTP`'s."""

    def __init__(
        self,
        cfg: k8s_client.Configuration,
        *,
        reporting_instance_suffix: str,
        qps: float = 50.0,
        burst: int = 100,
        request_timeout: float = 30.0,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        event_queue_size: int = 10000,
        event_writers: int = 16,
    ) -> None:
        super().__init__(
            cfg, qps=qps, burst=burst, request_timeout=request_timeout, event_writers=event_writers
        )
        self.reporting_instance_suffix = reporting_instance_suffix
        """``reportingInstance`` is ``<scheduler name>-<suffix>`` (the hostname)."""
        self._now = now
        # A bucket of the Events' own (the writes': KubeHTTP's), as kube-scheduler uses a
        # separate client for events: a burst of FailedScheduling events never delays a
        # binding.
        self._events = RateLimiter(qps, burst)
        self.event_queue_size = event_queue_size
        self.event_writer: EventWriter | None = None
        """The Event writer, made at the first Event (``event_queue_size``,
        ``event_writers`` as they are then)."""
        self.objects: dict[str, dict[str, dict[str, Any]]] = {}

    # -- ClusterPort ----------------------------------------------------------------------------
    async def bind(self, pod: Pod, node_name: str) -> None:
        # The response is a Status (or the Binding): neither is read into a model.
        await self.send(
            "POST",
            f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/binding",
            orjson.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Binding",
                    "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
                }
            ),
        )

    async def record_event(
        self,
        regarding: Pod,
        *,
        event_type: str,
        reason: str,
        action: str,
        message: str,
        reporting_controller: str,
        related: Pod | None = None,
    ) -> None:
        ref = _pod_ref(regarding)
        self.post_event(
            ref,
            event_type=event_type,
            reason=reason,
            action=action,
            message=message,
            reporting_controller=reporting_controller,
            related=_pod_ref(related) if related is not None else None,
        )

    def post_event(
        self,
        regarding: Mapping[str, str],
        *,
        event_type: str,
        reason: str,
        action: str,
        message: str,
        reporting_controller: str,
        related: Mapping[str, str] | None = None,
    ) -> None:
        """Queue an events.k8s.io/v1 Event about any object reference; never raises."""
        now = self._now()
        namespace = regarding.get("namespace") or "default"
        body: dict[str, Any] = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {
                # client-go's naming: <object name>.<unix nanoseconds in hex>
                "name": f"{regarding.get('name')}.{time.time_ns():x}",
                "namespace": namespace,
            },
            "eventTime": micro_time(now),
            "reportingController": reporting_controller,
            "reportingInstance": _truncate(
                f"{reporting_controller}-{self.reporting_instance_suffix}", 128
            ),
            "action": action,
            "reason": reason,
            "note": _truncate(message),
            "type": event_type,
            "regarding": dict(regarding),
        }
        if related is not None:
            body["related"] = dict(related)
        if self.event_writer is None:
            self.event_writer = EventWriter(
                self._write_event, capacity=self.event_queue_size, writers=self.event_writers
            )
        self.event_writer.put(
            namespace, orjson.dumps(body), reason, str(regarding.get("name") or "")
        )

    @property
    def events_dropped(self) -> int:
        """Events not written because the queue was full."""
        return self.event_writer.dropped if self.event_writer is not None else 0

    async def _write_event(self, event: QueuedEvent) -> None:
        await self.send(
            "POST",
            f"/apis/events.k8s.io/v1/namespaces/{event.namespace}/events",
            event.body,
            limiter=self._events,
            pool=EVENTS,
        )

    async def flush_events(self) -> None:
        """Wait for the Event writes queued so far (tests)."""
        if self.event_writer is not None:
            await self.event_writer.flush()

    async def patch_pod_status(
        self,
        pod: Pod,
        *,
        condition: PodCondition | None = None,
        nominated_node_name: str | None = None,
    ) -> None:
        status: dict[str, Any] = {}
        if condition is not None:
            current_status = pod.raw.get("status") or {}
            if not condition.written_in(current_status):
                current = condition_of(current_status, condition.type)
                status["conditions"] = [self._condition_entry(condition, current)]
        if nominated_node_name is not None and nominated_node_name != pod.nominated_node_name:
            # null deletes the field under a strategic merge patch.
            status["nominatedNodeName"] = nominated_node_name or None
        if not status:
            return  # nothing changes (kube-scheduler skips such updates too)
        await self.request(
            "PATCH",
            f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/status",
            {"status": status},
            content_type=STRATEGIC_MERGE,
        )

    def _condition_entry(self, cond: PodCondition, current: Obj | None) -> dict[str, Any]:
        # lastTransitionTime moves only when the status flips (podutil.UpdatePodCondition).
        now = rfc3339(self._now())
        transition = now
        if current is not None and current.get("status") == cond.status:
            transition = str(current.get("lastTransitionTime") or now)
        return {
            "type": cond.type,
            "status": cond.status,
            "reason": cond.reason,
            "message": cond.message,
            "lastProbeTime": None,
            "lastTransitionTime": transition,
        }

    async def delete_pod(self, pod: Pod, *, condition: PodCondition | None = None) -> None:
        if condition is not None:
            await self.request(
                "PATCH",
                f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/status",
                {"status": {"conditions": [self._condition_entry(condition, None)]}},
                content_type=STRATEGIC_MERGE,
            )
        await self.request(
            "DELETE",
            f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}",
            {
                "apiVersion": "v1",
                "kind": "DeleteOptions",
                "preconditions": {"uid": pod.uid},
            },
        )

    async def bind_volume(
        self, pvc: Mapping[str, Any], pv_name: str | None, selected_node: str | None
    ) -> None:
        """VolumeBinding's PreBind writes, as kube-scheduler's binder makes them: an update
        of the PV's ``claimRef`` (static) or of the claim's selected-node annotation
        (dynamic), each guarded by the resourceVersion the store holds. The PV controller
        completes the binding; unlike kube-scheduler, PreBind does not wait for it."""
        meta = pvc.get("metadata") or {}
        ns, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
        if pv_name:
            pv = self.get("PersistentVolume", "", pv_name)
            if pv is None:
                raise NotFound(f'persistentvolumes "{pv_name}" not found')
            ref = (pv.get("spec") or {}).get("claimRef") or {}
            if ref and (ref.get("name") != name or (ref.get("namespace") or "default") != ns):
                raise Conflict(
                    f"persistentvolume {pv_name} is bound to claim "
                    f"{ref.get('namespace')}/{ref.get('name')}"
                )
            new_pv = copy.deepcopy(dict(pv))
            annotations = new_pv.setdefault("metadata", {}).setdefault("annotations", {})
            annotations["pv.kubernetes.io/bound-by-controller"] = "yes"
            new_pv.setdefault("spec", {})["claimRef"] = {
                "kind": "PersistentVolumeClaim",
                "apiVersion": "v1",
                "namespace": ns,
                "name": name,
                "uid": str(meta.get("uid") or ""),
                "resourceVersion": str(meta.get("resourceVersion") or ""),
            }
            await self.request("PUT", f"/api/v1/persistentvolumes/{pv_name}", new_pv)
        if selected_node:
            new_pvc = copy.deepcopy(dict(pvc))
            annotations = new_pvc.setdefault("metadata", {}).setdefault("annotations", {})
            annotations["volume.kubernetes.io/selected-node"] = selected_node
            await self.request(
                "PUT", f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{name}", new_pvc
            )

    # -- DynamicResources' claim writes (see ClusterPort; kube_claims says how) ------------------
    async def update_claim_status(
        self,
        claim: Mapping[str, Any],
        allocation: Mapping[str, Any] | None,
        reserved_for: Mapping[str, Any],
    ) -> Mapping[str, Any]:
        return await kube_claims.bind_claim(self, claim, allocation, reserved_for, now=self._now)

    async def unreserve_claim(self, claim: Mapping[str, Any], pod_uid: str) -> None:
        await kube_claims.unreserve_claim(self, claim, pod_uid)

    async def create_claim(self, claim: Mapping[str, Any]) -> Mapping[str, Any]:
        return await kube_claims.create_claim(self, claim)

    async def delete_claim(self, claim: Mapping[str, Any]) -> None:
        await kube_claims.delete_claim(self, claim)

    async def set_extended_resource_claim_status(self, pod: Pod, status: Mapping[str, Any]) -> None:
        """kube's patchPodExtendedResourceClaimStatus: a strategic merge patch of the
        pod's ``status.extendedResourceClaimStatus``."""
        try:
            await self.request(
                "PATCH",
                f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/status",
                {"status": {"extendedResourceClaimStatus": dict(status)}},
                content_type=STRATEGIC_MERGE,
            )
        except ClusterError as e:
            raise kube_claims.wrapped(
                e, f"update pod {pod.namespace}/{pod.name} ExtendedResourceClaimStatus"
            ) from e

    async def deallocate_claim(self, claim: Mapping[str, Any]) -> None:
        await kube_claims.deallocate_claim(self, claim)

    # -- reads (list for reconciliation) ----------------------------------------------------------
    async def list_pages(
        self, kind: str, page_size: int = LIST_PAGE_SIZE
    ) -> AsyncIterator[tuple[builtins.list[dict[str, Any]], str]]:
        """All objects of a kind, straight from the API server (a consistent read), one
        page at a time: ``(items, resourceVersion)``, items trimmed (:func:`trim`). A
        caller that handles each page before asking for the next holds one page of
        decoded JSON at a time, not the whole listing (thousands of pods)."""
        prefix, plural = LIST_PATHS[kind]
        token = ""
        while True:
            query = {"limit": str(page_size)}
            if token:
                query["continue"] = token
            body = await self.send("GET", f"{prefix}/{plural}", query=query, pool=LISTS)
            if kind in STRUCT_ORDER_KINDS:
                body = without_managed_fields(body)
            items, version, token = decode_list(body)
            del body
            yield items, version
            if not token:
                return

    async def list_objects(self, kind: str) -> builtins.list[dict[str, Any]]:
        """All objects of a kind, trimmed (see :meth:`list_pages`), in one list."""
        out: builtins.list[dict[str, Any]] = []
        async for items, _ in self.list_pages(kind):
            out.extend(items)
        return out

    # -- ObjectStore ----------------------------------------------------------------------------
    @staticmethod
    def key_of(kind: str, obj: Obj) -> str:
        meta = obj.get("metadata") or {}
        return object_key(kind, meta.get("namespace"), str(meta.get("name") or ""))

    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.objects.get(kind, {}).get(object_key(kind, namespace, name))

    def list(self, kind: str, namespace: str | None = None) -> Iterable[Mapping[str, Any]]:
        return in_namespace(kind, self.objects.get(kind, {}), namespace)

    def put(self, kind: str, obj: dict[str, Any]) -> dict[str, Any] | None:
        """Store the latest version; returns the previous one."""
        store = self.objects.setdefault(kind, {})
        key = self.key_of(kind, obj)
        old = store.get(key)
        store[key] = obj
        return old

    def remove(self, kind: str, obj: Obj) -> dict[str, Any] | None:
        return self.objects.get(kind, {}).pop(self.key_of(kind, obj), None)

    async def aclose(self, within: float | None = None) -> int:
        """Write the queued Events within ``within`` seconds (None: no limit), then stop
        the writers; returns how many Events were left unwritten."""
        events, self.event_writer = self.event_writer, None
        return await events.aclose(within) if events is not None else 0


def _pod_ref(pod: Pod) -> dict[str, str]:
    ref = {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": pod.namespace,
        "name": pod.name,
        "uid": pod.uid,
    }
    if pod.resource_version:
        ref["resourceVersion"] = pod.resource_version
    return ref
