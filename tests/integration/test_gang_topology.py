"""Topology-aware gangs (``schedulingConstraints.topology``) on the in-memory cluster."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubesched.framework.types import Pod
from kubesched.scheduler.explain import Explanation, explain_pod
from tests.builders import make_node, make_pod
from tests.integration.harness import Harness, running
from tests.integration.test_gang_scheduling import LABEL, bound, most_allocated

pytestmark = pytest.mark.looptime

ZONE = "topology.kubernetes.io/zone"


def zone_nodes(**sizes: int) -> list[dict[str, Any]]:
    out = []
    for zone, n in sizes.items():
        for i in range(n):
            node = make_node(f"{zone}-{i}").alloc(cpu="4", memory="32Gi").label(ZONE, zone)
            out.append(node.obj())
    return out


def topo_group(name: str, n: int, mode: str = "Required", key: str = ZONE) -> dict[str, Any]:
    return {
        "apiVersion": "kubesched.dev/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "minMember": n,
            "schedulingConstraints": {"topology": [{"key": key, "mode": mode}]},
        },
    }


def upstream_group(name: str, n: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulingPolicy": {"gang": {"minCount": n}},
            "schedulingConstraints": {"topology": [{"key": ZONE}]},
        },
    }


def gang(name: str, n: int, cpu: str) -> list[dict[str, Any]]:
    return [make_pod(f"{name}-{i}").req(cpu=cpu).label(LABEL, name).obj() for i in range(n)]


def zones_of(h: Harness, keys: list[str]) -> set[str]:
    return {(h.node_of(k) or "?").split("-")[0] for k in keys}


async def test_required_places_every_member_in_the_one_domain_that_holds_the_gang() -> None:
    h = Harness()
    h.apply(*zone_nodes(a=2, b=3), topo_group("g", 3), *gang("g", 3, "3"))
    keys = [f"default/g-{i}" for i in range(3)]
    async with running(h):
        await h.wait_for(lambda: bound(h, keys) == 3)
    assert zones_of(h, keys) == {"b"}


async def test_required_places_nothing_when_no_domain_holds_the_gang() -> None:
    h = Harness()
    h.apply(*zone_nodes(a=2, b=3), topo_group("g", 4), *gang("g", 4, "3"))
    keys = [f"default/g-{i}" for i in range(4)]
    async with running(h):
        await h.wait_for(lambda: all("FailedScheduling" in h.reasons(k) for k in keys))
        assert h.cluster.bindings == []
        assert h.sched.cache.pod_count() == 0
    msg = h.cluster.events_for("default/g-0")[-1].message
    assert msg.startswith(
        'pod group "default/g": 0/2 placements are available, first placement status: '
        'topology.kubernetes.io/zone="a": 2/4 members fit; 2 pods: 0/5 nodes are available: '
    )
    attempt = h.sched.gangs.last["default/g"]
    assert [(d["domain"], d["placed"], d["feasible"]) for d in attempt["domains"]] == [
        ("a", 2, False),
        ("b", 3, False),
    ]
    pod = Pod(h.cluster.pod("default/g-0"))  # type: ignore[arg-type]
    exp = explain_pod(h.sched, pod)
    # Every node is judged on the member's own fit (none rejected by Coscheduling).
    assert not [n for n in exp.nodes if n.plugin == "Coscheduling"]
    # The members' message adds gang preemption's outcome to the attempt's.
    assert exp.gang is not None and msg == exp.gang["message"] + (
        ", pod group preemption: No preemption victims found for incoming preemptor"
    )
    table = exp.table()
    assert 'Domains of "topology.kubernetes.io/zone" tried (Required; * chosen):' in table
    row_b = next(line for line in table.splitlines() if line.startswith("b "))
    assert row_b.split()[:4] == ["b", "3", "3", "no"]
    assert "3/4 members fit; 1 pod: 0/5 nodes are available" in row_b
    assert Explanation.from_dict(exp.to_dict()).gang == exp.gang


async def test_preferred_spreads_over_as_few_domains_as_possible() -> None:
    h = Harness()
    h.apply(*zone_nodes(a=2, b=3, c=1), topo_group("g", 5, "Preferred"), *gang("g", 5, "3"))
    keys = [f"default/g-{i}" for i in range(5)]
    async with running(h):
        await h.wait_for(lambda: bound(h, keys) == 5)
    assert zones_of(h, keys) == {"a", "b"}


async def test_most_allocated_picks_the_tightest_domain_leaving_the_big_one_free() -> None:
    h = Harness(profiles=[most_allocated()])
    h.apply(*zone_nodes(a=4, b=2), topo_group("g", 2), *gang("g", 2, "2"))
    keys = ["default/g-0", "default/g-1"]
    async with running(h):
        await h.wait_for(lambda: bound(h, keys) == 2)
    assert zones_of(h, keys) == {"b"}


async def test_least_allocated_picks_the_emptiest_domain() -> None:
    h = Harness()
    busy = make_pod("busy").req(cpu="3").node("b-0").obj()
    h.apply(*zone_nodes(a=2, b=2), busy, topo_group("g", 2), *gang("g", 2, "1"))
    keys = ["default/g-0", "default/g-1"]
    async with running(h):
        await h.wait_for(lambda: bound(h, keys) == 2)
    assert zones_of(h, keys) == {"a"}


async def test_upstream_pod_group_topology_and_replacements_stay_in_the_domain() -> None:
    h = Harness()
    pods = []
    for i in range(3):
        p = make_pod(f"up-{i}").req(cpu="1").obj()
        p["spec"]["schedulingGroup"] = {"podGroupName": "up"}
        pods.append(p)
    h.apply(*zone_nodes(a=1, b=3), upstream_group("up", 3), *pods)
    keys = [f"default/up-{i}" for i in range(3)]
    async with running(h):
        await h.wait_for(lambda: bound(h, keys) == 3)
        zone = zones_of(h, keys)
        assert len(zone) == 1
        h.cluster.delete("Pod", "default/up-0")
        await h.wait_for(lambda: h.sched.cache.pod_count() == 2)
        p = make_pod("up-3").req(cpu="1").obj()
        p["spec"]["schedulingGroup"] = {"podGroupName": "up"}
        h.apply(p)
        await h.wait_for(lambda: bound(h, ["default/up-3"]) == 1)
    assert zones_of(h, ["default/up-3"]) == zone


async def test_a_topology_key_no_node_carries_is_reported() -> None:
    h = Harness()
    h.apply(*zone_nodes(a=2), topo_group("g", 2, key="example.com/rack"), *gang("g", 2, "1"))
    async with running(h):
        await h.wait_for(lambda: "FailedScheduling" in h.reasons("default/g-0"))
    assert h.cluster.bindings == []
    assert h.cluster.events_for("default/g-0")[-1].message == (
        'pod group "default/g": no node has the topology label "example.com/rack", '
        "pod group preemption: No preemption victims found for incoming preemptor"
    )


async def test_a_spare_member_stays_in_its_gangs_required_domain() -> None:
    h = Harness()
    h.apply(*zone_nodes(a=1, b=1), topo_group("g", 1), *gang("g", 2, "3"))
    keys = ["default/g-0", "default/g-1"]
    async with running(h):
        await h.wait_for(lambda: bound(h, keys) == 1)
        spare = next(k for k in keys if not h.node_of(k))
        await h.wait_for(lambda: "FailedScheduling" in h.reasons(spare))
        # Room in the other zone, none in the gang's: the spare stays pending.
        await asyncio.sleep(60)
        assert h.node_of(spare) is None
    assert h.cluster.events_for(spare)[-1].message.startswith("0/2 nodes are available: ")
