"""Bare Node objects: a Ready status with capacity = allocatable and no kubelet behind
them, as kwok and scheduler_perf make."""

from __future__ import annotations

import time
from collections.abc import Mapping

from tests.controlplane.rest import JSON

__all__ = ["KUBELET_VERSION", "bare_node", "node_status"]

KUBELET_VERSION = "v1.37.2"
"""What bare nodes report as their kubelet: the release tests/controlplane/build pins."""


def bare_node(name: str, resources: Mapping[str, str], *, zone: int | None = None) -> JSON:
    """A Node ``name`` with the well-known labels (hostname, os, arch; with ``zone``,
    ``topology.kubernetes.io/zone=zone-<zone>`` in ``region-0``) and a Ready status."""
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
    }
    if zone is not None:
        labels["topology.kubernetes.io/zone"] = f"zone-{zone}"
        labels["topology.kubernetes.io/region"] = "region-0"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {},
        "status": node_status(resources),
    }


def node_status(resources: Mapping[str, str]) -> JSON:
    """A Ready node status with capacity = allocatable = resources."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "capacity": dict(resources),
        "allocatable": dict(resources),
        "phase": "Running",
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "bare node for tests (no kubelet)",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }
        ],
        "nodeInfo": {
            "architecture": "amd64",
            "operatingSystem": "linux",
            "kubeletVersion": KUBELET_VERSION,
            "kubeProxyVersion": "",
            "containerRuntimeVersion": "",
            "osImage": "",
            "kernelVersion": "",
            "machineID": "",
            "systemUUID": "",
            "bootID": "",
        },
    }
