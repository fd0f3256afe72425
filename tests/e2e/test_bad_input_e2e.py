"""Bad input on the real kube-apiserver (issue 9, item 4): the API server refuses much at
admission (asserted here for the CRDs: the schema names the field); what it lets through
(extreme but valid quantities, hundreds of tolerations and labels, affinity to labels no
node has, unknown scheduler-looking annotations, a PodGroup that can never be complete)
is fed to a running ``kubesched run``: it stays up, reports each pod it cannot place
with a FailedScheduling event that says why, and keeps binding valid pods, once each.
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.controlplane import ApiError, ControlPlane
from tests.e2e import support
from tests.e2e.support import call, eventually, local_settings

pytestmark = pytest.mark.timeout(150)

JSON = dict[str, Any]
LABEL = "kubesched.dev/pod-group"


@pytest.fixture
async def running(controlplane: ControlPlane, crds: None) -> AsyncIterator[asyncio.Task[None]]:
    """``run``'s task: the tests check kubesched is still up after each bad input."""
    async with support.running(local_settings(controlplane.kubeconfig)) as started:
        yield started.task


def pod(name: str, ns: str, pool: dict[str, str], **spec: Any) -> JSON:
    container: JSON = {
        "name": "c",
        "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
    }
    if "requests" in spec:
        container["resources"] = {"requests": spec.pop("requests")}
    meta: JSON = {"name": name, "namespace": ns}
    for key in ("labels", "annotations"):
        if key in spec:
            meta[key] = spec.pop(key)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "schedulerName": "kubesched",
            "nodeSelector": pool,
            "containers": [container],
            **spec,
        },
    }


def nasty(ns: str, pool: dict[str, str]) -> dict[str, tuple[JSON, str]]:
    """Pods the API server accepts and kubesched cannot place: name -> (pod, the words its
    FailedScheduling event must contain)."""
    tolerations = [
        {"key": f"k{i}", "operator": "Equal", "value": "v", "effect": "NoSchedule"}
        for i in range(300)
    ]
    labels = {f"l{i}.example.com/x": "y" * 63 for i in range(150)}
    return {
        "huge-memory": (
            pod("huge-memory", ns, pool, requests={"memory": "8Ei", "cpu": "100m"}),
            "Insufficient memory",
        ),
        "huge-cpu": (
            pod("huge-cpu", ns, pool, requests={"cpu": "9223372036854775"}),
            "Insufficient cpu",
        ),
        "no-such-label": (
            pod(
                "no-such-label",
                ns,
                pool,
                tolerations=tolerations,
                labels=labels,
                annotations={
                    "scheduler.alpha.kubernetes.io/critical-pod": "x",
                    "kubesched.dev/x": "{",
                },
                affinity={
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "nope.example.com/none", "operator": "Exists"}
                                    ]
                                }
                            ]
                        }
                    }
                },
            ),
            "node affinity",
        ),
        "anti-self": (
            pod(
                "anti-self",
                ns,
                pool,
                labels={"anti": "self"},
                affinity={
                    "podAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "labelSelector": {"matchLabels": {"app": "nobody"}},
                                "topologyKey": "nope.example.com/zone",
                            }
                        ]
                    }
                },
            ),
            "affinity",
        ),
    }


async def test_the_api_server_refuses_invalid_custom_resources(
    controlplane: ControlPlane, namespace: str, crds: None
) -> None:
    cp = controlplane
    refused = {
        "minMember": {"minMember": 0},
        "scheduleTimeoutSeconds": {"minMember": 1, "scheduleTimeoutSeconds": -5},
    }
    for field, spec in refused.items():
        body = {
            "apiVersion": "kubesched.dev/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": f"bad-{field.lower()}", "namespace": namespace},
            "spec": spec,
        }
        with pytest.raises(ApiError) as e:
            await call(cp.api.create, body)
        assert e.value.status == 422 and field in str(e.value), e.value
    profile = {
        "apiVersion": "kubesched.dev/v1alpha1",
        "kind": "SchedulingProfile",
        "metadata": {"name": f"bad-{uuid.uuid4().hex[:6]}"},
        "spec": {"schedulerName": "x", "percentageOfNodesToScore": -5},
    }
    with pytest.raises(ApiError) as e:
        await call(cp.api.create, profile)
    assert e.value.status == 422 and "percentageOfNodesToScore" in str(e.value), e.value


async def test_what_gets_through_is_reported_and_valid_pods_keep_binding(
    controlplane: ControlPlane, namespace: str, running: asyncio.Task[None]
) -> None:
    cp, ns = controlplane, namespace
    pool = {"e2e.kubesched.dev/pool": uuid.uuid4().hex[:10]}
    await call(cp.create_nodes, 2, labels=pool, prefix=f"bad-{pool[next(iter(pool))]}-")
    bad = nasty(ns, pool)
    # a gang that can never be complete: 2 members of 2**31 - 1
    group = {
        "apiVersion": "kubesched.dev/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "never", "namespace": ns},
        "spec": {"minMember": 2**31 - 1},
    }
    await call(cp.api.create, group)
    gang = [pod(f"never-{i}", ns, pool, labels={LABEL: "never"}) for i in range(2)]
    valid = [pod(f"ok-{i}", ns, pool) for i in range(6)]
    order = [valid[0], *(p for p, _ in bad.values()), valid[1], *gang, *valid[2:]]
    for obj in order:
        await call(cp.api.create, obj)

    def bound(name: str) -> str | None:
        obj = cp.api.read("v1", "Pod", name, ns)
        return obj["spec"].get("nodeName") if obj else None

    for p in valid:
        name = p["metadata"]["name"]
        await eventually(functools.partial(bound, name), within=60, what=f"{name} bound")
        assert not running.done()

    def failed(name: str) -> list[str]:
        return [
            str(e.get("note") or "")
            for e in cp.api.list("events.k8s.io/v1", "Event", ns)
            if e["regarding"]["name"] == name and e["reason"] == "FailedScheduling"
        ]

    def saying(name: str, words: str) -> list[str]:
        return [n for n in failed(name) if words in n]

    for name, (_, words) in bad.items():
        # Waited for by its words: the nodes come by a watch of their own, and a pod seen
        # before them is first reported for what it was then (no node matched).
        await eventually(
            functools.partial(saying, name, words), within=60, what=f"{name} reported: {words}"
        )
        assert bound(name) is None

    # the gang's members are held back (PreEnqueue, no event, as kube-scheduler's gates);
    # the PodGroup's status says why
    def group_message() -> str:
        obj = cp.api.read("kubesched.dev/v1alpha1", "PodGroup", "never", ns)
        return str(((obj or {}).get("status") or {}).get("message") or "")

    want = f"2/{2**31 - 1} member pods exist"
    await eventually(lambda: want in group_message(), within=60, what=want)
    assert all(bound(p["metadata"]["name"]) is None for p in gang)

    def scheduled() -> list[str]:
        return [
            e["regarding"]["name"]
            for e in cp.api.list("events.k8s.io/v1", "Event", ns)
            if e["reason"] == "Scheduled"
        ]

    names = sorted(p["metadata"]["name"] for p in valid)
    # the events are written apart from the binds: each valid pod's is waited for
    await eventually(lambda: set(scheduled()) >= set(names), within=60, what="Scheduled events")
    assert sorted(scheduled()) == names  # once each
    assert not running.done()
