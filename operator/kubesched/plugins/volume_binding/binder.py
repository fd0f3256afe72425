"""The volume binder behind VolumeBinding: which claims a pod has, whether a node can
satisfy them (bound PVs' node affinity, a matching available PV per WaitForFirstConsumer
claim, or dynamic provisioning), and the assume caches that make a Reserve visible to the
next scheduling cycle before PreBind's writes come back through the watch.

The matching rules are kube-scheduler's (binder.go, component-helpers' FindMatchingVolume
and CheckNodeAffinity); the functions work on the store's plain dicts.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubesched.framework.cluster_port import ObjectStore
from kubesched.framework.labels import LabelSelector, NodeSelector, compile_label_selector
from kubesched.framework.memo import remember
from kubesched.framework.storage import (
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
    CSI_DRIVER,
    CSI_STORAGE_CAPACITY,
    NOT_SUPPORTED_PROVISIONER,
    STORAGE_CLASS,
    access_modes,
    pv_capacity,
    pv_class,
    pv_node_affinity,
    pvc_class,
    pvc_request,
    quantity_bytes,
    volume_mode,
)

__all__ = [
    "ERR_REASON_BIND_CONFLICT",
    "ERR_REASON_NODE_CONFLICT",
    "ERR_REASON_NOT_ENOUGH_SPACE",
    "ERR_REASON_PV_NOT_EXIST",
    "AffinityCache",
    "AssumeCache",
    "BindingInfo",
    "Capacities",
    "DynamicProvision",
    "PodVolumeClaims",
    "PodVolumes",
    "bind_volume_to_claim",
    "find_pod_volumes",
    "volume_limit",
    "with_selected_node",
]

Obj = Mapping[str, Any]

ERR_REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
ERR_REASON_NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
ERR_REASON_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
ERR_REASON_PV_NOT_EXIST = (
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
)


def _meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _key(obj: Obj, namespaced: bool) -> str:
    m = _meta(obj)
    return (
        f"{m.get('namespace') or 'default'}/{m.get('name')}" if namespaced else str(m.get("name"))
    )


class AssumeCache:
    """The store's objects of one kind, overlaid with objects assumed by Reserve.

    An assumed object hides the stored one until the store holds a different version
    (the write came back, or someone else changed it): then the stored one wins again.
    """

    def __init__(self, store: Callable[[], ObjectStore], kind: str, namespaced: bool) -> None:
        self._store = store
        self.kind = kind
        self.namespaced = namespaced
        self._assumed: dict[str, tuple[str, Obj]] = {}
        """key -> (resourceVersion of the stored object it overlays, the assumed object)."""

    def _overlay(self, key: str, stored: Obj | None) -> Obj | None:
        a = self._assumed.get(key)
        if a is None:
            return stored
        if stored is None or str(_meta(stored).get("resourceVersion") or "") != a[0]:
            del self._assumed[key]
            return stored
        return a[1]

    def get(self, namespace: str, name: str) -> Obj | None:
        stored = self._store().get(self.kind, namespace, name)
        key = f"{namespace or 'default'}/{name}" if self.namespaced else name
        return self._overlay(key, stored)

    def list(self) -> list[Obj]:
        out = []
        for obj in self._store().list(self.kind):
            o = self._overlay(_key(obj, self.namespaced), obj)
            if o is not None:
                out.append(o)
        return out

    def assume(self, obj: Obj) -> None:
        key = _key(obj, self.namespaced)
        m = _meta(obj)
        stored = self._store().get(self.kind, str(m.get("namespace") or ""), str(m.get("name")))
        rv = str(_meta(stored).get("resourceVersion") or "") if stored is not None else ""
        self._assumed[key] = (rv, obj)

    def restore(self, obj: Obj) -> None:
        self._assumed.pop(_key(obj, self.namespaced), None)


@dataclass(slots=True)
class PodVolumeClaims:
    bound: list[Obj] = field(default_factory=list)
    unbound_immediate: list[Obj] = field(default_factory=list)
    unbound_delay: list[Obj] = field(default_factory=list)
    pvs_by_class: dict[str, list[Obj]] = field(default_factory=dict)
    """Candidate PVs of each class the delay-binding claims ask for."""


@dataclass(slots=True)
class BindingInfo:
    pv: Obj
    pvc: Obj


@dataclass(slots=True)
class DynamicProvision:
    pvc: Obj
    capacity: Obj | None = None
    """The CSIStorageCapacity that has room for it on the node, if the driver tracks
    capacity (VolumeBinding's Score reads its ``capacity``)."""


@dataclass(slots=True)
class PodVolumes:
    static_bindings: list[BindingInfo] = field(default_factory=list)
    dynamic_provisions: list[DynamicProvision] = field(default_factory=list)


class Capacities:
    """The CSIStorageCapacity objects of the store, looked up by StorageClass and node,
    as kube's hasEnoughCapacity finds them: one whose ``storageClassName`` is the
    class's, whose volume limit (``maximumVolumeSize``, else ``capacity``) holds the
    claim, and whose ``nodeTopology`` selects the node's labels (none, or one that does
    not parse: no node). Read from the store once per scheduling cycle, when a claim
    first needs it.

    kube lists every capacity for every node (O(nodes x capacities) per pod); drivers
    such as TopoLVM publish one per node and class, selected by a node label. So a
    capacity whose selector is ``matchLabels`` only is filed under its first label, and
    a node looks up its own value of that key instead of testing every capacity. Of
    several that fit, the first in the store's order is taken (kube takes the first in
    its informer's, which is no fixed order)."""

    def __init__(self, store: ObjectStore) -> None:
        self._store = store
        self._by_class: dict[str, _ClassCapacities] | None = None

    def find(self, class_name: str, size: int, node_labels: Mapping[str, str]) -> Obj | None:
        if self._by_class is None:
            self._by_class = {}
            for i, cap in enumerate(self._store.list(CSI_STORAGE_CAPACITY)):
                name = cap.get("storageClassName")
                if isinstance(name, str):
                    self._by_class.setdefault(name, _ClassCapacities()).add(i, cap)
        entries = self._by_class.get(class_name)
        return None if entries is None else entries.find(size, node_labels)


def volume_limit(capacity: object) -> int | None:
    """kube's volumeLimit: a CSIStorageCapacity's ``maximumVolumeSize``, else its
    ``capacity``, in bytes; None without either."""
    if not isinstance(capacity, Mapping):
        return None
    limit = capacity.get("maximumVolumeSize")
    if limit is None:
        limit = capacity.get("capacity")
    return None if limit is None else quantity_bytes(limit)


_Entry = tuple[int, int | None, LabelSelector, Obj]
"""(store position, volume limit in bytes or None, node topology, the capacity)."""


class _ClassCapacities:
    __slots__ = ("by_label", "other")

    def __init__(self) -> None:
        self.by_label: dict[str, dict[str, list[_Entry]]] = {}
        self.other: list[_Entry] = []

    def add(self, position: int, cap: Obj) -> None:
        topology = cap.get("nodeTopology")
        if topology is None:
            return  # kube: "unavailable"
        try:
            selector = compile_label_selector(topology, "nodeTopology")
        except ValueError:
            return  # kube logs it and gives the capacity no node
        entry = (position, volume_limit(cap), selector, cap)
        if selector.match_labels and not selector.exprs:
            key, value = next(iter(selector.match_labels.items()))
            self.by_label.setdefault(key, {}).setdefault(value, []).append(entry)
        else:
            self.other.append(entry)

    def find(self, size: int, node_labels: Mapping[str, str]) -> Obj | None:
        best: _Entry | None = None
        candidates = [self.other]
        for key, by_value in self.by_label.items():
            value = node_labels.get(key)
            if value is not None and value in by_value:
                candidates.append(by_value[value])
        for entries in candidates:
            for entry in entries:
                if best is not None and entry[0] > best[0]:
                    break
                _, limit, selector, _ = entry
                if limit is not None and limit >= size and selector.matches(node_labels):
                    best = entry
                    break
        return None if best is None else best[3]


class AffinityCache:
    """Compiled PV node affinities, keyed by PV name and resourceVersion."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str], NodeSelector | None] = {}

    def matches(self, pv: Obj, node_labels: Mapping[str, str]) -> bool:
        """kube's CheckNodeAffinity: only the node's labels are seen (matchFields on
        ``metadata.name`` never match), no affinity matches every node."""
        m = _meta(pv)
        key = (str(m.get("name")), str(m.get("resourceVersion") or id(pv)))
        if key in self._cache:
            sel = self._cache[key]
        else:
            sel = remember(self._cache, key, pv_node_affinity(pv), 50_000)
        return sel is None or sel.matches(node_labels, "")


def is_volume_bound_to_claim(pv: Obj, pvc: Obj) -> bool:
    ref = (pv.get("spec") or {}).get("claimRef")
    if not ref:
        return False
    m = _meta(pvc)
    if ref.get("name") != m.get("name"):
        return False
    if (ref.get("namespace") or "default") != (m.get("namespace") or "default"):
        return False
    return not ref.get("uid") or ref.get("uid") == m.get("uid")


def find_matching_volume(
    pvc: Obj,
    pvs: list[Obj],
    node_labels: Mapping[str, str],
    excluded: set[str],
    affinity: AffinityCache,
) -> Obj | None:
    """The PV pre-bound to ``pvc``, else the smallest available PV that fits it on this
    node (kube's FindMatchingVolume on the scheduler path, delayBinding=true)."""
    spec = pvc.get("spec") or {}
    requested = pvc_request(pvc)
    requested_class = pvc_class(pvc)
    selector = compile_label_selector(spec["selector"]) if spec.get("selector") else None
    claim_mode = volume_mode(pvc)
    claim_vac = str(spec.get("volumeAttributesClassName") or "")
    wanted_modes = access_modes(pvc)
    smallest: Obj | None = None
    smallest_qty = 0
    for pv in pvs:
        name = str(_meta(pv).get("name"))
        if name in excluded:
            continue
        pv_spec = pv.get("spec") or {}
        bound_to_claim = is_volume_bound_to_claim(pv, pvc)
        if pv_spec.get("claimRef") and not bound_to_claim:
            continue
        qty = pv_capacity(pv)
        if qty < requested:
            continue
        if volume_mode(pv) != claim_mode:
            continue
        if str(pv_spec.get("volumeAttributesClassName") or "") != claim_vac:
            continue
        if _meta(pv).get("deletionTimestamp"):
            continue
        affinity_ok = affinity.matches(pv, node_labels)
        if bound_to_claim:
            return pv if affinity_ok else None
        if (pv.get("status") or {}).get("phase") != "Available":
            continue
        if selector is not None and not selector.matches(_meta(pv).get("labels") or {}):
            continue
        if pv_class(pv) != requested_class:
            continue
        if not affinity_ok:
            continue
        pv_modes = set(access_modes(pv))
        if not all(m in pv_modes for m in wanted_modes):
            continue
        if smallest is None or smallest_qty > qty:
            smallest, smallest_qty = pv, qty
    return smallest


def match_topology_selector_terms(terms: Any, labels: Mapping[str, str]) -> bool:
    """A StorageClass's ``allowedTopologies``: none allows every node; terms are ORed,
    a term's expressions ANDed, an empty term matches nothing."""
    if not terms:
        return True
    for term in terms:
        exprs = term.get("matchLabelExpressions") or ()
        if not exprs:
            continue
        if all(labels.get(e.get("key")) in (e.get("values") or ()) for e in exprs):
            return True
    return False


@dataclass(slots=True)
class FindResult:
    volumes: PodVolumes
    reasons: list[str]
    error: str = ""


def find_pod_volumes(
    claims: PodVolumeClaims,
    bound_pvs: list[tuple[Obj, Obj | None]],
    node_name: str,
    node_labels: Mapping[str, str],
    store: ObjectStore,
    affinity: AffinityCache,
    capacities: Capacities,
) -> FindResult:
    """kube's FindPodVolumes for one node. ``bound_pvs``: (claim, its PV or None)."""
    result = FindResult(PodVolumes(), [])
    bound_ok = True
    unbound_ok = True
    enough_storage = True
    pvs_found = True
    for _pvc, pv in bound_pvs:
        if pv is None:
            pvs_found = False
            break
        if not affinity.matches(pv, node_labels):
            bound_ok = False
            break
    if claims.unbound_delay:
        to_match: list[Obj] = []
        to_provision: list[Obj] = []
        fast_fail = False
        for pvc in claims.unbound_delay:
            selected = (_meta(pvc).get("annotations") or {}).get(ANN_SELECTED_NODE)
            if selected is not None:
                if selected != node_name:
                    unbound_ok = False
                    fast_fail = True
                    break
                to_provision.append(pvc)
            else:
                to_match.append(pvc)
        if not fast_fail:
            if to_match:
                chosen: set[str] = set()
                for pvc in sorted(to_match, key=pvc_request):
                    pvs = claims.pvs_by_class.get(pvc_class(pvc), [])
                    pv = find_matching_volume(pvc, pvs, node_labels, chosen, affinity)
                    if pv is None:
                        unbound_ok = False
                        to_provision.append(pvc)
                        continue
                    chosen.add(str(_meta(pv).get("name")))
                    result.volumes.static_bindings.append(BindingInfo(pv, pvc))
            if to_provision:
                unbound_ok, enough_storage, err = _check_provisions(
                    to_provision, node_labels, store, capacities, result.volumes
                )
                if err:
                    result.error = err
                    return result
    if not bound_ok:
        result.reasons.append(ERR_REASON_NODE_CONFLICT)
    if not unbound_ok:
        result.reasons.append(ERR_REASON_BIND_CONFLICT)
    if not enough_storage:
        result.reasons.append(ERR_REASON_NOT_ENOUGH_SPACE)
    if not pvs_found:
        result.reasons.append(ERR_REASON_PV_NOT_EXIST)
    return result


def _check_provisions(
    claims: list[Obj],
    node_labels: Mapping[str, str],
    store: ObjectStore,
    capacities: Capacities,
    out: PodVolumes,
) -> tuple[bool, bool, str]:
    """(provisioning possible, enough storage, error) as kube's checkVolumeProvisions."""
    provisions = []
    for pvc in claims:
        class_name = pvc_class(pvc)
        if not class_name:
            return False, False, f'no class for claim "{_meta(pvc).get("name")}"'
        sc = store.get(STORAGE_CLASS, "", class_name)
        if sc is None:
            return False, False, f'failed to find storage class "{class_name}"'
        provisioner = str(sc.get("provisioner") or "")
        if not provisioner or provisioner == NOT_SUPPORTED_PROVISIONER:
            return False, True, ""
        if not match_topology_selector_terms(sc.get("allowedTopologies"), node_labels):
            return False, True, ""
        enough, capacity = _has_enough_capacity(
            pvc, class_name, provisioner, node_labels, store, capacities
        )
        if not enough:
            return True, False, ""
        provisions.append(DynamicProvision(pvc, capacity))
    out.dynamic_provisions = provisions
    return True, True, ""


def _has_enough_capacity(
    pvc: Obj,
    class_name: str,
    provisioner: str,
    node_labels: Mapping[str, str],
    store: ObjectStore,
    capacities: Capacities,
) -> tuple[bool, Obj | None]:
    """kube's hasEnoughCapacity: (room for the claim, the CSIStorageCapacity that has it).
    Only a claim that requests storage, provisioned by a CSIDriver with
    ``storageCapacity: true``, is checked; any other has room."""
    requests = ((pvc.get("spec") or {}).get("resources") or {}).get("requests") or {}
    if "storage" not in requests:
        return True, None
    driver = store.get(CSI_DRIVER, "", provisioner)
    if driver is None or (driver.get("spec") or {}).get("storageCapacity") is not True:
        return True, None
    capacity = capacities.find(class_name, pvc_request(pvc), node_labels)
    return capacity is not None, capacity


def bind_volume_to_claim(pv: Obj, pvc: Obj) -> Obj:
    """The PV as it looks once bound to ``pvc`` (claimRef, bound-by-controller)."""
    new = copy.deepcopy(dict(pv))
    m = _meta(pvc)
    new.setdefault("spec", {})["claimRef"] = {
        "kind": "PersistentVolumeClaim",
        "apiVersion": "v1",
        "namespace": m.get("namespace") or "default",
        "name": m.get("name"),
        "uid": m.get("uid") or "",
        "resourceVersion": m.get("resourceVersion") or "",
    }
    new.setdefault("metadata", {}).setdefault("annotations", {})[ANN_BOUND_BY_CONTROLLER] = "yes"
    return new


def with_selected_node(pvc: Obj, node_name: str) -> Obj:
    new = copy.deepcopy(dict(pvc))
    new.setdefault("metadata", {}).setdefault("annotations", {})[ANN_SELECTED_NODE] = node_name
    return new
