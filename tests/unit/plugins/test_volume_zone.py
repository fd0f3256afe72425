from __future__ import annotations

from typing import Any

import pytest

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import ActionType
from kubesched.framework.registry import NoArgs
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Code, Status
from kubesched.plugins import volume_zone as vz
from tests.builders import make_node, make_pod
from tests.unit.plugins.fakes import FakeHandle, FakeStore
from tests.unit.plugins.storage_builders import make_pv, make_pvc, make_sc

CONFLICT = "node(s) had no available volume zone"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"


def run(pv_labels: dict[str, str], node_labels: dict[str, str]) -> Status | None:
    store = FakeStore(make_pvc("data", volume="pv1"), make_pv("pv1", labels=pv_labels))
    nb = make_node("n1")
    for k, v in node_labels.items():
        nb.label(k, v)
    ni = nb.info()
    pl = vz.new(NoArgs(), FakeHandle(Snapshot([ni]), store=store))
    state = CycleState()
    pod = make_pod("p").pvc("data").pod()
    _, s = pl.pre_filter(state, pod, [ni])
    if s is not None:
        return s
    return pl.filter(state, pod, ni)


@pytest.mark.parametrize(
    ("pv_labels", "node_labels", "fits"),
    [
        pytest.param({ZONE: "a"}, {ZONE: "a"}, True, id="same-zone"),
        pytest.param({ZONE: "a"}, {ZONE: "b"}, False, id="other-zone"),
        pytest.param({ZONE: "a__b"}, {ZONE: "b"}, True, id="multi-zone-pv"),
        pytest.param({ZONE: "a"}, {}, True, id="node-without-topology-labels"),
        pytest.param({ZONE: "a"}, {REGION: "r1"}, False, id="node-lacks-the-pv-key"),
        pytest.param({ZONE: "a", REGION: "r1"}, {ZONE: "a", REGION: "r2"}, False, id="region"),
        pytest.param({BETA_ZONE: "a"}, {ZONE: "a"}, True, id="beta-pv-label-ga-node-label"),
        pytest.param({BETA_ZONE: "a"}, {ZONE: "b"}, False, id="beta-pv-label-mismatch"),
        pytest.param({ZONE: "a__"}, {ZONE: "b"}, True, id="invalid-pv-value-ignored"),
    ],
)
def test_filter(pv_labels: dict[str, str], node_labels: dict[str, str], fits: bool) -> None:
    s = run(pv_labels, node_labels)
    if fits:
        assert s is None or s.is_skip()
    else:
        assert s == Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, CONFLICT, plugin=vz.NAME)


def test_pv_without_topology_skips() -> None:
    s = run({}, {ZONE: "a"})
    assert s is not None and s.is_skip()


def prefilter(*objs: dict[str, Any]) -> Status | None:
    pl = vz.new(NoArgs(), FakeHandle(store=FakeStore(*objs)))
    return pl.pre_filter(CycleState(), make_pod("p").pvc("data").pod(), [])[1]


@pytest.mark.parametrize(
    ("objs", "message"),
    [
        pytest.param([], 'persistentvolumeclaim "data" not found', id="missing-claim"),
        pytest.param(
            [make_pvc("data", volume="pv1")], 'persistentvolume "pv1" not found', id="missing-pv"
        ),
        pytest.param(
            [make_pvc("data")],
            "PersistentVolumeClaim had no pv name and storageClass name",
            id="unbound-no-class",
        ),
        pytest.param(
            [make_pvc("data", sc="fast")], 'storageclass "fast" not found', id="missing-class"
        ),
        pytest.param(
            [make_pvc("data", sc="fast"), make_sc("fast")],
            "PersistentVolume had no name",
            id="unbound-immediate",
        ),
    ],
)
def test_prefilter_failures(objs: list[dict[str, Any]], message: str) -> None:
    assert prefilter(*objs) == Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, message, plugin=vz.NAME)


def test_wait_for_first_consumer_claim_is_skipped() -> None:
    s = prefilter(make_pvc("data", sc="local"), make_sc("local", wffc=True))
    assert s is not None and s.is_skip()


def test_node_events_are_additions_and_label_updates() -> None:
    # Taint updates do not requeue (kube-scheduler v1.37, queueing hints on).
    pl = vz.new(NoArgs(), FakeHandle())
    node_events = [r.event for r in pl.events_to_register() if r.event.resource.value == "Node"]
    assert [e.action for e in node_events] == [ActionType.ADD | ActionType.UPDATE_NODE_LABEL]
