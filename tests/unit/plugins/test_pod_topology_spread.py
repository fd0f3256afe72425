"""PodTopologySpread: Filter reasons, AddPod/RemovePod, vector == scalar, hints, simulator."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import ActionType, ClusterEvent, EventResource
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Code, Status
from kubesched.framework.types import Pod
from kubesched.simulator.engine import simulate
from tests.builders import make_node, make_pod
from tests.unit.plugins.spread_helpers import (
    HOST,
    MISSING,
    NOT_MATCH,
    ZONE,
    cluster,
    plugin,
    run_filter,
    spreading,
    three_zones,
    tsc,
    web,
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


def test_v137_pod_hints_nominated_pods_and_the_pods_own_update() -> None:
    pl = plugin(three_zones(0, 0, 0))
    pod = spreading(tsc()).uid("me").pod()
    # A nominated (not yet bound) pod leaving counts since v1.37 (it held a place).
    assert pl.after_pod_change(pod, web("n").nominated("a").pod(), None) is True
    assert pl.after_pod_change(pod, web("n").pod(), None) is False
    # The pod's own label change: only if it (un)matches its own selector.
    me_db = spreading(tsc(), name="incoming").uid("me").labels(app="db").pod()
    assert pl.after_pod_change(pod, pod, me_db) is True
    me_extra = spreading(tsc(), name="incoming").uid("me").labels(tier="x").pod()
    assert pl.after_pod_change(pod, pod, me_extra) is False
    # Its own toleration change matters only with nodeTaintsPolicy: Honor.
    tolerant = spreading(tsc(), name="incoming").uid("me").toleration("k").pod()
    assert pl.after_pod_change(pod, pod, tolerant) is False
    honoring = spreading(tsc(nodeTaintsPolicy="Honor")).uid("me").pod()
    honoring_tolerant = spreading(tsc(nodeTaintsPolicy="Honor")).uid("me").toleration("k").pod()
    assert pl.after_pod_change(honoring, honoring, honoring_tolerant) is True


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
