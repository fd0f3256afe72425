from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import ActionType, ClusterEvent, EventResource
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Code, Status
from kubesched.framework.types import Pod
from kubesched.plugins import pod_topology_spread as pts
from kubesched.simulator.engine import simulate
from tests.builders import NodeBuilder, PodBuilder, make_node, make_pod
from tests.unit.plugins.fakes import FakeHandle

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
NOT_MATCH = Status.unschedulable(
    "node(s) didn't match pod topology spread constraints", plugin="PodTopologySpread"
)
MISSING = Status.unresolvable(
    "node(s) didn't match pod topology spread constraints (missing required label)",
    plugin="PodTopologySpread",
)


def tsc(
    max_skew: int = 1,
    key: str = ZONE,
    when: str = "DoNotSchedule",
    selector: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    c: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when}
    c["labelSelector"] = {"matchLabels": {"app": "web"}} if selector is None else selector
    c.update(extra)
    return c


def web(name: str, **labels: str) -> PodBuilder:
    return make_pod(name).labels(app="web", **labels)


def spreading(*constraints: dict[str, Any], name: str = "incoming") -> PodBuilder:
    return web(name).spec(topologySpreadConstraints=list(constraints))


def cluster(*nodes: tuple[NodeBuilder, int]) -> Snapshot:
    """Nodes, each with that many ``app: web`` pods on it."""
    infos = []
    for nb, n in nodes:
        name = nb.obj()["metadata"]["name"]
        infos.append(nb.info(*(web(f"{name}-p{i}").node(name).pod() for i in range(n))))
    return Snapshot(infos)


def plugin(snap: Snapshot, store: Any = None, **args: Any) -> pts.PodTopologySpread:
    handle = FakeHandle(snap)
    if store is not None:
        handle._store = store
    return pts.new(pts.Args.model_validate(args), handle)


def run_filter(snap: Snapshot, pod: Pod, **args: Any) -> dict[str, Status | None]:
    pl = plugin(snap, **args)
    state = CycleState()
    _, s = pl.pre_filter(state, pod, snap.node_infos)
    assert s is None
    out = {ni.name: pl.filter(state, pod, ni) for ni in snap.node_infos}
    mask = pl.filter_mask(state, pod, snap)
    assert mask is not None
    assert mask.tolist() == [out[ni.name] is None for ni in snap.node_infos]
    return out


def three_zones(a: int, b: int, c: int) -> Snapshot:
    return cluster(
        (make_node("a").zone("z1"), a),
        (make_node("b").zone("z2"), b),
        (make_node("c").zone("z3"), c),
    )


# -- Filter -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("snap", "pod", "expected"),
    [
        pytest.param(
            three_zones(1, 0, 0),
            spreading(tsc()).pod(),
            {"a": NOT_MATCH, "b": None, "c": None},
            id="skew-1+1-0-exceeds-maxSkew-1",
        ),
        pytest.param(
            three_zones(1, 1, 0),
            spreading(tsc(2)).pod(),
            {"a": None, "b": None, "c": None},
            id="maxSkew-2-allows-1+1-0",
        ),
        pytest.param(
            cluster((make_node("a").zone("z1"), 0), (make_node("n"), 0)),
            spreading(tsc()).pod(),
            {"a": None, "n": MISSING},
            id="node-without-topology-key-unresolvable",
        ),
        pytest.param(
            three_zones(2, 2, 2),
            spreading(tsc(1, minDomains=4)).pod(),
            {"a": NOT_MATCH, "b": NOT_MATCH, "c": NOT_MATCH},
            id="fewer-domains-than-minDomains-global-min-is-0",
        ),
        pytest.param(
            three_zones(2, 2, 2),
            spreading(tsc(1, minDomains=3)).pod(),
            {"a": None, "b": None, "c": None},
            id="enough-domains-for-minDomains",
        ),
        pytest.param(
            three_zones(2, 1, 1),
            spreading(tsc(selector={"matchLabels": {"app": "db"}})).pod(),
            {"a": None, "b": None, "c": None},
            id="selector-matches-nothing-skew-0",
        ),
        pytest.param(
            three_zones(1, 0, 0),
            make_pod("incoming").labels(app="other").spec(topologySpreadConstraints=[tsc()]).pod(),
            {"a": None, "b": None, "c": None},
            id="no-self-match-1+0-0-fits",
        ),
        pytest.param(
            three_zones(2, 1, 0),
            spreading(tsc()).node_selector(**{ZONE: "z1"}).pod(),
            # Honor: only z1 counts, so min is z1's 2 and z1 itself gives 2+1-2 = 1.
            {"a": None, "b": None, "c": None},
            id="nodeAffinityPolicy-Honor-narrows-domains",
        ),
        pytest.param(
            three_zones(2, 1, 0),
            spreading(tsc(nodeAffinityPolicy="Ignore")).node_selector(**{ZONE: "z1"}).pod(),
            {"a": NOT_MATCH, "b": NOT_MATCH, "c": None},
            id="nodeAffinityPolicy-Ignore-counts-all-nodes",
        ),
        pytest.param(
            cluster(
                (make_node("a").zone("z1"), 1),
                (make_node("b").zone("z2").taint("dedicated", "x"), 0),
            ),
            spreading(tsc(nodeTaintsPolicy="Honor")).pod(),
            # The tainted z2 does not count: z1 is the only domain, min 1, 1+1-1 = 1.
            {"a": None, "b": None},
            id="nodeTaintsPolicy-Honor-skips-untolerated-taints",
        ),
        pytest.param(
            cluster(
                (make_node("a").zone("z1"), 1),
                (make_node("b").zone("z2").taint("dedicated", "x"), 0),
            ),
            spreading(tsc()).pod(),
            {"a": NOT_MATCH, "b": None},
            id="nodeTaintsPolicy-Ignore-counts-tainted-nodes",
        ),
        pytest.param(
            cluster((make_node("a").zone("z1"), 1), (make_node("b").zone("z2"), 0)),
            spreading(tsc(selector={}, matchLabelKeys=["rev"])).label("rev", "2").pod(),
            # The existing pod has no rev=2 label: nothing matches, every skew is 1.
            {"a": None, "b": None},
            id="matchLabelKeys-narrow-the-selector",
        ),
        pytest.param(
            cluster((make_node("a").zone("z1"), 1), (make_node("b").zone("z2"), 0)),
            spreading(tsc(selector={}, matchLabelKeys=["missing"])).pod(),
            {"a": NOT_MATCH, "b": None},
            id="matchLabelKeys-absent-on-pod-ignored",
        ),
        pytest.param(
            cluster(
                (make_node("a").zone("z1").label(HOST, "a"), 1),
                (make_node("b").zone("z2"), 0),
                (make_node("c").label(HOST, "c"), 0),
            ),
            spreading(tsc(), tsc(1, HOST)).pod(),
            # c lacks the zone: it counts for no constraint, and fails with missing label.
            {"a": NOT_MATCH, "b": None, "c": MISSING},
            id="two-constraints-node-needs-every-key",
        ),
    ],
)
def test_filter(snap: Snapshot, pod: Pod, expected: dict[str, Status | None]) -> None:
    assert run_filter(snap, pod) == expected


def test_pods_in_other_namespaces_and_terminating_pods_do_not_count() -> None:
    other = make_pod("o", "other").labels(app="web").node("a").pod()
    dying_obj = web("d").node("a").obj()
    dying_obj["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    snap = Snapshot(
        [make_node("a").zone("z1").info(other, Pod(dying_obj)), make_node("b").zone("z2").info()]
    )
    assert run_filter(snap, spreading(tsc()).pod()) == {"a": None, "b": None}


def test_no_hard_constraints_skips() -> None:
    snap = three_zones(0, 0, 0)
    pl = plugin(snap)
    _, s = pl.pre_filter(CycleState(), spreading(tsc(when="ScheduleAnyway")).pod(), snap.node_infos)
    assert s is not None and s.code == Code.SKIP
    _, s = pl.pre_filter(CycleState(), web("plain").pod(), snap.node_infos)
    assert s is not None and s.code == Code.SKIP


def test_bad_selector_is_an_error() -> None:
    snap = three_zones(0, 0, 0)
    bad = tsc(selector={"matchExpressions": [{"key": "app", "operator": "Bogus"}]})
    _, s = plugin(snap).pre_filter(CycleState(), spreading(bad).pod(), snap.node_infos)
    assert s is not None and s.code == Code.ERROR


def test_add_and_remove_pod_update_counts_on_a_clone() -> None:
    snap = three_zones(1, 1, 0)
    pl = plugin(snap)
    pod = spreading(tsc()).pod()
    state = CycleState()
    pl.pre_filter(state, pod, snap.node_infos)
    a, b, c = snap.node_infos
    assert pl.filter(state, pod, c) is None
    added = state.clone()
    assert pl.add_pod(added, pod, web("nominated").node("c").pod(), c) is None
    # z3 now has 1: min is 1 everywhere, every zone fits.
    assert [pl.filter(added, pod, ni) for ni in (a, b, c)] == [None, None, None]
    assert pl.filter(state, pod, a) == NOT_MATCH, "the original state is untouched"
    removed = state.clone()
    assert pl.remove_pod(removed, pod, a.pods[0], a) is None
    assert pl.filter(removed, pod, a) is None
    assert pl.filter(removed, pod, b) == NOT_MATCH
    # A pod of another namespace changes nothing.
    pl.add_pod(added, pod, make_pod("x", "other").labels(app="web").pod(), a)
    assert pl.filter(added, pod, a) is None


def test_counts_follow_cache_changes_between_cycles() -> None:
    snap = three_zones(0, 0, 0)
    pl = plugin(snap)
    pod = spreading(tsc()).pod()
    state = CycleState()
    pl.pre_filter(state, pod, snap.node_infos)
    assert pl.filter_mask(state, pod, snap) is not None
    snap.node_infos[0].add_pod(web("new").node("a").pod())  # generation moves
    assert run_filter(snap, pod) == {"a": NOT_MATCH, "b": None, "c": None}
    pl2_state = CycleState()
    pl.pre_filter(pl2_state, pod, snap.node_infos)
    assert pl.filter(pl2_state, pod, snap.node_infos[0]) == NOT_MATCH


# -- vector == scalar -----------------------------------------------------------------------------
@st.composite
def spread_clusters(draw: st.DrawFn) -> tuple[list[NodeInfo], Pod]:
    infos = []
    for i in range(draw(st.integers(1, 8))):
        nb = make_node(f"n{i}")
        zone = draw(st.sampled_from(("z1", "z2", "z3", None)))
        if zone is not None:
            nb.zone(zone)
        if draw(st.integers(0, 4)) == 0:
            nb.taint("t", "x")
        pods = [
            make_pod(f"n{i}-p{j}")
            .labels(app=draw(st.sampled_from(("web", "db"))))
            .node(f"n{i}")
            .pod()
            for j in range(draw(st.integers(0, 3)))
        ]
        infos.append(nb.info(*pods))
    constraints = [
        tsc(
            draw(st.integers(1, 3)),
            draw(st.sampled_from((ZONE, HOST))),
            draw(st.sampled_from(("DoNotSchedule", "ScheduleAnyway"))),
            minDomains=draw(st.integers(1, 4)),
            nodeTaintsPolicy=draw(st.sampled_from(("Honor", "Ignore"))),
        )
        for _ in range(draw(st.integers(1, 2)))
    ]
    pb = spreading(*constraints)
    if draw(st.booleans()):
        pb.node_selector(**{ZONE: draw(st.sampled_from(("z1", "z2")))})
    return infos, pb.pod()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spread_clusters())
def test_vector_equals_scalar(case: tuple[list[NodeInfo], Pod]) -> None:
    infos, pod = case
    snap = Snapshot(infos)
    pl = plugin(snap)
    state = CycleState()
    _, s = pl.pre_filter(state, pod, snap.node_infos)
    if s is None:
        mask = pl.filter_mask(state, pod, snap)
        assert mask is not None
        assert mask.tolist() == [pl.filter(state, pod, ni) is None for ni in snap.node_infos]
    feasible = snap.node_infos[::2]
    if pl.pre_score(state, pod, feasible) is None:
        rows = np.array([ni.index for ni in feasible], dtype=np.intp)
        vec = pl.score_vector(state, pod, snap, rows)
        assert vec is not None
        scalar = [pl.score(state, pod, ni)[0] for ni in feasible]
        assert vec.tolist() == scalar


# -- Score ---------------------------------------------------------------------------------------
def scores(
    pl: pts.PodTopologySpread, snap: Snapshot, pod: Pod, feasible: list[NodeInfo]
) -> tuple[list[int], list[int]]:
    state = CycleState()
    assert pl.pre_score(state, pod, feasible) is None
    raw = [pl.score(state, pod, ni)[0] for ni in feasible]
    rows = np.array([ni.index for ni in feasible], dtype=np.intp)
    vec = pl.score_vector(state, pod, snap, rows)
    assert vec is not None and vec.tolist() == raw
    pl.normalize_score(state, pod, vec)
    return raw, vec.tolist()


def test_score_zone_spreading_hand_computed() -> None:
    snap = cluster(
        (make_node("a").zone("z1"), 2),
        (make_node("b").zone("z2"), 1),
        (make_node("c").zone("z2"), 0),
        (make_node("d"), 5),
    )
    pod = spreading(tsc(1, when="ScheduleAnyway")).pod()
    raw, norm = scores(plugin(snap), snap, pod, list(snap.node_infos))
    w = math.log(2 + 2)  # two zones among the feasible nodes
    assert raw == [round(2 * w), round(1 * w), round(1 * w), 0]  # 3, 1, 1; d is ignored
    # 100 * (max + min - s) / max over the non-ignored nodes; ignored nodes get 0.
    assert norm == [100 * (3 + 1 - 3) // 3, 100, 100, 0]


def test_score_hostname_counts_per_node_and_maxskew_offset() -> None:
    snap = cluster((make_node("a"), 3), (make_node("b"), 1), (make_node("c"), 0))
    pod = spreading(tsc(2, HOST, "ScheduleAnyway")).pod()
    raw, norm = scores(plugin(snap), snap, pod, list(snap.node_infos))
    w = math.log(3 + 2)  # hostname: the number of feasible nodes
    assert raw == [math.floor(3 * w + 1 + 0.5), math.floor(w + 1 + 0.5), 1]  # 6, 3, 1
    assert norm == [100 * (6 + 1 - 6) // 6, 100 * (6 + 1 - 3) // 6, 100]


def test_score_counts_domains_of_feasible_nodes_over_all_nodes() -> None:
    snap = cluster(
        (make_node("a").zone("z1"), 1),
        (make_node("b").zone("z1"), 2),
        (make_node("c").zone("z2"), 0),
    )
    pod = spreading(tsc(1, when="ScheduleAnyway")).pod()
    a, _, c = snap.node_infos
    raw, norm = scores(plugin(snap), snap, pod, [a, c])
    w = math.log(2 + 2)
    assert raw == [round(3 * w), 0]  # z1 counts b's pods though b is not feasible
    assert norm == [100 * (4 + 0 - 4) // 4, 100]


def test_score_all_zero_gives_max() -> None:
    snap = three_zones(0, 0, 0)
    pod = spreading(tsc(1, when="ScheduleAnyway")).pod()
    assert scores(plugin(snap), snap, pod, list(snap.node_infos))[1] == [100, 100, 100]


def test_no_soft_constraints_skips_prescore() -> None:
    snap = three_zones(0, 0, 0)
    s = plugin(snap).pre_score(CycleState(), spreading(tsc()).pod(), list(snap.node_infos))
    assert s is not None and s.code == Code.SKIP


# -- default constraints ----------------------------------------------------------------------------
class Store:
    def __init__(self, *objs: dict[str, Any]) -> None:
        self.objs = objs

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        for o in self.objs:
            m = o["metadata"]
            if (
                o["kind"] == kind
                and m.get("namespace", "default") == namespace
                and m["name"] == name
            ):
                return o
        return None

    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return [
            o
            for o in self.objs
            if o["kind"] == kind and namespace in (None, o["metadata"].get("namespace", "default"))
        ]


def service(selector: dict[str, str] | None, ns: str = "default") -> dict[str, Any]:
    spec = {} if selector is None else {"selector": selector}
    return {"kind": "Service", "metadata": {"name": "svc", "namespace": ns}, "spec": spec}


def replica_set(name: str, selector: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "ReplicaSet",
        "apiVersion": "apps/v1",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": selector},
    }


def owned_by(pb: PodBuilder, kind: str, name: str, api_version: str = "apps/v1") -> PodBuilder:
    ref = {"apiVersion": api_version, "kind": kind, "name": name, "uid": "u", "controller": True}
    pb.obj()["metadata"]["ownerReferences"] = [ref]
    return pb


def zoned_hosts() -> Snapshot:
    return cluster(
        (make_node("a").zone("z1"), 2), (make_node("b").zone("z2"), 0), (make_node("c"), 1)
    )


@pytest.mark.parametrize(
    ("store", "pod", "expected"),
    [
        pytest.param(Store(), web("p"), None, id="no-service-no-controller-skip"),
        pytest.param(Store(service(None)), web("p"), None, id="service-without-selector-skip"),
        pytest.param(
            Store(service({"app": "db"})), web("p"), None, id="service-not-selecting-skip"
        ),
        pytest.param(
            Store(service({"app": "web"}, ns="other")), web("p"), None, id="other-namespace-skip"
        ),
        pytest.param(Store(service({"app": "web"})), web("p"), "scored", id="service-selects"),
        pytest.param(
            Store(replica_set("rs", {"matchLabels": {"app": "web"}})),
            owned_by(web("p"), "ReplicaSet", "rs"),
            "scored",
            id="replicaset-owner",
        ),
        pytest.param(
            Store(replica_set("rs", {"matchLabels": {"app": "web"}})),
            owned_by(web("p"), "ReplicaSet", "rs", api_version="extensions/v1beta1"),
            None,
            id="unsupported-owner-version",
        ),
    ],
)
def test_system_default_constraints(store: Store, pod: PodBuilder, expected: str | None) -> None:
    snap = zoned_hosts()
    pl = plugin(snap, store=store)
    state = CycleState()
    _, s = pl.pre_filter(state, pod.pod(), snap.node_infos)
    assert s is not None and s.code == Code.SKIP, "system defaults are ScheduleAnyway only"
    s = pl.pre_score(state, pod.pod(), list(snap.node_infos))
    if expected is None:
        assert s is not None and s.code == Code.SKIP
        return
    assert s is None
    # hostname maxSkew 3 (weight log(3+2)) + zone maxSkew 5 (zones z1, z2 and "" for c,
    # weight log(3+2)); c lacks a zone but is not ignored with system defaults.
    w = math.log(5)
    raw = [pl.score(state, pod.pod(), ni)[0] for ni in snap.node_infos]
    assert raw == [
        round(2 * w + 2 + 2 * w + 4),
        round(0 * w + 2 + 0 * w + 4),
        round(1 * w + 2),
    ]


def test_list_defaulting_requires_every_key_and_filters() -> None:
    snap = zoned_hosts()
    store = Store(service({"app": "web"}))
    pl = plugin(
        snap,
        store=store,
        defaultingType="List",
        defaultConstraints=[
            {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}
        ],
    )
    pod = web("p").pod()
    state = CycleState()
    assert pl.pre_filter(state, pod, snap.node_infos) == (None, None)
    assert [pl.filter(state, pod, ni) for ni in snap.node_infos] == [NOT_MATCH, None, MISSING]


# -- args -----------------------------------------------------------------------------------------
def test_args_defaults() -> None:
    args = pts.Args()
    assert args.defaulting_type == "System"
    assert args.default_constraints == []


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        pytest.param(
            {"defaultConstraints": [tsc(selector=None) | {"labelSelector": None}]},
            "when .defaultConstraints are not empty",
            id="system-with-constraints",
        ),
        pytest.param({"defaultingType": "Other"}, "defaultingType", id="unknown-defaulting-type"),
        pytest.param(
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 0, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}
                ],
            },
            "not in valid range (0, inf)",
            id="maxSkew-zero",
        ),
        pytest.param(
            {
                "defaultingType": "List",
                "defaultConstraints": [{"maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}],
            },
            "can not be empty",
            id="topologyKey-required",
        ),
        pytest.param(
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "-bad-", "whenUnsatisfiable": "DoNotSchedule"}
                ],
            },
            "name part must consist",
            id="topologyKey-invalid",
        ),
        pytest.param(
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "Maybe"}
                ],
            },
            "Unsupported value",
            id="whenUnsatisfiable-unknown",
        ),
        pytest.param(
            {"defaultingType": "List", "defaultConstraints": [tsc()]},
            "must not define a selector",
            id="selector-forbidden",
        ),
        pytest.param(
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"},
                    {"maxSkew": 2, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"},
                ],
            },
            "Duplicate value",
            id="duplicate-key-and-action",
        ),
        pytest.param({"unknown": 1}, "Extra inputs", id="unknown-field"),
    ],
)
def test_args_validation(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        pts.Args.model_validate(raw)


# -- events ---------------------------------------------------------------------------------------
def test_events_and_hints() -> None:
    snap = three_zones(0, 0, 0)
    pl = plugin(snap)
    regs = pl.events_to_register()
    pod_ev, node_ev = regs
    assert pod_ev.event == ClusterEvent(
        EventResource.POD,
        ActionType.ADD
        | ActionType.UPDATE_POD_LABEL
        | ActionType.UPDATE_POD_TOLERATIONS
        | ActionType.DELETE,
    )
    assert node_ev.event == ClusterEvent(
        EventResource.NODE,
        ActionType.ADD
        | ActionType.DELETE
        | ActionType.UPDATE_NODE_LABEL
        | ActionType.UPDATE_NODE_TAINT,
    )
    pod = spreading(tsc()).pod()
    assigned = web("x").node("a").pod()
    assert pl.after_pod_change(pod, None, assigned) is True
    assert pl.after_pod_change(pod, None, make_pod("y").labels(app="db").node("a").pod()) is False
    assert pl.after_pod_change(pod, None, web("pending").pod()) is False
    assert (
        pl.after_pod_change(pod, make_pod("z", "other").labels(app="web").node("a").pod(), None)
        is False
    )
    relabelled = make_pod("x").labels(app="db").node("a").pod()
    assert pl.after_pod_change(pod, assigned, relabelled) is True
    assert pl.after_node_change(pod, None, make_node("n").zone("z9").node()) is True
    assert pl.after_node_change(pod, None, make_node("n").node()) is False
    old, new = make_node("n").zone("z1").node(), make_node("n").zone("z2").node()
    assert pl.after_node_change(pod, old, new) is True
    assert pl.after_node_change(pod, old, make_node("n").zone("z1").label("x", "y").node()) is False


# -- through the simulator ------------------------------------------------------------------------------
def node_obj(name: str, zone: str | None) -> dict[str, Any]:
    nb = make_node(name)
    if zone:
        nb.zone(zone)
    return nb.obj()


def pod_obj(name: str, *constraints: dict[str, Any]) -> dict[str, Any]:
    return spreading(*constraints, name=name).obj()


def test_simulated_pods_spread_evenly_over_zones() -> None:
    nodes = [node_obj(f"n{i}", f"z{i % 3}") for i in range(6)]
    pods = [pod_obj(f"p{i}", tsc(1)) for i in range(9)]
    result = simulate(nodes + pods, seed=0)
    assert all(p.status == "Scheduled" for p in result.pods)
    zone_of = {f"n{i}": f"z{i % 3}" for i in range(6)}
    assert Counter(zone_of[p.node or ""] for p in result.pods) == {"z0": 3, "z1": 3, "z2": 3}


def test_simulated_missing_label_and_skew_message() -> None:
    existing = web("old").node("n0").obj()
    objs = [
        node_obj("n0", "z0"),
        node_obj("n1", None),
        existing,
        pod_obj("p", tsc(0 + 1, minDomains=2)),
    ]
    result = simulate(objs, seed=0)
    (p,) = result.pods
    assert p.status == "Unschedulable"
    assert p.message.startswith(
        "0/2 nodes are available: 1 node(s) didn't match pod topology spread constraints, "
        "1 node(s) didn't match pod topology spread constraints (missing required label)."
    )
