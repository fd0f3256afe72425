"""The real control plane for e2e tests: build with tests/controlplane/build, run with
ControlPlane (etcd + kube-apiserver on loopback, optionally the real kube-scheduler)."""

from kubesched.bench.controlplane import ControlPlaneError, free_port
from tests.controlplane.cluster import (
    DEFAULT_IDENTITIES,
    Binaries,
    ControlPlane,
)
from tests.controlplane.kube_scheduler import KubeScheduler
from tests.controlplane.nodes import node_status
from tests.controlplane.rest import ApiError, RestClient
from tests.controlplane.waiting import wait_for

__all__ = [
    "DEFAULT_IDENTITIES",
    "ApiError",
    "Binaries",
    "ControlPlane",
    "ControlPlaneError",
    "KubeScheduler",
    "RestClient",
    "free_port",
    "node_status",
    "wait_for",
]
