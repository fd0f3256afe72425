"""An in-memory cluster: the simulator's and the tests' implementation of the port.

Objects are plain dicts keyed by kind and ``namespace/name``. Writes behave like the
API server's for what the scheduler does: binding a pod that is gone is ``NotFound``,
binding a pod that is already bound is ``Conflict``; every change is delivered to
subscribers as a watch event (ADDED / MODIFIED / DELETED) after it is stored.
Failures can be injected per call for tests.
"""

from __future__ import annotations

import builtins
import copy
import itertools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubesched.api.gangs import STORE_KINDS, GangAPI, store_kind
from kubesched.cluster.claim_controller import (
    claims_for_pod,
    claims_for_pod_group,
    generated_suffix,
    released_claims,
)
from kubesched.cluster.kinds import in_namespace, object_key
from kubesched.framework.cluster_port import ClusterError, Conflict, NotFound, PodCondition
from kubesched.framework.types import Pod

__all__ = ["MemoryCluster", "RecordedEvent"]

_POD_GROUP = STORE_KINDS[GangAPI.UPSTREAM]

Subscriber = Callable[[str, str, Mapping[str, Any], "Mapping[str, Any] | None"], None]

DRA_FINALIZER = "resource.kubernetes.io/delete-protection"
"""The finalizer kube-scheduler puts on a ResourceClaim before it stores an allocation."""

#: Node labels a binding copies onto the pod (kube-apiserver's PodTopologyLabels).
TOPOLOGY_LABELS = ("topology.kubernetes.io/zone", "topology.kubernetes.io/region")


@dataclass(slots=True)
class RecordedEvent:
    namespace: str
    name: str
    type: str
    reason: str
    action: str
    message: str
    reporting_controller: str
    related: str = ""
    """``namespace/name`` of the related pod (a preemptor, for ``Preempted``), or ""."""


@dataclass(slots=True)
class _Fault:
    error: ClusterError
    times: int


@dataclass
class MemoryCluster:
    objects: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    events: list[RecordedEvent] = field(default_factory=list)
    bindings: list[tuple[str, str]] = field(default_factory=list)
    """(pod key, node) for every successful bind, in order: double binds show up here."""
    _subscribers: list[Subscriber] = field(default_factory=list)
    _faults: dict[str, _Fault] = field(default_factory=dict)
    _rv: Iterable[int] = field(default_factory=lambda: itertools.count(1))

    # -- store ------------------------------------------------------------------------------------
    @staticmethod
    def key_of(obj: Mapping[str, Any]) -> tuple[str, str]:
        # the three PodGroup kinds (and Workload) are kept apart by their API group
        kind = store_kind(str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""))
        meta = obj.get("metadata") or {}
        return kind, object_key(kind, meta.get("namespace"), str(meta.get("name") or ""))

    def subscribe(self, fn: Subscriber, *, replay: bool = True) -> None:
        """Receive watch events; ``replay`` sends ADDED for what exists (a list)."""
        self._subscribers.append(fn)
        if replay:
            for kind in ("Namespace", "PriorityClass", "Node", "Pod"):
                for obj in list(self.objects.get(kind, {}).values()):
                    fn(kind, "ADDED", obj, None)
            for kind, objs in self.objects.items():
                if kind in ("Namespace", "PriorityClass", "Node", "Pod"):
                    continue
                for obj in list(objs.values()):
                    fn(kind, "ADDED", obj, None)

    def _notify(
        self, kind: str, event: str, obj: Mapping[str, Any], old: Mapping[str, Any] | None
    ) -> None:
        for fn in list(self._subscribers):
            fn(kind, event, obj, old)

    def _stamp(self, obj: dict[str, Any]) -> None:
        meta = obj.setdefault("metadata", {})
        meta["resourceVersion"] = str(next(self._rv))  # type: ignore[call-overload]

    def apply(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create or replace an object (like ``kubectl apply``). A pod's claims from
        ResourceClaimTemplates are created first (see :mod:`.claim_controller`)."""
        new = dict(obj)
        kind, key = self.key_of(new)
        templates = self.objects.get("ResourceClaimTemplate", {})
        wants_claims = _wants_claims(new)
        if kind == "Pod" and wants_claims:
            new["status"] = dict(new.get("status") or {})
            for claim in self._claims_for_pod(new, templates):
                self.apply(claim)
        if kind == _POD_GROUP and wants_claims:
            new["status"] = dict(new.get("status") or {})
            for claim in claims_for_pod_group(new, templates):
                self.apply(claim)
        self._stamp(new)
        store = self.objects.setdefault(kind, {})
        old = store.get(key)
        store[key] = new
        self._notify(kind, "MODIFIED" if old is not None else "ADDED", new, old)
        group_claims = kind == _POD_GROUP and wants_claims
        if kind == "ResourceClaimTemplate" or group_claims:
            self._claims_from_template(key.partition("/")[0])
        return new

    def _claims_for_pod(
        self, pod: dict[str, Any], templates: Mapping[str, Any]
    ) -> builtins.list[dict[str, Any]]:
        """:func:`claims_for_pod` with the pod's ``scheduling.k8s.io`` PodGroup
        (``spec.schedulingGroup``); a pod whose PodGroup does not exist (yet) gets
        nothing, as kube's controller retries it until the PodGroup comes."""
        group = (pod.get("spec") or {}).get("schedulingGroup") or {}
        name = group.get("podGroupName") if isinstance(group, Mapping) else None
        if not name:
            return claims_for_pod(pod, templates)
        ns = (pod.get("metadata") or {}).get("namespace") or "default"
        pod_group = self.objects.get(_POD_GROUP, {}).get(f"{ns}/{name}")
        return [] if pod_group is None else claims_for_pod(pod, templates, pod_group)

    def _claims_from_template(self, namespace: str) -> None:
        """The resourceclaim controller's answer to a new template or PodGroup: PodGroups
        and pods of the namespace still waiting for a claim get it."""
        templates = self.objects.get("ResourceClaimTemplate", {})
        for key, group in list(self.objects.get(_POD_GROUP, {}).items()):
            if not key.startswith(f"{namespace}/"):
                continue
            group_probe = {**group, "status": dict(group.get("status") or {})}
            made = claims_for_pod_group(group_probe, templates)
            for claim in made:
                self.apply(claim)
            if made:
                self.apply(group_probe)  # its status names them; waiting members follow
        for key, pod in list(self.objects.get("Pod", {}).items()):
            if not key.startswith(f"{namespace}/"):
                continue
            probe = {**pod, "status": dict(pod.get("status") or {})}
            before = probe["status"].get("resourceClaimStatuses")
            created = self._claims_for_pod(probe, templates)
            if probe["status"].get("resourceClaimStatuses") == before:
                continue
            for claim in created:
                self.apply(claim)
            statuses = probe["status"]["resourceClaimStatuses"]

            def record(p: dict[str, Any], statuses: Any = statuses) -> None:
                p["status"]["resourceClaimStatuses"] = statuses

            self._replace_pod(key, record)

    def delete(self, kind: str, key: str) -> None:
        old = self.objects.get(kind, {}).pop(key, None)
        if old is None:
            raise NotFound(f"{kind} {key} not found")
        self._notify(kind, "DELETED", old, None)
        uid = str((old.get("metadata") or {}).get("uid") or "")
        if kind in ("Pod", _POD_GROUP) and uid:
            claims = self.objects.get("ResourceClaim", {})
            for claim_key, changed in released_claims(uid, list(claims.values())):
                if changed is None:
                    self.delete("ResourceClaim", claim_key)
                else:
                    self._store_claim(claim_key, changed, claims[claim_key])

    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.objects.get(kind, {}).get(object_key(kind, namespace, name))

    def list(self, kind: str, namespace: str | None = None) -> builtins.list[Mapping[str, Any]]:
        return in_namespace(kind, self.objects.get(kind, {}), namespace)

    def pod(self, key: str) -> Mapping[str, Any] | None:
        return self.objects.get("Pod", {}).get(key)

    # -- fault injection -----------------------------------------------------------------------------
    def fail_next(self, operation: str, error: ClusterError, times: int = 1) -> None:
        """Make the next ``times`` calls of ``operation`` (bind, record_event,
        patch_pod_status, delete_pod, bind_volume) raise ``error``."""
        self._faults[operation] = _Fault(error, times)

    def _maybe_fail(self, operation: str) -> None:
        f = self._faults.get(operation)
        if f is None:
            return
        f.times -= 1
        if f.times <= 0:
            del self._faults[operation]
        raise f.error

    def _replace_pod(self, key: str, change: Callable[[dict[str, Any]], None]) -> None:
        store = self.objects.setdefault("Pod", {})
        old = store.get(key)
        if old is None:
            raise NotFound(f"pods {key!r} not found")
        new = {
            **old,
            "metadata": dict(old.get("metadata") or {}),
            "spec": dict(old.get("spec") or {}),
            "status": dict(old.get("status") or {}),
        }
        change(new)
        self._stamp(new)
        store[key] = new
        self._notify("Pod", "MODIFIED", new, old)

    # -- ClusterPort ---------------------------------------------------------------------------------
    async def bind(self, pod: Pod, node_name: str) -> None:
        self._maybe_fail("bind")
        current = self.pod(pod.key)
        if current is None or (current.get("metadata") or {}).get("uid", pod.uid) != pod.uid:
            raise NotFound(f'pods "{pod.name}" not found')  # the API server's words
        if (current.get("spec") or {}).get("nodeName"):
            raise Conflict(
                f'Operation cannot be fulfilled on pods/binding "{pod.name}": pod {pod.name} '
                f'is already assigned to node "{current["spec"]["nodeName"]}"'
            )
        # A missing node is no error: the API server's binding does not check it either
        # (a pod bound to a deleted node is the pod GC's to delete). The node's zone and
        # region labels are copied onto the pod, as kube-apiserver 1.35+ does
        # (PodTopologyLabelsAdmission, on by default).

        node = self.objects.get("Node", {}).get(node_name)
        node_labels = ((node or {}).get("metadata") or {}).get("labels") or {}
        copied = {k: node_labels[k] for k in TOPOLOGY_LABELS if k in node_labels}

        def assign(new: dict[str, Any]) -> None:
            new["spec"]["nodeName"] = node_name
            if copied:
                new["metadata"]["labels"] = {**(new["metadata"].get("labels") or {}), **copied}
            conds = [
                c for c in new["status"].get("conditions") or () if c.get("type") != "PodScheduled"
            ]
            conds.append({"type": "PodScheduled", "status": "True"})
            new["status"]["conditions"] = conds
            # kube-apiserver 1.35+ clears the nomination at the bind
            # (ClearingNominatedNodeNameAfterBinding, beta, on by default)
            new["status"].pop("nominatedNodeName", None)

        self._replace_pod(pod.key, assign)
        self.bindings.append((pod.key, node_name))

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
        self._maybe_fail("record_event")
        self.events.append(
            RecordedEvent(
                regarding.namespace,
                regarding.name,
                event_type,
                reason,
                action,
                message,
                reporting_controller,
                related.key if related is not None else "",
            )
        )

    async def patch_pod_status(
        self,
        pod: Pod,
        *,
        condition: PodCondition | None = None,
        nominated_node_name: str | None = None,
    ) -> None:
        self._maybe_fail("patch_pod_status")
        current = self.pod(pod.key)
        if current is not None and not _status_changes(
            current.get("status") or {}, condition, nominated_node_name
        ):
            return  # nothing changes: no write, no update event (as KubeCluster)

        def patch(new: dict[str, Any]) -> None:
            st = new["status"]
            if condition is not None:
                conds = [c for c in st.get("conditions") or () if c.get("type") != condition.type]
                conds.append(
                    {
                        "type": condition.type,
                        "status": condition.status,
                        "reason": condition.reason,
                        "message": condition.message,
                    }
                )
                st["conditions"] = conds
            if nominated_node_name is not None:
                if nominated_node_name:
                    st["nominatedNodeName"] = nominated_node_name
                else:
                    st.pop("nominatedNodeName", None)

        self._replace_pod(pod.key, patch)

    async def delete_pod(self, pod: Pod, *, condition: PodCondition | None = None) -> None:
        self._maybe_fail("delete_pod")
        if condition is not None:
            await self.patch_pod_status(pod, condition=condition)
        self.delete("Pod", pod.key)

    async def bind_volume(
        self, pvc: Mapping[str, Any], pv_name: str | None, selected_node: str | None
    ) -> None:
        """VolumeBinding's PreBind writes, plus what the PV controller would complete
        (this cluster has none): see ``ClusterPort.bind_volume``."""
        self._maybe_fail("bind_volume")
        meta = pvc.get("metadata") or {}
        ns, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
        claims = self.objects.setdefault("PersistentVolumeClaim", {})
        old_pvc = claims.get(f"{ns}/{name}")
        if old_pvc is None:
            raise NotFound(f'persistentvolumeclaims "{name}" not found')
        old_meta = old_pvc.get("metadata") or {}
        new_pvc = {
            **old_pvc,
            "metadata": {**old_meta, "annotations": dict(old_meta.get("annotations") or {})},
            "spec": dict(old_pvc.get("spec") or {}),
            "status": dict(old_pvc.get("status") or {}),
        }
        if pv_name:
            volumes = self.objects.setdefault("PersistentVolume", {})
            old_pv = volumes.get(pv_name)
            if old_pv is None:
                raise NotFound(f'persistentvolumes "{pv_name}" not found')
            ref = (old_pv.get("spec") or {}).get("claimRef") or {}
            uid = str(old_meta.get("uid") or "")
            if ref and (
                ref.get("name") != name
                or (ref.get("namespace") or "default") != ns
                or (ref.get("uid") and uid and ref.get("uid") != uid)
            ):
                raise Conflict(
                    f"persistentvolume {pv_name} is bound to claim "
                    f"{ref.get('namespace')}/{ref.get('name')}"
                )
            pv_meta = old_pv.get("metadata") or {}
            new_pv = {
                **old_pv,
                "metadata": {
                    **pv_meta,
                    "annotations": {
                        **(pv_meta.get("annotations") or {}),
                        "pv.kubernetes.io/bound-by-controller": "yes",
                    },
                },
                "spec": {
                    **(old_pv.get("spec") or {}),
                    "claimRef": {
                        "kind": "PersistentVolumeClaim",
                        "apiVersion": "v1",
                        "namespace": ns,
                        "name": name,
                        "uid": uid,
                    },
                },
                "status": {**(old_pv.get("status") or {}), "phase": "Bound"},
            }
            self._stamp(new_pv)
            volumes[pv_name] = new_pv
            self._notify("PersistentVolume", "MODIFIED", new_pv, old_pv)
            new_pvc["spec"]["volumeName"] = pv_name
            new_pvc["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] = "yes"
            new_pvc["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] = "yes"
            new_pvc["status"]["phase"] = "Bound"
            capacity = (new_pv["spec"].get("capacity")) or {}
            if capacity:
                new_pvc["status"]["capacity"] = dict(capacity)
            modes = new_pv["spec"].get("accessModes")
            if modes:
                new_pvc["status"]["accessModes"] = list(modes)
        if selected_node:
            new_pvc["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] = selected_node
        self._stamp(new_pvc)
        claims[f"{ns}/{name}"] = new_pvc
        self._notify("PersistentVolumeClaim", "MODIFIED", new_pvc, old_pvc)

    # -- DynamicResources' claim writes (see ClusterPort) -------------------------------------------
    def _claim_copy(self, claim: Mapping[str, Any]) -> tuple[str, dict[str, Any], dict[str, Any]]:
        meta = claim.get("metadata") or {}
        ns, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
        old = self.objects.get("ResourceClaim", {}).get(f"{ns}/{name}")
        if old is None:
            raise NotFound(f'resourceclaims.resource.k8s.io "{name}" not found')
        new = copy.deepcopy(old)
        new.setdefault("status", {})
        return f"{ns}/{name}", old, new

    def _store_claim(self, key: str, new: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
        self._stamp(new)
        self.objects.setdefault("ResourceClaim", {})[key] = new
        self._notify("ResourceClaim", "MODIFIED", new, old)
        return new

    async def update_claim_status(
        self,
        claim: Mapping[str, Any],
        allocation: Mapping[str, Any] | None,
        reserved_for: Mapping[str, Any],
    ) -> Mapping[str, Any]:
        self._maybe_fail("update_claim_status")
        key, old, new = self._claim_copy(claim)
        if (new.get("metadata") or {}).get("deletionTimestamp"):
            raise Conflict(f"claim {key} got deleted in the meantime")
        if allocation is not None:
            if new["status"].get("allocation"):
                raise Conflict(f"claim {key} got allocated elsewhere in the meantime")
            finalizers = new["metadata"].setdefault("finalizers", [])
            if DRA_FINALIZER not in finalizers:
                finalizers.append(DRA_FINALIZER)
            new["status"]["allocation"] = copy.deepcopy(dict(allocation))
        elif not new["status"].get("allocation"):
            raise Conflict(f"claim {key} got deallocated elsewhere in the meantime")
        reserved = new["status"].setdefault("reservedFor", [])
        if not any(r.get("uid") == reserved_for.get("uid") for r in reserved):
            reserved.append(dict(reserved_for))
        return self._store_claim(key, new, old)

    async def unreserve_claim(self, claim: Mapping[str, Any], pod_uid: str) -> None:
        self._maybe_fail("unreserve_claim")
        key, old, new = self._claim_copy(claim)
        reserved = new["status"].get("reservedFor") or []
        kept = [r for r in reserved if r.get("uid") != pod_uid]
        if len(kept) == len(reserved):
            return
        new["status"]["reservedFor"] = kept
        if not kept:
            del new["status"]["reservedFor"]
        self._store_claim(key, new, old)

    async def deallocate_claim(self, claim: Mapping[str, Any]) -> None:
        self._maybe_fail("deallocate_claim")
        key, old, new = self._claim_copy(claim)
        seen = str((claim.get("metadata") or {}).get("resourceVersion") or "")
        if seen and seen != str(old["metadata"].get("resourceVersion") or ""):
            raise Conflict(
                f'Operation cannot be fulfilled on resourceclaims.resource.k8s.io "{key}": '
                "the object has been modified; please apply your changes to the latest "
                "version and try again"
            )
        for field_name in ("allocation", "reservedFor", "devices"):
            new["status"].pop(field_name, None)
        self._store_claim(key, new, old)

    async def create_claim(self, claim: Mapping[str, Any]) -> Mapping[str, Any]:
        new = copy.deepcopy(dict(claim))
        meta = new.setdefault("metadata", {})
        ns = str(meta.get("namespace") or "default")
        _wrap_failure(
            lambda: self._maybe_fail("create_claim"), f"create claim for extended resources {ns}/"
        )
        meta["namespace"] = ns
        claims = self.objects.setdefault("ResourceClaim", {})
        if not meta.get("name"):
            # the API server's generateName: a random suffix; here one derived from the
            # owner and a counter, so runs repeat
            base = str(meta.get("generateName") or "")
            owner = str(((meta.get("ownerReferences") or [{}])[0]).get("uid") or base)
            n = 0
            while True:
                name = base + generated_suffix(f"{owner}/{n}")
                if f"{ns}/{name}" not in claims:
                    break
                n += 1
            meta["name"] = name
        key = f"{ns}/{meta['name']}"
        if key in claims:
            raise Conflict(f'resourceclaims.resource.k8s.io "{meta["name"]}" already exists')
        meta.setdefault("uid", f"claim-{key}")
        meta.setdefault("creationTimestamp", "1970-01-01T00:00:00Z")
        new.setdefault("status", {})
        self._stamp(new)
        claims[key] = new
        self._notify("ResourceClaim", "ADDED", new, None)
        return new

    async def delete_claim(self, claim: Mapping[str, Any]) -> None:
        self._maybe_fail("delete_claim")
        meta = claim.get("metadata") or {}
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
        if key in self.objects.get("ResourceClaim", {}):
            self.delete("ResourceClaim", key)

    async def set_extended_resource_claim_status(self, pod: Pod, status: Mapping[str, Any]) -> None:
        _wrap_failure(
            lambda: self._maybe_fail("set_extended_resource_claim_status"),
            f"update pod {pod.key} ExtendedResourceClaimStatus",
        )

        def patch(new: dict[str, Any]) -> None:
            new["status"]["extendedResourceClaimStatus"] = copy.deepcopy(dict(status))

        self._replace_pod(pod.key, patch)

    # -- reads for tests and the simulator --------------------------------------------------------------
    def events_for(self, key: str) -> builtins.list[RecordedEvent]:
        ns, _, name = key.partition("/")
        return [e for e in self.events if e.namespace == ns and e.name == name]

    def node_of(self, key: str) -> str | None:
        p = self.pod(key)
        if p is None:
            return None
        return (p.get("spec") or {}).get("nodeName") or None

    def condition(self, key: str, type_: str) -> dict[str, Any] | None:
        p = self.pod(key)
        for c in ((p or {}).get("status") or {}).get("conditions") or ():
            if c.get("type") == type_:
                return dict(c)
        return None


def _wrap_failure(call: Callable[[], None], prefix: str) -> None:
    """An injected failure reads as the real adapter's: ``<prefix>: <message>``."""
    try:
        call()
    except ClusterError as e:
        out = type(e)(f"{prefix}: {e}")
        out.code, out.retryable, out.retry_after = e.code, e.retryable, e.retry_after
        raise out from e


def _wants_claims(obj: Mapping[str, Any]) -> bool:
    """``obj`` (a pod or a PodGroup) lists ``spec.resourceClaims`` and is shaped so the
    claim controller can read it. A malformed one (a spec that is text, ...) is stored as
    it is and gets no claims: the scheduler reports it as an event, as it would the API
    server's (which refuses it at creation)."""
    spec, meta, status = obj.get("spec"), obj.get("metadata"), obj.get("status")
    if not isinstance(spec, Mapping) or not isinstance(meta, Mapping | None):
        return False
    claims = spec.get("resourceClaims")
    return isinstance(claims, list) and bool(claims) and isinstance(status, Mapping | None)


def _status_changes(
    status: Mapping[str, Any], condition: PodCondition | None, nominated: str | None
) -> bool:
    """Whether patching ``status`` with ``condition`` and ``nominated`` changes it."""
    if nominated is not None and nominated != (status.get("nominatedNodeName") or ""):
        return True
    return condition is not None and not condition.written_in(status)
