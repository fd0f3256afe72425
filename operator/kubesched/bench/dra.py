"""The DRA objects of a benchmark on a real API server (``--target cluster``).

A workload with DRA (``SchedulingWithResourceClaimTemplate``) brings a DeviceClass,
ResourceSlices (the bench publishes them as a driver would: no kubelet, no driver
process) and a ResourceClaimTemplate. The claims are made from the template by
kube-controller-manager's resourceclaim controller, as in a real cluster: on a control
plane of the bench's own, :func:`start_claim_controller` runs it beside the API server
for either scheduler (the same controller for both, so its speed is in both figures);
on a cluster given by kubeconfig its own controller-manager is expected to.

On such a cluster (``run_id`` set) a slice's name and pool get the run id as a suffix
and its node name is the run's node, so runs never share devices; the DeviceClass is
shared by runs (as the PriorityClasses are). Slices are removed with the run's nodes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kubesched.bench.controlplane import (
    ControlPlane,
    ControlPlaneError,
    Process,
    controller_manager_argv,
)
from kubesched.cluster.kinds import CLUSTER_SCOPED, KINDS

__all__ = [
    "CLAIM_CONTROLLER",
    "api_path",
    "cluster_scoped",
    "needs_claim_controller",
    "slice_path",
    "start_claim_controller",
]

GROUP_VERSION = "resource.k8s.io/v1"
CLAIM_CONTROLLER = "resourceclaim-controller"
_PLURALS = {k.kind: k.plural for k in KINDS if k.group_version == GROUP_VERSION}


def api_path(obj: Mapping[str, Any], namespace: str) -> str | None:
    """Where ``obj`` is created, or None when it is not a DRA object."""
    kind = str(obj.get("kind") or "")
    if obj.get("apiVersion") != GROUP_VERSION or kind not in _PLURALS:
        return None
    if kind in CLUSTER_SCOPED:
        return f"/apis/{GROUP_VERSION}/{_PLURALS[kind]}"
    return f"/apis/{GROUP_VERSION}/namespaces/{namespace}/{_PLURALS[kind]}"


def slice_path(name: str) -> str:
    return f"/apis/{GROUP_VERSION}/resourceslices/{name}"


def cluster_scoped(
    obj: dict[str, Any], node_name: Callable[[str], str], run_id: str | None
) -> bool:
    """Localize a cluster-scoped DRA object in place (see the module docstring); False
    for any other object, left as it is."""
    kind = obj.get("kind")
    if obj.get("apiVersion") != GROUP_VERSION or kind not in CLUSTER_SCOPED:
        return False
    if kind == "ResourceSlice":
        spec = obj.setdefault("spec", {})
        if spec.get("nodeName"):
            spec["nodeName"] = node_name(str(spec["nodeName"]))
        if run_id:
            meta = obj.setdefault("metadata", {})
            meta["name"] = f"{meta['name']}-{run_id}"
            pool = spec.setdefault("pool", {})
            pool["name"] = f"{pool.get('name')}-{run_id}"
    return True


def needs_claim_controller(objects: Sequence[Mapping[str, Any]]) -> bool:
    """Whether pods will need claims made from templates."""
    return any(o.get("kind") == "ResourceClaimTemplate" for o in objects)


def start_claim_controller(cp: ControlPlane) -> Process:
    """kube-controller-manager running only the resourceclaim controller, as the
    control plane's admin, no leader election, no serving port; the caller stops it."""
    binary = cp.binaries / "kube-controller-manager"
    if not binary.exists():
        raise ControlPlaneError(
            f"{binary} is missing: a DRA workload needs kube-controller-manager's "
            "resourceclaim controller (tests/controlplane/build builds it)"
        )
    argv = controller_manager_argv(
        binary,
        kubeconfig=cp.kubeconfig,
        controllers=[CLAIM_CONTROLLER],
        service_account_key=Path(cp.dir) / "service-account.key",
        extra_args=["--kube-api-qps=5000", "--kube-api-burst=5000"],
    )
    proc = Process("kube-controller-manager", argv, Path(cp.dir) / "kube-controller-manager.log")
    proc.check_running()
    return proc
