"""Conflicts between a scheduling decision and its bind (issue 9, item 3), on the real
kube-apiserver.

The fault proxy (:mod:`tests.controlplane.faultproxy`) holds kubesched's bind until the
test has changed the world under it -- the pod deleted, the node filled by another
scheduler, deleted, or cordoned -- and has seen kubesched's cache take the change in;
then the bind goes on. What kube-scheduler does in each case is what we do:

- pod deleted: the bind gets 404; the pod is forgotten (not requeued) and a
  FailedScheduling event says, in kube-scheduler's words, ``running Bind plugin
  "DefaultBinder": pods "<name>" not found``;
- node filled by another scheduler: the API server does not check resources, so the
  bind lands and the node is over-committed (the kubelet would reject the pod with
  OutOfcpu); the cache accounts for both pods, so later decisions see the node full;
- node deleted: the API server does not check the node either: the pod is bound to a
  node that no longer exists (kube-controller-manager's pod GC deletes such pods); the
  cache keeps the pod on a node-less entry, out of every snapshot;
- node cordoned: the decision stands (cordoning is for new decisions) and the pod
  binds; later pods are refused by NodeUnschedulable.

Every test ends with the cache equal to the API (``tests/e2e/cachecheck.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from kubesched.operator.run import Runtime
from tests.controlplane import ControlPlane
from tests.controlplane.faultproxy import FaultProxy, Rule
from tests.e2e.cachecheck import assert_cache_matches_api, fetch_cache
from tests.e2e.proxied import BINDING, fault_proxy, kubesched_via
from tests.e2e.support import call, events_for, eventually
from tests.e2e.test_run import label, pod_body, read_pod

pytestmark = pytest.mark.timeout(150)

JSON = dict[str, Any]


@pytest.fixture
async def proxy(controlplane: ControlPlane) -> AsyncIterator[FaultProxy]:
    async with fault_proxy(controlplane) as fp:
        yield fp


@pytest.fixture
async def kubesched(controlplane: ControlPlane, proxy: FaultProxy) -> AsyncIterator[Runtime]:
    async with kubesched_via(proxy, controlplane, request_timeout=60.0) as rt:
        yield rt


_made: list[str] = []


@pytest.fixture(autouse=True)
def remove_nodes(controlplane: ControlPlane) -> Iterator[None]:
    """The shared control plane's other tests count its nodes in their messages: a
    node left cordoned here would read '1 node(s) were unschedulable' there."""
    yield
    while _made:
        with contextlib.suppress(Exception):
            controlplane.api.delete(f"/api/v1/nodes/{_made.pop()}")


async def one_node(cp: ControlPlane, cpu: str = "2") -> tuple[str, dict[str, str]]:
    pool = label()
    (node,) = await call(
        cp.create_nodes, 1, cpu=cpu, labels=pool, prefix=f"conflict-{next(iter(pool.values()))}-"
    )
    _made.append(node)
    return node, pool


async def held_bind(cp: ControlPlane, proxy: FaultProxy, namespace: str, body: JSON) -> Rule:
    """Create the pod with its bind held at the proxy; return once kubesched has decided."""
    rule = proxy.hold_next("POST", BINDING)
    await call(cp.api.create, body)
    await asyncio.wait_for(rule.arrived.wait(), 60)
    return rule


async def cache_sees(url: str, what: str, check: Callable[[JSON], bool]) -> None:
    await eventually(lambda: check(fetch_cache(url)), within=30, what=f"the cache seeing {what}")


def node_entry(dump: JSON, name: str) -> JSON | None:
    return next((n for n in dump["nodes"] if n["name"] == name), None)


def reasons(cp: ControlPlane, namespace: str, name: str) -> list[tuple[str, str]]:
    return [(e["reason"], e.get("note") or "") for e in events_for(cp, namespace, name)]


async def test_a_pod_deleted_while_its_bind_is_in_flight_is_forgotten(
    controlplane: ControlPlane, namespace: str, kubesched: Runtime, proxy: FaultProxy
) -> None:
    cp, url = controlplane, f"http://127.0.0.1:{kubesched.port}"
    node, pool = await one_node(cp)
    rule = await held_bind(cp, proxy, namespace, pod_body("doomed", namespace, selector=pool))
    await call(cp.api.remove, "v1", "Pod", "doomed", namespace, grace_period_seconds=0)
    await cache_sees(url, "the deletion", lambda d: not d["assumed"])
    rule.release()
    failed = await eventually(
        lambda: [n for r, n in reasons(cp, namespace, "doomed") if r == "FailedScheduling"],
        within=30,
        what="a FailedScheduling event for the deleted pod",
    )
    assert failed[0] == 'running Bind plugin "DefaultBinder": pods "doomed" not found', failed
    dump = await call(assert_cache_matches_api, url, cp.api, namespace=namespace)
    assert dump["pending"] == [] and dump["assumed"] == []
    assert node_entry(dump, node) is not None
    assert node_entry(dump, node)["pods"] == []  # type: ignore[index]
    assert [w for *_, w in proxy.log] == ["held"]


async def test_a_node_filled_behind_our_back_is_over_committed_then_seen_full(
    controlplane: ControlPlane, namespace: str, kubesched: Runtime, proxy: FaultProxy
) -> None:
    cp, url = controlplane, f"http://127.0.0.1:{kubesched.port}"
    node, pool = await one_node(cp, cpu="2")
    rule = await held_bind(
        cp, proxy, namespace, pod_body("ours", namespace, cpu="1500m", selector=pool)
    )
    # Another scheduler places its pod on the node we chose, straight at the API server.
    await call(cp.api.create, pod_body("theirs", namespace, cpu="1500m", scheduler="someone-else"))
    await call(
        cp.api.post,
        f"/api/v1/namespaces/{namespace}/pods/theirs/binding",
        {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": "theirs", "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        },
    )

    def both_counted(d: JSON) -> bool:
        n = node_entry(d, node)
        return n is not None and n["requested"]["milliCPU"] == 3000

    await cache_sees(url, "their pod beside our assumed one", both_counted)
    rule.release()
    assert await call(cp.wait_bound, "ours", namespace, 30.0) == node  # as kube-scheduler
    # A later pod of ours is refused: the cache counts both pods on the 2-CPU node.
    await call(cp.api.create, pod_body("later", namespace, cpu="100m", selector=pool))
    failed = await eventually(
        lambda: [n for r, n in reasons(cp, namespace, "later") if r == "FailedScheduling"],
        within=30,
        what="the later pod refused",
    )
    assert "Insufficient cpu" in failed[0]
    dump = await call(assert_cache_matches_api, url, cp.api, namespace=namespace)
    n = node_entry(dump, node)
    assert n is not None and n["requested"]["milliCPU"] == 3000
    assert n["allocatable"]["milliCPU"] == 2000
    assert {p["pod"] for p in n["pods"]} == {f"{namespace}/ours", f"{namespace}/theirs"}
    assert [p["pod"] for p in dump["pending"]] == [f"{namespace}/later"]
    assert (await call(read_pod, cp, namespace, "later"))["spec"].get("nodeName") is None


async def test_a_node_deleted_before_the_bind_gets_the_pod_anyway(
    controlplane: ControlPlane, namespace: str, kubesched: Runtime, proxy: FaultProxy
) -> None:
    cp, url = controlplane, f"http://127.0.0.1:{kubesched.port}"
    node, pool = await one_node(cp)
    rule = await held_bind(cp, proxy, namespace, pod_body("orphan", namespace, selector=pool))
    await call(cp.api.remove, "v1", "Node", node)

    def node_gone(d: JSON) -> bool:
        n = node_entry(d, node)
        return n is not None and not n["present"]

    await cache_sees(url, "the node deleted", node_gone)
    rule.release()
    assert await call(cp.wait_bound, "orphan", namespace, 30.0) == node
    scheduled = await eventually(
        lambda: [n for r, n in reasons(cp, namespace, "orphan") if r == "Scheduled"],
        within=30,
        what="the Scheduled event",
    )
    assert scheduled == [f"Successfully assigned {namespace}/orphan to {node}"]
    dump = await call(assert_cache_matches_api, url, cp.api, namespace=namespace)
    n = node_entry(dump, node)
    assert n is not None and not n["present"]
    assert [p["pod"] for p in n["pods"]] == [f"{namespace}/orphan"]
    # The pod leaves the cache with the pod, as pod GC would delete it.
    await call(cp.api.remove, "v1", "Pod", "orphan", namespace, grace_period_seconds=0)
    await cache_sees(url, "the orphan gone", lambda d: node_entry(d, node) is None)
    await call(assert_cache_matches_api, url, cp.api, namespace=namespace)


async def test_a_node_cordoned_before_the_bind_keeps_the_decision(
    controlplane: ControlPlane, namespace: str, kubesched: Runtime, proxy: FaultProxy
) -> None:
    cp, url = controlplane, f"http://127.0.0.1:{kubesched.port}"
    node, pool = await one_node(cp)
    rule = await held_bind(cp, proxy, namespace, pod_body("first", namespace, selector=pool))
    await call(cp.api.patch, f"/api/v1/nodes/{node}", {"spec": {"unschedulable": True}})

    def cordoned(d: JSON) -> bool:
        n = node_entry(d, node)
        return n is not None and n["unschedulable"]

    await cache_sees(url, "the cordon", cordoned)
    rule.release()
    assert await call(cp.wait_bound, "first", namespace, 30.0) == node
    await call(cp.api.create, pod_body("second", namespace, selector=pool))
    failed = await eventually(
        lambda: [n for r, n in reasons(cp, namespace, "second") if r == "FailedScheduling"],
        within=30,
        what="the second pod refused",
    )
    assert "node(s) were unschedulable" in failed[0]
    dump = await call(assert_cache_matches_api, url, cp.api, namespace=namespace)
    assert [p["pod"] for p in dump["pending"]] == [f"{namespace}/second"]
