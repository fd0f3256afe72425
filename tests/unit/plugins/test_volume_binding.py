from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import ActionType
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Code, Status
from kubesched.framework.types import Pod
from kubesched.plugins import volume_binding as vb
from kubesched.plugins.volume_binding.plugin import STATE_KEY
from tests.builders import make_node, make_pod
from tests.unit.plugins.fakes import FakeHandle, FakeStore
from tests.unit.plugins.storage_builders import (
    make_capacity,
    make_csi_driver,
    make_pv,
    make_pvc,
    make_sc,
)

NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
UNBOUND = "pod has unbound immediate PersistentVolumeClaims"
NOT_ENOUGH = "node(s) did not have enough free storage"

NODES = [make_node("n1").zone("a").info(), make_node("n2").zone("b").info()]
LOCAL = make_sc("local", provisioner="kubernetes.io/no-provisioner", wffc=True)
DYNAMIC = make_sc("fast", wffc=True, zones=("a",))


def plugin(*objs: dict[str, Any]) -> tuple[vb.VolumeBinding, FakeHandle]:
    handle = FakeHandle(Snapshot(NODES), store=FakeStore(*objs))
    return vb.new(vb.Args(), handle), handle


def filter_all(
    pl: vb.VolumeBinding, pod: Pod, nodes: list[NodeInfo] = NODES
) -> tuple[CycleState, Status | None, dict[str, Status | None], set[str] | None]:
    state = CycleState()
    res, s = pl.pre_filter(state, pod, nodes)
    if s is not None:
        return state, s, {}, None
    return (
        state,
        None,
        {ni.name: pl.filter(state, pod, ni) for ni in nodes},
        None if res is None else res.node_names,
    )


def unresolvable(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, *reasons, plugin=vb.NAME)


POD = make_pod("p").pvc("data").pod()


@pytest.mark.parametrize(
    ("objs", "message"),
    [
        pytest.param([], 'persistentvolumeclaim "data" not found', id="missing-claim"),
        pytest.param([make_pvc("data")], UNBOUND, id="unbound-without-class"),
        pytest.param(
            [make_pvc("data", sc="std"), make_sc("std")], UNBOUND, id="unbound-immediate-class"
        ),
        pytest.param(
            [make_pvc("data", sc="local", volume="pv1", bound=False), LOCAL],
            UNBOUND,
            id="prebound-claim-is-immediate",
        ),
        pytest.param(
            [{**make_pvc("data", volume="pv1"), "status": {"phase": "Lost"}}],
            'persistentvolumeclaim "data" bound to non-existent persistentvolume "pv1"',
            id="lost-claim",
        ),
    ],
)
def test_prefilter_rejections(objs: list[dict[str, Any]], message: str) -> None:
    pl, _ = plugin(*objs)
    assert filter_all(pl, POD)[1] == unresolvable(message)


def test_pod_without_claims_skips() -> None:
    pl, _ = plugin()
    s = filter_all(pl, make_pod("p").pod())[1]
    assert s is not None and s.is_skip()


def test_ephemeral_claim_not_yet_created() -> None:
    pl, _ = plugin()
    pod = make_pod("p").volume("scratch", ephemeral={"volumeClaimTemplate": {}}).pod()
    assert filter_all(pl, pod)[1] == unresolvable(
        'waiting for ephemeral volume controller to create the persistentvolumeclaim "p-scratch"'
    )


ZONE_A_PV = make_pv(
    "pv1",
    claim="data",
    nodeAffinity={
        "required": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}
                    ]
                }
            ]
        }
    },
)


@pytest.mark.parametrize(
    ("objs", "expected", "narrowed"),
    [
        pytest.param(
            [make_pvc("data", volume="pv1"), ZONE_A_PV],
            {"n1": None, "n2": unresolvable(NODE_CONFLICT)},
            None,
            id="bound-pv-node-affinity",
        ),
        pytest.param(
            [make_pvc("data", volume="pv1"), make_pv("pv1", claim="data", hosts=("n2",))],
            {"n1": unresolvable(NODE_CONFLICT), "n2": None},
            None,  # kube-scheduler 1.37 no longer narrows PreFilter to the PV's hosts
            id="bound-local-pv-is-checked-on-every-node",
        ),
        pytest.param(
            [make_pvc("data", volume="pv1")],
            {"n1": unresolvable(PV_NOT_EXIST), "n2": unresolvable(PV_NOT_EXIST)},
            None,
            id="bound-pv-missing",
        ),
        pytest.param(
            [make_pvc("data", sc="local"), LOCAL, make_pv("pv1", sc="local", hosts=("n1",))],
            {"n1": None, "n2": unresolvable(BIND_CONFLICT)},
            None,
            id="wffc-local-pv-only-on-its-node",
        ),
        pytest.param(
            [
                make_pvc("data", sc="local", storage="10Gi"),
                LOCAL,
                make_pv("pv1", sc="local", hosts=("n1",), storage="5Gi"),
            ],
            {"n1": unresolvable(BIND_CONFLICT), "n2": unresolvable(BIND_CONFLICT)},
            None,
            id="wffc-pv-too-small",
        ),
        pytest.param(
            [
                make_pvc("data", sc="local", modes=("ReadWriteMany",)),
                LOCAL,
                make_pv("pv1", sc="local", hosts=("n1",)),
            ],
            {"n1": unresolvable(BIND_CONFLICT), "n2": unresolvable(BIND_CONFLICT)},
            None,
            id="wffc-access-mode-mismatch",
        ),
        pytest.param(
            [make_pvc("data", sc="local"), LOCAL, make_pv("pv1", sc="other", hosts=("n1",))],
            {"n1": unresolvable(BIND_CONFLICT), "n2": unresolvable(BIND_CONFLICT)},
            None,
            id="wffc-class-mismatch",
        ),
        pytest.param(
            [make_pvc("data", sc="local"), LOCAL, make_pv("pv1", sc="local", claim="other")],
            {"n1": unresolvable(BIND_CONFLICT), "n2": unresolvable(BIND_CONFLICT)},
            None,
            id="wffc-pv-claimed-by-another",
        ),
        pytest.param(
            [make_pvc("data", sc="fast"), DYNAMIC],
            {"n1": None, "n2": unresolvable(BIND_CONFLICT)},
            None,
            id="dynamic-provisioning-allowed-topologies",
        ),
        pytest.param(
            [
                make_pvc(
                    "data",
                    sc="fast",
                    bound=False,
                ),
                make_sc("fast", wffc=True),
            ],
            {"n1": None, "n2": None},
            None,
            id="dynamic-provisioning-anywhere",
        ),
    ],
)
def test_filter(
    objs: list[dict[str, Any]], expected: dict[str, Status | None], narrowed: set[str] | None
) -> None:
    pl, _ = plugin(*objs)
    _, s, statuses, names = filter_all(pl, POD)
    assert s is None
    assert statuses == expected
    assert names == narrowed


def test_selected_node_claim_only_fits_that_node() -> None:
    pvc = make_pvc("data", sc="fast")
    pvc["metadata"]["annotations"] = {"volume.kubernetes.io/selected-node": "n2"}
    pl, _ = plugin(pvc, make_sc("fast", wffc=True))
    assert filter_all(pl, POD)[2] == {"n1": unresolvable(BIND_CONFLICT), "n2": None}


def test_smallest_matching_pv_wins_and_prebind_writes_it() -> None:
    objs = [
        make_pvc("data", sc="local", storage="1Gi"),
        LOCAL,
        make_pv("big", sc="local", hosts=("n1",), storage="10Gi"),
        make_pv("small", sc="local", hosts=("n1",), storage="2Gi"),
    ]
    pl, handle = plugin(*objs)
    state, _, statuses, _ = filter_all(pl, POD)
    assert statuses["n1"] is None
    assert pl.reserve(state, POD, "n1") is None
    # The next pod sees the reserved PV as taken.
    other = make_pod("q").pvc("data2").pod()
    handle.store.add(make_pvc("data2", sc="local", storage="1Gi"))  # type: ignore[attr-defined]
    pl2_state = CycleState()
    pl.pre_filter(pl2_state, other, NODES)
    pl.filter(pl2_state, other, NODES[0])
    assert [
        b.pv["metadata"]["name"] for b in pl2_state.read(STATE_KEY).by_node["n1"].static_bindings
    ] == ["big"]
    assert asyncio.run(pl.pre_bind(state, POD, "n1")) is None
    assert handle.cluster.volume_binds == [("default/data", "small", None)]


def test_unreserve_releases_the_pv() -> None:
    objs = [make_pvc("data", sc="local"), make_pvc("data2", sc="local"), LOCAL]
    objs.append(make_pv("only", sc="local", hosts=("n1",)))
    pl, _ = plugin(*objs)
    state, _, statuses, _ = filter_all(pl, POD)
    assert statuses["n1"] is None
    pl.reserve(state, POD, "n1")
    other = make_pod("q").pvc("data2").pod()
    assert filter_all(pl, other)[2]["n1"] == unresolvable(BIND_CONFLICT)
    pl.unreserve(state, POD, "n1")
    assert filter_all(pl, other)[2]["n1"] is None


def test_dynamic_provisioning_prebind_selects_the_node() -> None:
    pl, handle = plugin(make_pvc("data", sc="fast"), DYNAMIC)
    state, _, statuses, _ = filter_all(pl, POD)
    assert statuses == {"n1": None, "n2": unresolvable(BIND_CONFLICT)}
    assert pl.reserve(state, POD, "n1") is None
    assert asyncio.run(pl.pre_bind(state, POD, "n1")) is None
    assert handle.cluster.volume_binds == [("default/data", None, "n1")]


def test_all_bound_prebind_writes_nothing() -> None:
    pl, handle = plugin(make_pvc("data", volume="pv1"), make_pv("pv1", claim="data"))
    state, _, _, _ = filter_all(pl, POD)
    assert pl.reserve(state, POD, "n1") is None
    assert asyncio.run(pl.pre_bind(state, POD, "n1")) is None
    assert handle.cluster.volume_binds == []


def test_pre_bind_pre_flight_says_prebind_has_work_unless_all_are_bound() -> None:
    # kube's PreBindPreFlight: Skip when every claim is bound; work (None) when a claim
    # is to be bound on the node (the binding cycle then nominates the pod there first)
    # (asked after Reserve, as the binding cycle asks)
    pl, _ = plugin(make_pvc("data", volume="pv1"), make_pv("pv1", claim="data"))
    state, _, _, _ = filter_all(pl, POD)
    assert pl.reserve(state, POD, "n1") is None
    st = pl.pre_bind_pre_flight(state, POD, "n1")
    assert st is not None and st.is_skip()
    pl, _ = plugin(make_pvc("data", sc="fast"), DYNAMIC)
    state, _, _, _ = filter_all(pl, POD)
    assert pl.reserve(state, POD, "n1") is None
    assert pl.pre_bind_pre_flight(state, POD, "n1") is None
    err = pl.pre_bind_pre_flight(state, POD, "n9")
    assert err is not None and err.message() == 'no pod volumes found for node "n9"'


# -- v1.37: StorageCapacityScoring (beta, on) --------------------------------------------------------
def test_score_skips_without_static_bindings() -> None:
    pl, _ = plugin()
    s = pl.pre_score(CycleState(), POD, NODES)
    assert s is not None and s.is_skip(), "no PreFilter state: nothing to score"
    pl, _ = plugin(make_pvc("data", volume="pv1"), make_pv("pv1", claim="data"))
    state, _, _, _ = filter_all(pl, POD)
    s = pl.pre_score(state, POD, NODES)
    assert s is not None and s.is_skip(), "every claim bound: kube scores 0 everywhere"


def scored(args: dict[str, Any], *pvs: dict[str, Any]) -> dict[str, int]:
    handle = FakeHandle(Snapshot(NODES), store=FakeStore(make_pvc("data", sc="local"), LOCAL, *pvs))
    pl = vb.new(vb.Args.model_validate(args), handle)
    state, _, statuses, _ = filter_all(pl, POD)
    assert pl.pre_score(state, POD, NODES) is None
    out = {}
    for ni in NODES:
        if statuses[ni.name] is None:
            score, st = pl.score(state, POD, ni)
            assert st is None
            out[ni.name] = score
    return out


def test_score_prefers_the_loosest_fitting_pv() -> None:
    # 1Gi claim; default shape 0 % -> 100, 100 % -> 0 (scores x10).
    assert scored(
        {},
        make_pv("roomy", sc="local", hosts=("n1",), storage="4Gi"),  # 25 % -> 75
        make_pv("snug", sc="local", hosts=("n2",), storage="1Gi"),  # 100 % -> 0
    ) == {"n1": 75, "n2": 0}


def test_score_follows_a_custom_shape() -> None:
    # 1Gi of 3Gi: 33 % (integer) -> 0 + (10 * 10) * 33 / 100 = 33.
    shape = [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]
    assert scored({"shape": shape}, make_pv("pv", sc="local", hosts=("n1",), storage="3Gi")) == {
        "n1": 33
    }


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        pytest.param(
            [{"utilization": 50, "score": 1}, {"utilization": 50, "score": 2}],
            "[1].utilization: values must be sorted in increasing order",
            id="not-increasing",
        ),
        pytest.param(
            [{"utilization": 101, "score": 1}],
            "[0].utilization: not in valid range [0, 100]",
            id="utilization-over-100",
        ),
        pytest.param(
            [{"utilization": 10, "score": 11}],
            "[0].score: not in valid range [0, 10]",
            id="score-over-10",
        ),
    ],
)
def test_shape_validation(shape: list[dict[str, int]], message: str) -> None:
    with pytest.raises(ValueError) as exc:
        vb.Args.model_validate({"shape": shape})
    assert message in str(exc.value)


def test_args_defaults() -> None:
    args = vb.Args()
    assert args.bind_timeout_seconds == 600
    assert [(p.utilization, p.score) for p in args.shape] == [(0, 10), (100, 0)]
    assert vb.Args.model_validate({"shape": []}).shape == args.shape
    with pytest.raises(ValueError):
        vb.Args.model_validate({"bindTimeoutSeconds": -1})


def test_node_events_are_additions_and_label_updates() -> None:
    # Taint updates do not requeue (kube-scheduler v1.37, queueing hints on).
    pl = vb.new(vb.Args(), FakeHandle())
    node_events = [r.event for r in pl.events_to_register() if r.event.resource.value == "Node"]
    assert [e.action for e in node_events] == [ActionType.ADD | ActionType.UPDATE_NODE_LABEL]


# -- CSIStorageCapacity ----------------------------------------------------------------------
TRACKED = make_sc("tracked", provisioner="disk.csi.example.com", wffc=True)
DRIVER = make_csi_driver("disk.csi.example.com")
ZONE = "topology.kubernetes.io/zone"


def in_zone(zone: str) -> dict[str, Any]:
    return {"matchLabels": {ZONE: zone}}


@pytest.mark.parametrize(
    ("objs", "expected"),
    [
        pytest.param(
            [
                make_capacity("a", "tracked", capacity="10Gi", topology=in_zone("a")),
                make_capacity("b", "tracked", capacity="512Mi", topology=in_zone("b")),
            ],
            {"n1": None, "n2": unresolvable(NOT_ENOUGH)},
            id="room-in-one-zone",
        ),
        pytest.param(
            [
                make_capacity(
                    "a", "tracked", capacity="10Gi", maximum="512Mi", topology=in_zone("a")
                )
            ],
            {"n1": unresolvable(NOT_ENOUGH), "n2": unresolvable(NOT_ENOUGH)},
            id="maximum-volume-size-wins-over-capacity",
        ),
        pytest.param(
            [make_capacity("a", "tracked", maximum="1Gi", topology=in_zone("a"))],
            {"n1": None, "n2": unresolvable(NOT_ENOUGH)},
            id="maximum-volume-size-alone",
        ),
        pytest.param(
            [make_capacity("a", "other-class", capacity="10Gi", topology=in_zone("a"))],
            {"n1": unresolvable(NOT_ENOUGH), "n2": unresolvable(NOT_ENOUGH)},
            id="another-class-capacity",
        ),
        pytest.param(
            [make_capacity("a", "tracked", capacity="10Gi")],
            {"n1": unresolvable(NOT_ENOUGH), "n2": unresolvable(NOT_ENOUGH)},
            id="no-node-topology-reaches-no-node",
        ),
        pytest.param(
            [make_capacity("all", "tracked", capacity="10Gi", topology={})],
            {"n1": None, "n2": None},
            id="empty-topology-reaches-every-node",
        ),
        pytest.param(
            [
                make_capacity(
                    "not-a",
                    "tracked",
                    capacity="10Gi",
                    topology={
                        "matchExpressions": [{"key": ZONE, "operator": "NotIn", "values": ["a"]}]
                    },
                )
            ],
            {"n1": unresolvable(NOT_ENOUGH), "n2": None},
            id="match-expressions-topology",
        ),
    ],
)
def test_capacity_filter(objs: list[dict[str, Any]], expected: dict[str, Status | None]) -> None:
    pl, _ = plugin(make_pvc("data", sc="tracked", storage="1Gi"), TRACKED, DRIVER, *objs)
    assert filter_all(pl, POD)[2] == expected


@pytest.mark.parametrize(
    "driver",
    [
        pytest.param(None, id="no-csidriver"),
        pytest.param(make_csi_driver("disk.csi.example.com", storage_capacity=False), id="off"),
        pytest.param(make_csi_driver("disk.csi.example.com", storage_capacity=None), id="unset"),
    ],
)
def test_capacity_is_checked_only_for_drivers_that_track_it(driver: dict[str, Any] | None) -> None:
    objs = [make_pvc("data", sc="tracked", storage="1Gi"), TRACKED]
    objs += [driver] if driver else []
    pl, _ = plugin(*objs)  # no CSIStorageCapacity at all
    assert filter_all(pl, POD)[2] == {"n1": None, "n2": None}


def test_a_claim_without_a_storage_request_needs_no_capacity() -> None:
    pvc = make_pvc("data", sc="tracked")
    del pvc["spec"]["resources"]
    pl, _ = plugin(pvc, TRACKED, DRIVER)
    assert filter_all(pl, POD)[2] == {"n1": None, "n2": None}


def capacity_scores(*capacities: dict[str, Any], claims: int = 1) -> dict[str, int]:
    names = [f"data{i}" for i in range(claims)]
    pod = make_pod("p")
    for n in names:
        pod = pod.pvc(n)
    objs = [make_pvc(n, sc="tracked", storage="1Gi") for n in names]
    pl, _ = plugin(*objs, TRACKED, DRIVER, *capacities)
    p = pod.pod()
    state, _, statuses, _ = filter_all(pl, p)
    assert pl.pre_score(state, p, NODES) is None
    return {ni.name: pl.score(state, p, ni)[0] for ni in NODES if statuses[ni.name] is None}


def test_capacity_score_prefers_the_node_with_more_room() -> None:
    # 1Gi of 4Gi: 25 % -> 75; of 2Gi: 50 % -> 50 (default shape, scores x10)
    assert capacity_scores(
        make_capacity("a", "tracked", capacity="4Gi", topology=in_zone("a")),
        make_capacity("b", "tracked", capacity="2Gi", topology=in_zone("b")),
    ) == {"n1": 75, "n2": 50}


def test_capacity_score_counts_a_class_capacity_once_for_two_claims() -> None:
    # two 1Gi claims of one class on a 3Gi capacity: 2Gi of 3Gi = 66 % -> 34; counting
    # the capacity once per claim (2Gi of 6Gi = 33 %) would give 67
    assert capacity_scores(
        make_capacity("a", "tracked", capacity="3Gi", topology=in_zone("a")), claims=2
    ) == {"n1": 34}


def test_capacity_score_reads_the_first_capacity_that_holds_the_claim() -> None:
    # both select n1; the first listed wins, whichever index finds it
    by_expression = make_capacity(
        "x",
        "tracked",
        capacity="2Gi",
        topology={"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["a"]}]},
    )
    by_label = make_capacity("y", "tracked", capacity="4Gi", topology=in_zone("a"))
    assert capacity_scores(by_expression, by_label) == {"n1": 50}
    assert capacity_scores(by_label, by_expression) == {"n1": 75}
    too_small = make_capacity("z", "tracked", capacity="512Mi", topology=in_zone("a"))
    assert capacity_scores(too_small, by_expression) == {"n1": 50}


def test_capacity_score_without_capacity_is_full() -> None:
    only_max = make_capacity("a", "tracked", maximum="4Gi", topology=in_zone("a"))
    assert capacity_scores(only_max) == {"n1": 0}


def test_reserve_and_prebind_keep_the_capacity_decision() -> None:
    pl, handle = plugin(
        make_pvc("data", sc="tracked", storage="1Gi"),
        TRACKED,
        DRIVER,
        make_capacity("a", "tracked", capacity="4Gi", topology=in_zone("a")),
    )
    state, _, statuses, _ = filter_all(pl, POD)
    assert statuses["n1"] is None
    assert pl.reserve(state, POD, "n1") is None
    assert asyncio.run(pl.pre_bind(state, POD, "n1")) is None
    assert handle.cluster.volume_binds == [("default/data", None, "n1")]


def test_capacity_events_requeue_on_a_new_one_or_a_larger_limit() -> None:
    pl = vb.new(vb.Args(), FakeHandle())
    (registered,) = [
        r for r in pl.events_to_register() if r.event.resource.value == "CSIStorageCapacity"
    ]
    assert registered.event.action == ActionType.ADD | ActionType.UPDATE_OTHER
    hint = registered.hint
    assert hint is not None
    small = make_capacity("a", "tracked", capacity="1Gi", topology=in_zone("a"))
    big = make_capacity("a", "tracked", capacity="2Gi", topology=in_zone("a"))
    capped = make_capacity("a", "tracked", capacity="8Gi", maximum="1Gi", topology=in_zone("a"))
    assert hint(POD, None, small)
    assert hint(POD, small, big)
    assert not hint(POD, big, small)
    assert not hint(POD, small, capped), "maximumVolumeSize is the limit"
    assert not hint(POD, small, {**small, "capacity": None})
