"""resource.k8s.io/v1 objects with their kind, pods with claims, and a plugin handle whose
store and cluster port are one memory cluster (for the DynamicResources tests)."""

from __future__ import annotations

from typing import Any

from kubesched.cluster.memory import MemoryCluster
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.types import Pod
from tests.builders import make_pod
from tests.unit.dra import builders as b
from tests.unit.plugins.fakes import FakeHandle

API = "resource.k8s.io/v1"
GPU_CLASS = "gpu"


def kind(k: str, obj: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API, "kind": k, **obj}


def device_class(name: str = GPU_CLASS, *selectors: str) -> dict[str, Any]:
    return kind("DeviceClass", b.device_class(name, *selectors))


def gpus(n: int, node: str = "n1", **attrs: Any) -> dict[str, Any]:
    return kind("ResourceSlice", b.gpus(n, node, **attrs))


def claim(name: str = "c", *requests: dict[str, Any], **devices: Any) -> dict[str, Any]:
    return kind("ResourceClaim", b.claim(name, *requests, **devices))


def template(name: str = "one-gpu", *requests: dict[str, Any]) -> dict[str, Any]:
    spec = b.claim(name, *requests)["spec"]
    return kind(
        "ResourceClaimTemplate",
        {"metadata": {"name": name, "namespace": "default"}, "spec": {"spec": spec}},
    )


def allocated(c: dict[str, Any], node: str, *devices: str, reserved: str = "") -> dict[str, Any]:
    """``c`` allocated the devices of ``node``'s pool (reserved for pod uid ``reserved``)."""
    status: dict[str, Any] = {
        "allocation": {
            "devices": {
                "results": [
                    {"request": "req", "driver": b.DRIVER, "pool": node, "device": d}
                    for d in devices
                ]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                ]
            },
        }
    }
    if reserved:
        status["reservedFor"] = [{"resource": "pods", "name": reserved, "uid": reserved}]
    return {**c, "status": status}


def pod_with(*claims: str, name: str = "p", templates: tuple[str, ...] = ()) -> Pod:
    """A pod naming claims (``resourceClaimName``) and templates."""
    entries: list[dict[str, Any]] = [{"name": c, "resourceClaimName": c} for c in claims]
    entries += [{"name": f"t-{t}", "resourceClaimTemplateName": t} for t in templates]
    return make_pod(name).uid(name).spec(resourceClaims=entries).pod()


class DraHandle(FakeHandle):
    """A FakeHandle whose store and cluster port are one memory cluster."""

    def __init__(self, snapshot: Snapshot, memory: MemoryCluster) -> None:
        super().__init__(snapshot)
        self.memory = memory

    @property
    def cluster(self) -> MemoryCluster:  # type: ignore[override]
        return self.memory

    @property
    def store(self) -> MemoryCluster:  # type: ignore[override]
        return self.memory
