"""Scenario support for the storage kinds the volume plugins read: PersistentVolumeClaim,
PersistentVolume (v1), StorageClass, CSINode, CSIDriver and CSIStorageCapacity
(storage.k8s.io/v1).

Validators check the fields the scheduler reads and default what the API server would
(StorageClass ``volumeBindingMode: Immediate`` and ``reclaimPolicy: Delete``; PV
``persistentVolumeReclaimPolicy: Retain``). :func:`complete_prebound_claims` then plays
the PV controller for what a scenario states as already bound: a claim whose
``spec.volumeName`` names a PV of the scenario that is free or reserved for it becomes
fully bound (``pv.kubernetes.io/bind-completed``, both phases ``Bound``, the PV's
``claimRef``); PVs without a claim are ``Available``, claims left unbound ``Pending``.
A real cluster's PV controller does the same within seconds, so a scenario can say
"this claim is bound to that volume" with ``spec.volumeName`` alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubesched.framework.labels import compile_label_selector, compile_node_selector
from kubesched.framework.quantity import QuantityError, value
from kubesched.framework.storage import ANN_BIND_COMPLETED
from kubesched.framework.types import ObjectError

__all__ = [
    "complete_prebound_claims",
    "validate_csi_driver",
    "validate_csi_node",
    "validate_csi_storage_capacity",
    "validate_pv",
    "validate_pvc",
    "validate_storage_class",
]

ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
VOLUME_MODES = ("Filesystem", "Block")
BINDING_MODES = ("Immediate", "WaitForFirstConsumer")


def _spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj.get("spec")
    if spec is None:
        spec = obj["spec"] = {}
    if not isinstance(spec, dict):
        raise ObjectError("spec: expected an object")
    return spec


def _access_modes(spec: Mapping[str, Any]) -> None:
    modes = spec.get("accessModes")
    if not isinstance(modes, list) or not modes:
        raise ObjectError("spec.accessModes: at least one access mode is required")
    for i, m in enumerate(modes):
        if m not in ACCESS_MODES:
            raise ObjectError(f"spec.accessModes[{i}]: must be one of {', '.join(ACCESS_MODES)}")
    if "ReadWriteOncePod" in modes and len(modes) > 1:
        raise ObjectError("spec.accessModes: ReadWriteOncePod may not be used with other modes")


def _storage(q: Any, field: str) -> None:
    if q is None:
        raise ObjectError(f"{field}: required")
    try:
        if value(q) < 0:
            raise ObjectError(f"{field}: must not be negative")
    except QuantityError as e:
        raise ObjectError(f"{field}: {e}") from None


def _volume_mode(spec: Mapping[str, Any]) -> None:
    mode = spec.get("volumeMode")
    if mode is not None and mode not in VOLUME_MODES:
        raise ObjectError(f"spec.volumeMode: must be one of {', '.join(VOLUME_MODES)}")


def _string(spec: Mapping[str, Any], key: str, field: str) -> None:
    v = spec.get(key)
    if v is not None and not isinstance(v, str):
        raise ObjectError(f"{field}: must be a string")


def validate_pvc(obj: dict[str, Any]) -> None:
    spec = _spec(obj)
    _access_modes(spec)
    resources = spec.get("resources")
    if not isinstance(resources, Mapping) or not isinstance(resources.get("requests"), Mapping):
        raise ObjectError("spec.resources.requests.storage: required")
    _storage(resources["requests"].get("storage"), "spec.resources.requests.storage")
    _volume_mode(spec)
    _string(spec, "storageClassName", "spec.storageClassName")
    _string(spec, "volumeName", "spec.volumeName")
    if spec.get("selector") is not None:
        compile_label_selector(spec["selector"], "spec.selector")


def validate_pv(obj: dict[str, Any]) -> None:
    spec = _spec(obj)
    _access_modes(spec)
    capacity = spec.get("capacity")
    if not isinstance(capacity, Mapping):
        raise ObjectError("spec.capacity.storage: required")
    _storage(capacity.get("storage"), "spec.capacity.storage")
    _volume_mode(spec)
    _string(spec, "storageClassName", "spec.storageClassName")
    csi = spec.get("csi")
    if csi is not None:
        if not isinstance(csi, Mapping):
            raise ObjectError("spec.csi: expected an object")
        for key in ("driver", "volumeHandle"):
            if not isinstance(csi.get(key), str) or not csi.get(key):
                raise ObjectError(f"spec.csi.{key}: required")
    affinity = spec.get("nodeAffinity")
    if affinity is not None:
        if not isinstance(affinity, Mapping):
            raise ObjectError("spec.nodeAffinity: expected an object")
        if affinity.get("required") is not None:
            compile_node_selector(affinity["required"], "spec.nodeAffinity.required")
    ref = spec.get("claimRef")
    if ref is not None and (not isinstance(ref, Mapping) or not ref.get("name")):
        raise ObjectError("spec.claimRef.name: required")
    spec.setdefault("persistentVolumeReclaimPolicy", "Retain")


def validate_storage_class(obj: dict[str, Any]) -> None:
    prov = obj.get("provisioner")
    if not isinstance(prov, str) or not prov:
        raise ObjectError("provisioner: required")
    mode = obj.setdefault("volumeBindingMode", "Immediate")
    if mode not in BINDING_MODES:
        raise ObjectError(f"volumeBindingMode: must be one of {', '.join(BINDING_MODES)}")
    obj.setdefault("reclaimPolicy", "Delete")
    topologies = obj.get("allowedTopologies")
    if topologies is None:
        return
    if not isinstance(topologies, list):
        raise ObjectError("allowedTopologies: expected a list")
    for i, term in enumerate(topologies):
        exprs = term.get("matchLabelExpressions") if isinstance(term, Mapping) else None
        if not isinstance(exprs, list):
            raise ObjectError(f"allowedTopologies[{i}].matchLabelExpressions: required")
        for j, e in enumerate(exprs):
            f = f"allowedTopologies[{i}].matchLabelExpressions[{j}]"
            if not isinstance(e, Mapping) or not isinstance(e.get("key"), str):
                raise ObjectError(f"{f}.key: required")
            values = e.get("values")
            if not isinstance(values, list) or not values:
                raise ObjectError(f"{f}.values: must be a non-empty list of strings")
            if not all(isinstance(v, str) for v in values):
                raise ObjectError(f"{f}.values: must be a non-empty list of strings")


def validate_csi_node(obj: dict[str, Any]) -> None:
    spec = _spec(obj)
    drivers = spec.get("drivers")
    if not isinstance(drivers, list):
        raise ObjectError("spec.drivers: required (a list)")
    for i, d in enumerate(drivers):
        f = f"spec.drivers[{i}]"
        if not isinstance(d, Mapping):
            raise ObjectError(f"{f}: expected an object")
        for key in ("name", "nodeID"):
            if not isinstance(d.get(key), str) or not d.get(key):
                raise ObjectError(f"{f}.{key}: required")
        alloc = d.get("allocatable")
        if alloc is None:
            continue
        count = alloc.get("count") if isinstance(alloc, Mapping) else None
        if count is not None and (
            not isinstance(count, int) or isinstance(count, bool) or count < 0
        ):
            raise ObjectError(f"{f}.allocatable.count: must be a non-negative integer")


def validate_csi_driver(obj: dict[str, Any]) -> None:
    spec = obj.get("spec")
    if spec is None:
        obj["spec"] = spec = {}
    if not isinstance(spec, Mapping):
        raise ObjectError(f"spec: expected an object, got {type(spec).__name__}")
    capacity = spec.get("storageCapacity")
    if capacity is not None and not isinstance(capacity, bool):
        raise ObjectError("spec.storageCapacity: must be true or false")


def validate_csi_storage_capacity(obj: dict[str, Any]) -> None:
    """The fields VolumeBinding reads; they sit beside ``metadata``, not under a spec."""
    name = obj.get("storageClassName")
    if not isinstance(name, str) or not name:
        raise ObjectError("storageClassName: required")
    for key in ("capacity", "maximumVolumeSize"):
        q = obj.get(key)
        if q is None:
            continue
        try:
            value(q)
        except QuantityError as e:
            raise ObjectError(f"{key}: {e}") from None
    topology = obj.get("nodeTopology")
    if topology is not None:
        compile_label_selector(topology, "nodeTopology")


def complete_prebound_claims(objects: Sequence[dict[str, Any]]) -> None:
    """Finish the bindings a scenario states (see the module docstring), in place."""
    pvs = {o["metadata"]["name"]: o for o in objects if o.get("kind") == "PersistentVolume"}
    for o in objects:
        if o.get("kind") != "PersistentVolumeClaim":
            continue
        meta, spec = o["metadata"], o["spec"]
        status = o.setdefault("status", {})
        pv = pvs.get(spec.get("volumeName") or "")
        if pv is None:
            status.setdefault("phase", "Pending")
            continue
        ref = pv["spec"].get("claimRef")
        if ref and (
            ref.get("name") != meta["name"]
            or (ref.get("namespace") or "default") != meta["namespace"]
        ):
            status.setdefault("phase", "Pending")
            continue
        pv["spec"]["claimRef"] = {
            "kind": "PersistentVolumeClaim",
            "apiVersion": "v1",
            "namespace": meta["namespace"],
            "name": meta["name"],
            "uid": meta.get("uid", ""),
        }
        pv.setdefault("status", {})["phase"] = "Bound"
        meta.setdefault("annotations", {})[ANN_BIND_COMPLETED] = "yes"
        status["phase"] = "Bound"
    for pv in pvs.values():
        pv.setdefault("status", {}).setdefault(
            "phase", "Bound" if pv["spec"].get("claimRef") else "Available"
        )
