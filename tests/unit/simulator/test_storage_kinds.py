"""Scenario files with PVCs, PVs, StorageClasses, CSINodes, CSIDrivers and
CSIStorageCapacities: validation and defaults."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.simulator.scenario import Document, ScenarioError, prepare

PVC: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "PersistentVolumeClaim",
    "metadata": {"name": "data"},
    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
}
PV: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "PersistentVolume",
    "metadata": {"name": "pv1"},
    "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}},
}
SC: dict[str, Any] = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "StorageClass",
    "metadata": {"name": "fast"},
    "provisioner": "csi.example.com",
}
CSINODE: dict[str, Any] = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "CSINode",
    "metadata": {"name": "n1"},
    "spec": {"drivers": [{"name": "d", "nodeID": "n1", "allocatable": {"count": 2}}]},
}

CSIDRIVER: dict[str, Any] = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "CSIDriver",
    "metadata": {"name": "d"},
    "spec": {"storageCapacity": True},
}
CAPACITY: dict[str, Any] = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "CSIStorageCapacity",
    "metadata": {"name": "c", "namespace": "kube-system"},
    "storageClassName": "fast",
    "capacity": "10Gi",
    "nodeTopology": {"matchLabels": {"zone": "a"}},
}


def run(*objs: dict[str, Any]) -> list[dict[str, Any]]:
    import copy

    return prepare([Document("s.yaml", i, copy.deepcopy(o)) for i, o in enumerate(objs)])


def patched(base: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    import copy

    obj = copy.deepcopy(base)
    *parents, last = path.split(".")
    cur = obj
    for p in parents:
        cur = cur[p]
    if value is None:
        del cur[last]
    else:
        cur[last] = value
    return obj


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        pytest.param(
            patched(PVC, "spec.accessModes", []),
            "(PersistentVolumeClaim default/data): spec.accessModes: at least one access mode",
            id="pvc-no-access-mode",
        ),
        pytest.param(
            patched(PVC, "spec.accessModes", ["ReadWriteSometimes"]),
            "spec.accessModes[0]: must be one of ReadWriteOnce",
            id="pvc-bad-access-mode",
        ),
        pytest.param(
            patched(PVC, "spec.resources", None),
            "spec.resources.requests.storage: required",
            id="pvc-no-request",
        ),
        pytest.param(
            patched(PVC, "spec.volumeMode", "Disk"),
            "spec.volumeMode: must be one of Filesystem, Block",
            id="pvc-bad-volume-mode",
        ),
        pytest.param(
            patched(PV, "spec.capacity", None),
            "(PersistentVolume pv1): spec.capacity.storage: required",
            id="pv-no-capacity",
        ),
        pytest.param(
            patched(PV, "spec.csi", {"driver": "d"}),
            "spec.csi.volumeHandle: required",
            id="pv-csi-without-handle",
        ),
        pytest.param(
            patched(PV, "spec.nodeAffinity", {"required": {}}),
            "spec.nodeAffinity.required.nodeSelectorTerms: required",
            id="pv-bad-node-affinity",
        ),
        pytest.param(
            patched(SC, "provisioner", None), "(StorageClass fast): provisioner: required", id="sc"
        ),
        pytest.param(
            patched(SC, "volumeBindingMode", "Later"),
            "volumeBindingMode: must be one of Immediate, WaitForFirstConsumer",
            id="sc-binding-mode",
        ),
        pytest.param(
            patched(SC, "allowedTopologies", [{"matchLabelExpressions": [{"key": "k"}]}]),
            "allowedTopologies[0].matchLabelExpressions[0].values: must be a non-empty list",
            id="sc-topology-values",
        ),
        pytest.param(
            patched(
                CSINODE,
                "spec.drivers",
                [{"name": "d", "nodeID": "n1", "allocatable": {"count": -1}}],
            ),
            "(CSINode n1): spec.drivers[0].allocatable.count: must be a non-negative integer",
            id="csinode-negative-count",
        ),
        pytest.param(
            patched(CSIDRIVER, "spec.storageCapacity", "yes"),
            "(CSIDriver d): spec.storageCapacity: must be true or false",
            id="csidriver-storage-capacity",
        ),
        pytest.param(
            patched(CAPACITY, "storageClassName", None),
            "(CSIStorageCapacity kube-system/c): storageClassName: required",
            id="capacity-without-class",
        ),
        pytest.param(
            patched(CAPACITY, "maximumVolumeSize", "lots"),
            "(CSIStorageCapacity kube-system/c): maximumVolumeSize: ",
            id="capacity-bad-quantity",
        ),
        pytest.param(
            patched(CAPACITY, "nodeTopology", {"matchLabels": ["zone"]}),
            "(CSIStorageCapacity kube-system/c): nodeTopology.matchLabels: ",
            id="capacity-bad-topology",
        ),
    ],
)
def test_invalid_storage_objects_name_the_field(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError) as exc:
        run(obj)
    assert message in str(exc.value)


def test_csi_driver_and_capacity_load_as_written() -> None:
    objs = {o["kind"]: o for o in run(CSIDRIVER, CAPACITY)}
    assert objs["CSIDriver"]["spec"] == {"storageCapacity": True}
    assert objs["CSIStorageCapacity"]["capacity"] == "10Gi"
    assert objs["CSIStorageCapacity"]["metadata"]["namespace"] == "kube-system"


def test_defaults_and_prebound_claims_are_completed() -> None:
    pvc = patched(PVC, "spec.volumeName", "pv1")
    objs = {o["kind"]: o for o in run(pvc, PV, SC, CSINODE)}
    assert objs["StorageClass"]["volumeBindingMode"] == "Immediate"
    assert objs["StorageClass"]["reclaimPolicy"] == "Delete"
    claim, volume = objs["PersistentVolumeClaim"], objs["PersistentVolume"]
    assert claim["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"
    assert claim["status"]["phase"] == "Bound"
    assert volume["spec"]["claimRef"]["name"] == "data"
    assert volume["status"]["phase"] == "Bound"


def test_free_pv_is_available_and_unbound_claim_pending() -> None:
    objs = {o["kind"]: o for o in run(PVC, PV)}
    assert objs["PersistentVolume"]["status"]["phase"] == "Available"
    assert objs["PersistentVolumeClaim"]["status"]["phase"] == "Pending"
    assert "annotations" not in objs["PersistentVolumeClaim"]["metadata"]
