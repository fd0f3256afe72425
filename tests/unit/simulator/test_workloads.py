"""Generated workloads: scheduler_perf's templates, valid scenarios, sized as asked."""

from __future__ import annotations

from collections import Counter

import pytest

from kubesched.framework.types import Node, Pod
from kubesched.simulator.scenario import Document, prepare
from kubesched.simulator.workloads import WORKLOADS, ZONES, generate, plan

ZONE = "topology.kubernetes.io/zone"


def split(name: str, nodes: int, pods: int) -> tuple[list[Node], list[Pod]]:
    objs = generate(name, nodes, pods)
    return (
        [Node(o) for o in objs if o["kind"] == "Node"],
        [Pod(o) for o in objs if o["kind"] == "Pod"],
    )


def test_scheduling_basic_matches_scheduler_perf_templates() -> None:
    nodes, pods = split("SchedulingBasic", 6, 9)
    assert len(nodes) == 6 and len(pods) == 9
    for n in nodes:
        assert (n.allocatable.milli_cpu, n.allocatable.memory, n.allocatable.allowed_pods) == (
            4000,
            32 * 2**30,
            110,
        )
        assert not n.taints and not n.unschedulable
    assert Counter(n.labels[ZONE] for n in nodes) == {z: 2 for z in ZONES}
    for p in pods:
        assert (p.requests.milli_cpu, p.requests.memory) == (100, 500 * 2**20)
        assert not p.node_name
    assert len({p.name for p in pods}) == 9


def test_nodes_come_before_pods() -> None:
    kinds = [o["kind"] for o in generate("SchedulingBasic", 3, 4)]
    assert kinds == ["Node"] * 3 + ["Pod"] * 4


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_every_workload_is_a_valid_scenario(name: str) -> None:
    docs = [Document(f"workload {name}", i, o) for i, o in enumerate(generate(name, 5, 10))]
    objs = prepare(docs)
    pods = [o for o in objs if o["kind"] == "Pod"]
    p = plan(name, 5, 10)
    assert len(p.measured) == 10
    assert len(pods) == len(p.init) + len(p.gated) + 10
    assert {p["spec"]["schedulerName"] for p in pods} == {"kubesched"}


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_defaults_apply_when_sizes_are_omitted(name: str) -> None:
    w = WORKLOADS[name]
    p = plan(name)
    assert (len(p.nodes), len(p.measured)) == (w.default_nodes, w.default_pods)
    kinds = Counter(o["kind"] for o in generate(name))
    assert kinds["Node"] == w.default_nodes
    assert kinds["Pod"] == len(p.init) + len(p.gated) + w.default_pods


def test_node_affinity_pods_require_two_of_three_zones() -> None:
    nodes, pods = split("SchedulingNodeAffinity", 6, 1)
    terms = pods[0].affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    (expr,) = terms["nodeSelectorTerms"][0]["matchExpressions"]
    assert (expr["key"], expr["operator"]) == (ZONE, "In")
    assert sum(n.labels[ZONE] in expr["values"] for n in nodes) == 4


def test_spreading_and_anti_affinity_pods_select_each_other() -> None:
    _, spread = split("TopologySpreading", 1, 2)
    (c,) = spread[0].spec["topologySpreadConstraints"]
    assert c["labelSelector"]["matchLabels"].items() <= spread[1].labels.items()
    _, anti = split("SchedulingPodAntiAffinity", 1, 2)
    assert anti[0].has_required_anti_affinity()
    (term,) = anti[0].affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["labelSelector"]["matchLabels"].items() <= anti[1].labels.items()
    assert term["topologyKey"] == "kubernetes.io/hostname"


@pytest.mark.parametrize(
    ("name", "nodes", "pods", "message"),
    [
        pytest.param("Nope", 1, 1, "unknown workload 'Nope' (known: SchedulingBasic", id="unknown"),
        pytest.param("SchedulingBasic", -1, 1, "must not be negative", id="negative-nodes"),
        pytest.param("SchedulingBasic", 1, -5, "must not be negative", id="negative-pods"),
    ],
)
def test_bad_requests_are_refused(name: str, nodes: int, pods: int, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        generate(name, nodes, pods)


def test_symmetric_anti_affinity_pods_select_each_other_in_ten_groups() -> None:
    _, pods = split("PodAntiAffinitySymmetric", 3, 20)
    assert Counter(p.labels["group"] for p in pods) == {f"g{g}": 2 for g in range(10)}
    for p in pods:
        (req,) = p.affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert req["topologyKey"] == "kubernetes.io/hostname"
        # the placed pods' required term selects every later pod of the same group
        selected = [
            q for q in pods if req["labelSelector"]["matchLabels"].items() <= q.labels.items()
        ]
        assert selected == [q for q in pods if q.labels["group"] == p.labels["group"]]
        assert p.affinity["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        assert p.affinity["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]


def test_mixed_affinity_spread_pods_spread_and_carry_affinity() -> None:
    _, pods = split("MixedAffinitySpread", 3, 10)
    for p in pods:
        keys = [c["topologyKey"] for c in p.spec["topologySpreadConstraints"]]
        assert keys == [ZONE, "kubernetes.io/hostname"]
        assert p.has_required_anti_affinity()
        assert p.affinity["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]


@pytest.mark.parametrize("name", ["PodAntiAffinitySymmetric", "MixedAffinitySpread"])
def test_ten_group_workloads_refuse_more_pods_than_ten_per_node(name: str) -> None:
    from kubesched.simulator.workloads import check_fits

    check_fits(plan(name, 3, 30))
    with pytest.raises(ValueError, match="--pods 31 needs 4 nodes, got --nodes 3"):
        check_fits(plan(name, 3, 31))


def test_dra_workload_is_scheduler_perfs_claim_template_case() -> None:
    """One ResourceSlice of 8 devices per node (a pool each, on that node), the class's
    CEL selector on the driver, and every pod claiming one device from the template."""
    from kubesched.simulator.workloads import DEVICES_PER_NODE, check_fits

    p = plan("SchedulingWithResourceClaimTemplate", 3, 24)
    by_kind = Counter(o["kind"] for o in p.setup)
    assert by_kind == {"DeviceClass": 1, "ResourceClaimTemplate": 1, "ResourceSlice": 3}
    slices = [o for o in p.setup if o["kind"] == "ResourceSlice"]
    assert [s["spec"]["nodeName"] for s in slices] == [n["metadata"]["name"] for n in p.nodes]
    assert len({s["spec"]["pool"]["name"] for s in slices}) == 3
    assert all(len(s["spec"]["devices"]) == DEVICES_PER_NODE == 8 for s in slices)
    (cls,) = [o for o in p.setup if o["kind"] == "DeviceClass"]
    driver = slices[0]["spec"]["driver"]
    assert cls["spec"]["selectors"] == [{"cel": {"expression": f'device.driver == "{driver}"'}}]
    for pod in p.measured:
        assert pod["spec"]["resourceClaims"] == [
            {"name": "resource", "resourceClaimTemplateName": "test-claim-template"}
        ]
        assert pod["spec"]["containers"][0]["resources"]["claims"] == [{"name": "resource"}]
    check_fits(p)
    with pytest.raises(ValueError, match=r"--pods 25 > 8 x --nodes 3"):
        check_fits(plan("SchedulingWithResourceClaimTemplate", 3, 25))
