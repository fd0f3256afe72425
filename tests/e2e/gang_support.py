"""What the upstream gang tests share (``test_gang_differential``, ``test_random_gangs``):
a control plane with the gang gates and ``scheduling.k8s.io/v1beta1`` served (the gates and
why: ``test_gang_differential``'s docstring), the upstream objects wiped between runs, and
the gangs and minimums a scenario declares."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from tests.controlplane import ApiError, Binaries, ControlPlane, RestClient, wait_for
from tests.e2e.scenario_cluster import scenario_control_plane

UPSTREAM = "scheduling.k8s.io/v1beta1"
GATES = {
    "GenericWorkload": True,
    "TopologyAwareWorkloadScheduling": True,
    "DRAWorkloadResourceClaims": True,
}
RUNTIME_CONFIG = {UPSTREAM: True}
#: The upstream kinds a scenario creates, removed before each run.
UPSTREAM_KINDS = ("PodGroup", "Workload")


def wipe_upstream(api: RestClient) -> None:
    """Remove the upstream gang objects of the last run. A PodGroup carries a finalizer
    while pods use it (no controller here removes it): it is dropped, and the objects
    waited for, so the next scenario can create the same names."""
    for kind in UPSTREAM_KINDS:
        for obj in api.list(UPSTREAM, kind):
            meta = obj["metadata"]
            try:
                if meta.get("finalizers"):
                    api.patch(
                        api.path(UPSTREAM, kind, meta["name"], meta["namespace"]),
                        {"metadata": {"finalizers": None}},
                    )
                api.remove(UPSTREAM, kind, meta["name"], meta["namespace"])
            except ApiError as err:
                if err.status != 404:
                    raise
    wait_for(
        lambda: not any(api.list(UPSTREAM, kind) for kind in UPSTREAM_KINDS),
        timeout=30,
        what="the upstream gang objects removed",
    )


@contextlib.contextmanager
def gang_control_plane(binaries: Binaries) -> Iterator[ControlPlane]:
    """A control plane of a module's own with the gang gates and API, kubesched's CRDs,
    kube-controller-manager's resourceclaim controller and :class:`Controllers`."""
    with scenario_control_plane(
        binaries,
        controllers=["resourceclaim-controller"],
        feature_gates=GATES,
        runtime_config=RUNTIME_CONFIG,
    ) as cp:
        yield cp


def gangs_of(objects: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Each upstream PodGroup (``ns/name``) -> the keys of its member pods."""
    out: dict[str, list[str]] = {}
    for obj in objects:
        if obj["kind"] != "Pod":
            continue
        group = ((obj.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
        if group:
            ns = obj["metadata"].get("namespace") or "default"
            out.setdefault(f"{ns}/{group}", []).append(f"{ns}/{obj['metadata']['name']}")
    return out


def minimums_of(objects: list[dict[str, Any]]) -> dict[str, int]:
    """Each upstream PodGroup (``ns/name``) -> how many members it needs bound at once:
    its gang's ``minCount``, 1 for the basic policy."""
    out: dict[str, int] = {}
    for obj in objects:
        if obj["kind"] == "PodGroup" and obj["apiVersion"] == UPSTREAM:
            policy = (obj.get("spec") or {}).get("schedulingPolicy") or {}
            key = f"{obj['metadata'].get('namespace') or 'default'}/{obj['metadata']['name']}"
            out[key] = int((policy.get("gang") or {}).get("minCount") or 1)
    return out
