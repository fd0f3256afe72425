"""``GET /debug/cache`` over a scheduler on the in-memory cluster: what a user reading
it when a pod seems lost must find there (bound, assumed, pending with a reason), and
nothing of the objects beyond names and quantities."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from kubesched.framework.types import Pod
from kubesched.operator.server import make_app
from tests.builders import make_node, make_pod
from tests.e2e.cachecheck import cache_mismatches
from tests.integration.harness import Harness, running

pytestmark = pytest.mark.looptime

SECRET = "s3cr3t-value-never-served"


@pytest.fixture
async def harness() -> Harness:
    h = Harness()
    h.apply(
        make_node("gpu").taint("dedicated", "gpu").obj(),
        make_node("small").alloc(cpu="2", memory="2Gi").unschedulable(False).obj(),
        make_node("cordoned").alloc(cpu="8", memory="8Gi").unschedulable().obj(),
        make_pod("big").req(cpu="4").obj(),
        make_pod("ok")
        .spec(
            containers=[
                {
                    "name": "c",
                    "image": "i",
                    "env": [{"name": "TOKEN", "value": SECRET}],
                    "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
                }
            ]
        )
        .obj(),
        make_pod("waiting").gate("example.com/hold").obj(),
    )
    return h


@pytest.fixture
async def client(harness: Harness) -> AsyncIterator[TestClient[Any, Any]]:
    app = make_app(scheduler=harness.sched, ready=lambda: True, leading=lambda: True)
    async with TestClient(TestServer(app)) as c:
        yield c


async def _dump(client: TestClient[Any, Any]) -> dict[str, Any]:
    resp = await client.get("/debug/cache")
    assert resp.status == 200
    assert resp.content_type == "application/json"
    doc: dict[str, Any] = await resp.json()
    return doc


async def test_bound_pending_and_gated_pods_with_reasons(
    client: TestClient[Any, Any], harness: Harness
) -> None:
    async with running(harness):
        await harness.wait_for(
            lambda: (
                harness.node_of("default/ok") is not None
                and "FailedScheduling" in harness.reasons("default/big")
                and not harness.sched._tasks
            )
        )
        doc = await _dump(client)
    nodes = {n["name"]: n for n in doc["nodes"]}
    assert set(nodes) == {"gpu", "small", "cordoned"}
    assert nodes["cordoned"]["unschedulable"] is True
    assert nodes["small"]["unschedulable"] is False
    assert nodes["small"]["allocatable"]["milliCPU"] == 2000
    assert [p["pod"] for p in nodes["small"]["pods"]] == ["default/ok"]
    assert nodes["small"]["pods"][0]["assumed"] is False
    assert nodes["small"]["requested"]["milliCPU"] == 500
    assert nodes["small"]["requested"]["memory"] == 1024**3
    assert doc["assumed"] == []
    pending = {p["pod"]: p for p in doc["pending"]}
    assert set(pending) == {"default/big", "default/waiting"}
    assert pending["default/big"]["pool"] in ("unschedulable", "backoff")
    assert pending["default/big"]["reason"].startswith("0/3 nodes are available: ")
    assert pending["default/big"]["profile"] == "kubesched"
    assert pending["default/waiting"]["pool"] == "gated"
    assert pending["default/waiting"]["reason"]
    assert doc["counts"] == {"nodes": 3, "pods": 1, "assumed": 0, "pending": 2}


async def test_a_pod_in_its_binding_cycle_is_assumed_not_queued(
    client: TestClient[Any, Any], harness: Harness
) -> None:
    release = asyncio.Event()
    original = harness.cluster.bind

    async def slow_bind(pod: Pod, node: str) -> None:
        await release.wait()
        await original(pod, node)

    harness.cluster.bind = slow_bind  # type: ignore[method-assign,assignment]
    async with running(harness):
        await harness.wait_for(lambda: bool(harness.sched.cache.assumed_pods()))
        during = await _dump(client)
        release.set()
        await harness.wait_for(lambda: harness.node_of("default/ok") is not None)
        await harness.wait_for(lambda: not harness.sched.cache.assumed_pods())
        after = await _dump(client)
    assert [(a["pod"], a["node"]) for a in during["assumed"]] == [("default/ok", "small")]
    assert "default/ok" not in {p["pod"] for p in during["pending"]}
    small = next(n for n in during["nodes"] if n["name"] == "small")
    assert small["pods"] == [{"pod": "default/ok", "uid": small["pods"][0]["uid"], "assumed": True}]
    assert after["assumed"] == []


async def test_serves_names_and_quantities_only(
    client: TestClient[Any, Any], harness: Harness
) -> None:
    async with running(harness):
        await harness.wait_for(lambda: harness.node_of("default/ok") is not None)
        resp = await client.get("/debug/cache")
        body = await resp.text()
    assert SECRET not in body
    assert '"env"' not in body and '"spec"' not in body and '"metadata"' not in body


async def test_cachecheck_agrees_with_the_cluster_and_catches_drift(
    client: TestClient[Any, Any], harness: Harness
) -> None:
    async with running(harness):
        await harness.wait_for(
            lambda: (
                harness.node_of("default/ok") is not None
                and "FailedScheduling" in harness.reasons("default/big")
                and not harness.sched._tasks
            )
        )
        doc = await _dump(client)
    pods, nodes = harness.cluster.list("Pod"), harness.cluster.list("Node")
    assert cache_mismatches(doc, pods, nodes, "kubesched") == []
    # A pod lost from the queue, a pod the cache holds on the wrong node, a node the cache
    # missed, a pod both assumed and queued: each is reported.
    lost = copy.deepcopy(doc)
    lost["pending"] = [p for p in lost["pending"] if p["pod"] != "default/big"]
    assert cache_mismatches(lost, pods, nodes, "kubesched") == [
        "default/big is unbound in the API and neither queued nor assumed (lost)"
    ]
    moved = copy.deepcopy(doc)
    small = next(n for n in moved["nodes"] if n["name"] == "small")
    gpu = next(n for n in moved["nodes"] if n["name"] == "gpu")
    gpu["pods"], small["pods"] = small["pods"], []
    assert cache_mismatches(moved, pods, nodes, "kubesched") == [
        "default/ok is bound to small but cached on gpu"
    ]
    missing_node = copy.deepcopy(doc)
    missing_node["nodes"] = [n for n in missing_node["nodes"] if n["name"] != "cordoned"]
    assert cache_mismatches(missing_node, pods, nodes, "kubesched") == [
        "node cordoned is in the API but not in the cache"
    ]
    both = copy.deepcopy(doc)
    both["assumed"] = [
        {"pod": "default/big", "uid": "u", "node": "small", "bindingFinished": False}
    ]
    assert "default/big is both assumed (on small) and queued" in cache_mismatches(
        both, pods, nodes, "kubesched", settled=False
    )
