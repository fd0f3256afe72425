"""Reads of storage objects (PersistentVolumeClaim, PersistentVolume, StorageClass, CSINode)
that the volume plugins share, with the API server's defaults and kube's message shapes.

The objects are the store's plain dicts. Helpers never mutate them. Messages that a user
sees (``persistentvolumeclaim "x" not found``) keep the shape of client-go's listers.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kubesched.framework.labels import NodeSelector, compile_node_selector
from kubesched.framework.quantity import QuantityError, value
from kubesched.framework.types import Pod

__all__ = [
    "ANN_BIND_COMPLETED",
    "ANN_BOUND_BY_CONTROLLER",
    "ANN_SELECTED_NODE",
    "ANN_STORAGE_CLASS",
    "CSI_DRIVER",
    "CSI_NODE",
    "CSI_STORAGE_CAPACITY",
    "NOT_SUPPORTED_PROVISIONER",
    "PV",
    "PVC",
    "STORAGE_CLASS",
    "PodClaim",
    "access_modes",
    "ephemeral_owner_error",
    "is_pvc_fully_bound",
    "not_found",
    "pod_claims",
    "pv_capacity",
    "pv_class",
    "pv_node_affinity",
    "pvc_class",
    "pvc_request",
    "quantity_bytes",
    "volume_mode",
]

PVC = "PersistentVolumeClaim"
PV = "PersistentVolume"
STORAGE_CLASS = "StorageClass"
CSI_NODE = "CSINode"
CSI_DRIVER = "CSIDriver"
CSI_STORAGE_CAPACITY = "CSIStorageCapacity"

ANN_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
"""The deprecated class annotation; it wins over ``spec.storageClassName`` (kube's
GetPersistentVolumeClaimClass / GetPersistentVolumeClass)."""
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
"""Set by the PV controller on a claim whose binding is complete."""
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
"""The node a WaitForFirstConsumer claim is to be provisioned for."""
NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"
"""A StorageClass provisioner meaning "static PVs only" (local volumes)."""

_RESOURCE = {PVC: "persistentvolumeclaim", PV: "persistentvolume", STORAGE_CLASS: "storageclass"}


def not_found(kind: str, name: str) -> str:
    """client-go's NotFound message, e.g. ``persistentvolumeclaim "data" not found``."""
    return f'{_RESOURCE.get(kind, kind.lower())} "{name}" not found'


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def pvc_class(pvc: Mapping[str, Any]) -> str:
    ann = _meta(pvc).get("annotations") or {}
    if ANN_STORAGE_CLASS in ann:
        return str(ann[ANN_STORAGE_CLASS])
    return str(_spec(pvc).get("storageClassName") or "")


def pv_class(pv: Mapping[str, Any]) -> str:
    ann = _meta(pv).get("annotations") or {}
    if ANN_STORAGE_CLASS in ann:
        return str(ann[ANN_STORAGE_CLASS])
    return str(_spec(pv).get("storageClassName") or "")


def access_modes(obj: Mapping[str, Any]) -> list[str]:
    return [str(m) for m in _spec(obj).get("accessModes") or ()]


def volume_mode(obj: Mapping[str, Any]) -> str:
    """``Filesystem`` unless ``spec.volumeMode`` says ``Block``."""
    return str(_spec(obj).get("volumeMode") or "Filesystem")


def quantity_bytes(q: object) -> int:
    """A storage quantity in bytes, rounded up as kube's ``Quantity.Value()``; 0 when it is
    missing or not a quantity."""
    if not isinstance(q, str | int | float):  # None, or not a quantity
        return 0
    try:
        return value(q)
    except QuantityError:
        return 0


def pvc_request(pvc: Mapping[str, Any]) -> int:
    """The claim's ``resources.requests.storage`` in bytes (0 when unset)."""
    res = _spec(pvc).get("resources") or {}
    return quantity_bytes((res.get("requests") or {}).get("storage"))


def pv_capacity(pv: Mapping[str, Any]) -> int:
    return quantity_bytes((_spec(pv).get("capacity") or {}).get("storage"))


def is_pvc_fully_bound(pvc: Mapping[str, Any]) -> bool:
    """Bound and acknowledged by the PV controller: ``spec.volumeName`` and the
    ``pv.kubernetes.io/bind-completed`` annotation (kube's isPVCFullyBound)."""
    ann = _meta(pvc).get("annotations") or {}
    return bool(_spec(pvc).get("volumeName")) and ANN_BIND_COMPLETED in ann


def pv_node_affinity(pv: Mapping[str, Any]) -> NodeSelector | None:
    """The PV's ``spec.nodeAffinity.required`` compiled; ``None`` when it has none."""
    required = (_spec(pv).get("nodeAffinity") or {}).get("required")
    if required is None:
        return None
    return compile_node_selector(required, "spec.nodeAffinity.required")


@dataclass(frozen=True, slots=True)
class PodClaim:
    """A pod volume backed by a claim."""

    volume: str
    claim: str
    """The claim's name ("" when the volume names none)."""
    ephemeral: bool
    """A generic ephemeral volume: the claim is named ``<pod>-<volume>``, owned by the pod."""


def pod_claims(pod: Pod) -> Iterator[PodClaim]:
    """The pod's PVC and generic ephemeral volumes, in ``spec.volumes`` order."""
    for vol in pod.spec.get("volumes") or ():
        name = str(vol.get("name") or "")
        pvc = vol.get("persistentVolumeClaim")
        if pvc is not None:
            yield PodClaim(name, str(pvc.get("claimName") or ""), False)
        elif vol.get("ephemeral") is not None:
            yield PodClaim(name, f"{pod.name}-{name}", True)


def ephemeral_owner_error(pod: Pod, pvc: Mapping[str, Any]) -> str | None:
    """kube's VolumeIsForPod: the claim of an ephemeral volume must be controlled by the pod."""
    for ref in _meta(pvc).get("ownerReferences") or ():
        if ref.get("controller") and ref.get("uid") == pod.uid:
            return None
    return (
        f"PVC {pod.namespace}/{_meta(pvc).get('name')} was not created for pod "
        f"{pod.namespace}/{pod.name} (pod is not owner)"
    )
