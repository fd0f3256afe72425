"""Extended resources backed by DRA on the real API server: the ResourceClaim kube-scheduler
1.37.2 creates at PreBind for a pod asking for ``example.com/gpu`` and the pod's
``status.extendedResourceClaimStatus``, against kubesched's, field by field.

``tests/scenarios/dra/extended-resource.yaml`` (and ``extended-resource-implicit.yaml``:
an init container reusing its main container's device) runs once under each scheduler (the
differential harness's :func:`run_scenario`); what each left is read before the next run
wipes it: the claims carrying ``resource.kubernetes.io/extended-resource-claim`` and the
status of the pods that asked. The random part of the generated name (five characters),
uids, resourceVersions and timestamps are masked; everything else must be equal:
generateName, annotation, owner reference, finalizer, requests, allocation results,
reservedFor, and the mappings in the pod's status.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

import pytest

from kubesched.simulator.scenario import load_scenarios
from tests.controlplane import Binaries, ControlPlane, RestClient
from tests.e2e.differential_support import (
    CORPUS,
    KUBE_SCHEDULER,
    KUBESCHED,
    expectations,
    run_scenario,
)
from tests.e2e.scenario_cluster import scenario_control_plane

pytestmark = pytest.mark.timeout(240)

SCENARIO = CORPUS / "dra" / "extended-resource.yaml"
IMPLICIT = CORPUS / "dra" / "extended-resource-implicit.yaml"
ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
JSON = dict[str, Any]


@pytest.fixture(scope="module")
def cluster(controlplane_binaries: Binaries) -> Iterator[ControlPlane]:
    with scenario_control_plane(controlplane_binaries) as cp:
        yield cp


def _masked(claim: JSON) -> JSON:
    out = copy.deepcopy(claim)
    meta = out["metadata"]
    for f in ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation"):
        meta.pop(f, None)
    meta["name"] = re.sub(r"-[a-z0-9]{5}$", "-XXXXX", meta["name"])
    for ref in meta.get("ownerReferences") or ():
        ref["uid"] = "<pod uid>"
    for ref in (out.get("status") or {}).get("reservedFor") or ():
        ref["uid"] = "<pod uid>"
    alloc = (out.get("status") or {}).get("allocation") or {}
    alloc.pop("allocationTimestamp", None)
    return out


def _left(api: RestClient) -> tuple[list[JSON], dict[str, JSON | None]]:
    claims = [
        _masked(c)
        for c in api.list("resource.k8s.io/v1", "ResourceClaim")
        if (c["metadata"].get("annotations") or {}).get(ANNOTATION) == "true"
    ]
    statuses: dict[str, JSON | None] = {}
    for pod in api.list("v1", "Pod"):
        st = copy.deepcopy((pod.get("status") or {}).get("extendedResourceClaimStatus"))
        if st is not None:
            st["resourceClaimName"] = re.sub(r"-[a-z0-9]{5}$", "-XXXXX", st["resourceClaimName"])
        statuses[pod["metadata"]["name"]] = st
    return sorted(claims, key=lambda c: str(c["metadata"]["name"])), statuses


def test_the_claim_and_the_pod_status_are_kube_schedulers(cluster: ControlPlane) -> None:
    objects = load_scenarios([str(SCENARIO)])
    expected = expectations(SCENARIO)
    run_scenario(cluster, objects, expected, KUBE_SCHEDULER)
    theirs = _left(cluster.api)
    run_scenario(cluster, objects, expected, KUBESCHED)
    ours = _left(cluster.api)
    claims, statuses = theirs
    assert len(claims) == 1, f"kube-scheduler made {len(claims)} claims: {claims}"
    assert claims[0]["metadata"]["name"] == "two-extended-resources-XXXXX"
    assert statuses["two"] is not None and statuses["one"] is None
    results = claims[0]["status"]["allocation"]["devices"]["results"]
    assert sorted(r["device"] for r in results) == ["gpu-0", "gpu-1"]
    assert ours[0] == claims
    assert ours[1] == statuses


def test_init_container_requests_are_kube_schedulers(cluster: ControlPlane) -> None:
    objects = load_scenarios([str(IMPLICIT)])
    expected = expectations(IMPLICIT)
    run_scenario(cluster, objects, expected, KUBE_SCHEDULER)
    claims, statuses = _left(cluster.api)
    run_scenario(cluster, objects, expected, KUBESCHED)
    assert [r["name"] for r in claims[0]["spec"]["devices"]["requests"]] == [
        "container-0-request-0",
        "container-1-request-0",
    ]
    mappings = (statuses["init-and-main"] or {})["requestMappings"]
    assert [(m["containerName"], m["requestName"]) for m in mappings] == [
        ("main", "container-1-request-0"),
        ("init", "container-1-request-0"),
        ("init", "container-0-request-0"),
    ]
    assert _left(cluster.api) == (claims, statuses)
