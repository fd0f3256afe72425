"""PodTopologySpread: scoring formulas, default constraints, args validation."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Code
from kubesched.framework.types import Pod
from kubesched.plugins import pod_topology_spread as pts
from tests.builders import PodBuilder, make_node
from tests.unit.plugins.spread_helpers import (
    HOST,
    MISSING,
    NOT_MATCH,
    ZONE,
    cluster,
    plugin,
    spreading,
    three_zones,
    tsc,
    web,
)


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
