"""Builders of storage objects for the volume plugin tests (plain dicts, API-server shape)."""

from __future__ import annotations

from typing import Any


def make_pvc(
    name: str,
    *,
    namespace: str = "default",
    storage: str = "1Gi",
    modes: tuple[str, ...] = ("ReadWriteOnce",),
    sc: str | None = None,
    volume: str = "",
    bound: bool | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A claim; ``volume`` binds it (fully, unless ``bound=False``)."""
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": f"pvc-{name}"},
        "spec": {
            "accessModes": list(modes),
            "resources": {"requests": {"storage": storage}},
            **spec,
        },
        "status": {"phase": "Pending"},
    }
    if sc is not None:
        obj["spec"]["storageClassName"] = sc
    if volume:
        obj["spec"]["volumeName"] = volume
        if bound is not False:
            obj["metadata"]["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
            obj["status"]["phase"] = "Bound"
    return obj


def make_pv(
    name: str,
    *,
    storage: str = "1Gi",
    modes: tuple[str, ...] = ("ReadWriteOnce",),
    sc: str = "",
    labels: dict[str, str] | None = None,
    hosts: tuple[str, ...] = (),
    claim: str = "",
    csi: tuple[str, str] | None = None,
    phase: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A volume; ``hosts`` gives it local node affinity, ``claim`` a claimRef."""
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": dict(labels or {}), "resourceVersion": "1"},
        "spec": {"accessModes": list(modes), "capacity": {"storage": storage}, **spec},
        "status": {"phase": phase or ("Bound" if claim else "Available")},
    }
    if sc:
        obj["spec"]["storageClassName"] = sc
    if hosts:
        obj["spec"]["nodeAffinity"] = {
            "required": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": "kubernetes.io/hostname",
                                "operator": "In",
                                "values": list(hosts),
                            }
                        ]
                    }
                ]
            }
        }
    if claim:
        ns, _, n = claim.rpartition("/")
        obj["spec"]["claimRef"] = {"namespace": ns or "default", "name": n}
    if csi is not None:
        obj["spec"]["csi"] = {"driver": csi[0], "volumeHandle": csi[1]}
    return obj


def make_sc(
    name: str,
    *,
    provisioner: str = "csi.example.com",
    wffc: bool = False,
    zones: tuple[str, ...] = (),
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": "WaitForFirstConsumer" if wffc else "Immediate",
    }
    if zones:
        obj["allowedTopologies"] = [
            {
                "matchLabelExpressions": [
                    {"key": "topology.kubernetes.io/zone", "values": list(zones)}
                ]
            }
        ]
    return obj


def make_csi_node(node: str, **limits: int | None) -> dict[str, Any]:
    """A CSINode; keyword names are drivers (``_`` for ``.``), values their counts."""
    drivers = []
    for driver, count in limits.items():
        d: dict[str, Any] = {"name": driver.replace("_", "."), "nodeID": node}
        if count is not None:
            d["allocatable"] = {"count": count}
        drivers.append(d)
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": node},
        "spec": {"drivers": drivers},
    }


def make_csi_driver(
    name: str, *, storage_capacity: bool | None = True, prevent_if_missing: bool | None = None
) -> dict[str, Any]:
    """A CSIDriver; a None flag is left unset (``storageCapacity``,
    ``preventPodSchedulingIfMissing``)."""
    spec: dict[str, Any] = {}
    if storage_capacity is not None:
        spec["storageCapacity"] = storage_capacity
    if prevent_if_missing is not None:
        spec["preventPodSchedulingIfMissing"] = prevent_if_missing
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIDriver",
        "metadata": {"name": name},
        "spec": spec,
    }


def make_capacity(
    name: str,
    sc: str,
    *,
    capacity: str | None = None,
    maximum: str | None = None,
    topology: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A CSIStorageCapacity (its fields sit beside metadata); ``topology`` its
    nodeTopology, a label selector."""
    obj: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIStorageCapacity",
        "metadata": {"name": name, "namespace": "kube-system"},
        "storageClassName": sc,
    }
    if capacity is not None:
        obj["capacity"] = capacity
    if maximum is not None:
        obj["maximumVolumeSize"] = maximum
    if topology is not None:
        obj["nodeTopology"] = topology
    return obj
