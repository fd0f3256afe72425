"""Gang-aware preemption on the in-memory cluster, in virtual time.

Nodes are full of lower-priority pods bound beforehand; a high-priority gang arrives.
What a user sees: which pods were preempted (gone, with a ``Preempted`` event), whether
the gang binds, the members' reason, and that nothing is evicted for a gang that would
not fit anyway.
"""

from __future__ import annotations

import asyncio
import pathlib
from typing import Any

import orjson
import pytest
import yaml

from kubesched import cli
from tests.builders import make_node, make_pod
from tests.integration.harness import Harness, running
from tests.integration.test_gang_scheduling import LABEL, bound, pod_group

pytestmark = pytest.mark.looptime

FOUND = "pod group preemption: found a placement for podgroup, preempting {} victims"


def nodes(n: int, cpu: str = "4") -> list[dict[str, Any]]:
    return [make_node(f"n{i}").alloc(cpu=cpu, memory="32Gi").obj() for i in range(1, n + 1)]


def member(name: str, group: str, prio: int, cpu: str = "2", node: str = "") -> dict[str, Any]:
    b = make_pod(name).req(cpu=cpu).priority(prio).label(LABEL, group)
    return (b.node(node) if node else b).obj()


def upstream_member(name: str, group: str, prio: int, node: str) -> dict[str, Any]:
    obj = make_pod(name).req(cpu="2").priority(prio).node(node).obj()
    obj["spec"]["schedulingGroup"] = {"podGroupName": group}
    return obj


def upstream_group(name: str, min_count: int, mode: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulingPolicy": {"gang": {"minCount": min_count}},
            "disruptionMode": {mode: {}},
        },
    }


def high_gang(n: int, cpu: str = "2") -> list[dict[str, Any]]:
    return [pod_group("high", n), *(member(f"high-{i}", "high", 100, cpu) for i in range(n))]


def gone(h: Harness, keys: list[str]) -> bool:
    return all(h.cluster.pod(k) is None for k in keys)


async def attempts(h: Harness, key: str, n: int) -> None:
    """Until ``key`` has ``n`` FailedScheduling events. Polled without advancing virtual
    time first: a failing gang may be retried at once, keeping the loop busy."""
    for _ in range(200):
        for _ in range(500):
            if h.reasons(key).count("FailedScheduling") >= n:
                return
            await asyncio.sleep(0)
        await asyncio.sleep(0.05)
    raise AssertionError(f"{key} was not attempted {n} times")


def cache_matches_cluster(h: Harness) -> None:
    api: dict[str, list[str]] = {}
    for key, raw in h.cluster.objects.get("Pod", {}).items():
        node = (raw.get("spec") or {}).get("nodeName")
        if node:
            api.setdefault(node, []).append(key)
    cache = {n: keys for n, keys in h.sched.cache.dump().items() if keys}
    assert cache == {n: sorted(keys) for n, keys in api.items()}


async def test_high_priority_gang_evicts_two_low_gangs_whole_and_binds() -> None:
    h = Harness()
    low = [
        member("a-0", "a", 1, node="n1"),
        member("a-1", "a", 1, node="n2"),
        member("b-0", "b", 1, node="n1"),
        member("b-1", "b", 1, node="n2"),
    ]
    h.apply(*nodes(2), pod_group("a", 2), pod_group("b", 2), *low)
    victims = ["default/a-0", "default/a-1", "default/b-0", "default/b-1"]
    high = [f"default/high-{i}" for i in range(4)]
    async with running(h):
        await h.wait_for(lambda: h.sched.cache.pod_count() == 4)
        h.apply(*high_gang(4))
        await h.wait_for(lambda: bound(h, high) == 4)
        assert gone(h, victims)
        cache_matches_cluster(h)
    for v in victims:
        (event,) = [e for e in h.cluster.events_for(v) if e.reason == "Preempted"]
        assert event.message.startswith("Preempted by podgroup ")
        assert event.message.endswith(" on node cluster")
    first = [e for e in h.cluster.events_for("default/high-0") if e.reason == "FailedScheduling"]
    assert first and first[0].message.endswith(FOUND.format(4))
    assert first[0].message.startswith('pod group "default/high": ')
    # kube-scheduler's histogram for a pod group's preemption: one, of four victims
    metric = h.sched.metrics.registry.get_sample_value
    assert metric("scheduler_workload_preemption_victims_count", {}) == 1
    assert metric("scheduler_workload_preemption_victims_sum", {}) == 4
    assert metric("scheduler_preemption_victims_count", {}) == 0


async def test_gang_that_cannot_fit_even_after_evicting_everything_evicts_nothing() -> None:
    h = Harness()
    low = [member("a-0", "a", 1, node="n1"), member("a-1", "a", 1, node="n2")]
    h.apply(*nodes(2), pod_group("a", 2), *low)
    async with running(h):
        await h.wait_for(lambda: h.sched.cache.pod_count() == 2)
        h.apply(*high_gang(5))  # 5 x 2 cpu on 2 x 4 cpu: never fits
        # One attempt, then time for an eviction it decided to be carried out (the gang
        # then waits for the cluster to change: it is not retried at once).
        await attempts(h, "default/high-0", 1)
        await asyncio.sleep(15)
        assert h.cluster.pod("default/a-0") is not None
        assert h.cluster.pod("default/a-1") is not None
        assert bound(h, ["default/a-0", "default/a-1"]) == 2
        assert not any("Preempted" in h.reasons(k) for k in ["default/a-0", "default/a-1"])
    msg = h.cluster.events_for("default/high-0")[-1].message
    assert ", pod group preemption: " in msg
    assert "found a placement" not in msg


async def test_a_gang_that_never_preempts_evicts_nothing_and_says_why() -> None:
    h = Harness()
    low = [member("a-0", "a", 1, node="n1"), member("a-1", "a", 1, node="n1")]
    h.apply(*nodes(1), pod_group("a", 2), *low)
    gang = high_gang(2)
    for p in gang[1:]:
        p["spec"]["preemptionPolicy"] = "Never"
    async with running(h):
        await h.wait_for(lambda: h.sched.cache.pod_count() == 2)
        h.apply(*gang)
        await attempts(h, "default/high-0", 1)
        await asyncio.sleep(15)
        assert bound(h, ["default/a-0", "default/a-1"]) == 2
    msg = h.cluster.events_for("default/high-0")[-1].message
    assert msg.endswith(", pod group preemption: not eligible due to preemptionPolicy=Never.")


async def test_members_already_nominated_do_not_count_twice_in_the_dry_run() -> None:
    # Both members carry status.nominatedNodeName n1 (an earlier preemption) while n1 is
    # still full: placed on n1 in the dry run, a member must not also count as nominated
    # there, or the gang would never fit and nothing be evicted.
    h = Harness()
    low = [member("x", "", 1, node="n1"), member("y", "", 1, node="n1")]
    for p in low:
        del p["metadata"]["labels"][LABEL]
    gang = high_gang(2)
    for p in gang[1:]:
        p["status"]["nominatedNodeName"] = "n1"
    h.apply(*nodes(1), *low)
    async with running(h):
        await h.wait_for(lambda: h.sched.cache.pod_count() == 2)
        h.apply(*gang)
        await h.wait_for(lambda: bound(h, ["default/high-0", "default/high-1"]) == 2)
        assert gone(h, ["default/x", "default/y"])


async def test_pdb_protected_victim_is_kept_when_another_will_do() -> None:
    # p (app=db, its PDB allows no disruption) and q (higher priority) fill the node;
    # the gang needs half of it. Without the PDB, q (more important) would be kept.
    h = Harness()
    p = make_pod("p").req(cpu="2").priority(1).labels(app="db").node("n1").obj()
    q = make_pod("q").req(cpu="2").priority(2).node("n1").obj()
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "db", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "db"}}},
        "status": {"disruptionsAllowed": 0},
    }
    h.apply(*nodes(1), budget, p, q)
    high = ["default/high-0", "default/high-1"]
    async with running(h):
        await h.wait_for(lambda: h.sched.cache.pod_count() == 2)
        h.apply(*high_gang(2, cpu="1"))
        await h.wait_for(lambda: bound(h, high) == 2)
        assert h.cluster.pod("default/q") is None
        assert h.node_of("default/p") == "n1"
        cache_matches_cluster(h)


@pytest.mark.parametrize(
    ("min_count", "evicted"),
    [(2, 1), (3, 3)],
    ids=["single-member-goes-alone-gang-keeps-min", "single-gang-at-min-goes-whole"],
)
async def test_single_disruption_never_leaves_a_gang_below_its_minimum(
    min_count: int, evicted: int
) -> None:
    h = Harness()
    low = [upstream_member(f"s-{i}", "s", 1, f"n{i + 1}") for i in range(3)]
    h.apply(*nodes(3, cpu="2"), upstream_group("s", min_count, "single"), *low)
    keys = [f"default/s-{i}" for i in range(3)]
    async with running(h):
        await h.wait_for(lambda: h.sched.cache.pod_count() == 3)
        h.apply(*high_gang(1))
        await h.wait_for(lambda: bound(h, ["default/high-0"]) == 1)
        assert sum(1 for k in keys if h.cluster.pod(k) is None) == evicted
        cache_matches_cluster(h)


async def test_required_topology_gang_evicts_in_one_domain_only() -> None:
    # Zones a and b of two full 2-cpu nodes each; the gang (2 x 2 cpu, Required zone)
    # needs one whole zone: the pods of the other zone stay.
    h = Harness()
    zone = "topology.kubernetes.io/zone"
    ns = [
        make_node(f"{z}-{i}").alloc(cpu="2", memory="32Gi").label(zone, z).obj()
        for z in "ab"
        for i in range(2)
    ]
    low = [
        make_pod(f"low-{n['metadata']['name']}")
        .req(cpu="2")
        .priority(1)
        .node(n["metadata"]["name"])
        .obj()
        for n in ns
    ]
    group = pod_group("high", 2, schedulingConstraints={"topology": [{"key": zone}]})
    h.apply(*ns, *low)
    high = ["default/high-0", "default/high-1"]
    async with running(h):
        await h.wait_for(lambda: h.sched.cache.pod_count() == 4)
        h.apply(group, *(member(f"high-{i}", "high", 100) for i in range(2)))
        await h.wait_for(lambda: bound(h, high) == 2)
        evicted = {
            k for k in (f"default/{p['metadata']['name']}" for p in low) if not h.cluster.pod(k)
        }
        zones = {(h.node_of(k) or "?")[0] for k in high}
        assert len(zones) == 1
        (z,) = zones
        assert evicted == {f"default/low-{z}-0", f"default/low-{z}-1"}
        cache_matches_cluster(h)


# -- kubesched simulate: what a gang would evict -----------------------------------------------------
SCENARIO = """
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: low}
value: 1
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 100
"""


def scenario_docs() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = [*nodes(2), pod_group("a", 2), pod_group("b", 2)]
    for g, i, n in [("a", 0, "n1"), ("a", 1, "n2"), ("b", 0, "n1"), ("b", 1, "n2")]:
        p = member(f"{g}-{i}", g, 1, node=n)
        del p["spec"]["priority"]
        p["spec"]["priorityClassName"] = "low"
        docs.append(p)
    docs.append(pod_group("high", 4))
    for i in range(4):
        p = member(f"high-{i}", "high", 100)
        del p["spec"]["priority"]
        p["spec"]["priorityClassName"] = "high"
        docs.append(p)
    return docs


def write_scenario(tmp_path: pathlib.Path) -> str:
    path = tmp_path / "gang-preemption.yaml"
    path.write_text(SCENARIO + "---\n" + yaml.safe_dump_all(scenario_docs()))
    return str(path)


def test_simulate_reports_what_the_gang_preempted(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_scenario(tmp_path)
    assert cli.main(["simulate", "--scenario", path, "--output", "json"]) == 0
    out = orjson.loads(capsys.readouterr().out)
    victims = ["default/a-0", "default/a-1", "default/b-0", "default/b-1"]
    assert sorted(out["preempted"]) == victims
    assert out["preemptedBy"] == {v: "pod group default/high" for v in victims}
    assert {p["name"]: p["status"] for p in out["pods"]} == {
        f"high-{i}": "Scheduled" for i in range(4)
    }
    assert cli.main(["simulate", "--scenario", path]) == 0
    table = capsys.readouterr().out
    assert "PREEMPTED     BY\n" in table
    for v in victims:
        assert f"{v}   pod group default/high\n" in table
