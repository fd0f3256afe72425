from __future__ import annotations

from typing import Any

import pytest

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import ActionType
from kubesched.framework.registry import NoArgs
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Code, Status
from kubesched.framework.types import Pod
from kubesched.plugins import volume_restrictions as vr
from tests.builders import make_node, make_pod
from tests.unit.plugins.fakes import FakeHandle, FakeStore
from tests.unit.plugins.storage_builders import make_pvc

DISK = "node(s) had no available disk"
RWOP = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode "
    "already in-use by another pod"
)


def pod_with(name: str, vol: dict[str, Any]) -> Pod:
    return make_pod(name).volume("v", **vol).pod()


GCE = {"gcePersistentDisk": {"pdName": "disk-a"}}
GCE_RO = {"gcePersistentDisk": {"pdName": "disk-a", "readOnly": True}}
GCE_B = {"gcePersistentDisk": {"pdName": "disk-b"}}
EBS = {"awsElasticBlockStore": {"volumeID": "vol-1", "readOnly": True}}
EBS_B = {"awsElasticBlockStore": {"volumeID": "vol-2"}}
ISCSI = {"iscsi": {"iqn": "iqn.a", "targetPortal": "p", "lun": 0}}
ISCSI_RO = {"iscsi": {"iqn": "iqn.a", "targetPortal": "p", "lun": 0, "readOnly": True}}
RBD = {"rbd": {"monitors": ["m1", "m2"], "image": "img"}}
RBD_OTHER_MON = {"rbd": {"monitors": ["m3"], "image": "img"}}
RBD_SHARED_MON = {"rbd": {"monitors": ["m2", "m9"], "pool": "rbd", "image": "img"}}
RBD_RO = {"rbd": {"monitors": ["m1"], "image": "img", "readOnly": True}}


def run(pod: Pod, *existing: Pod, store: FakeStore | None = None) -> Status | None:
    ni = make_node("n1").info(*existing)
    handle = FakeHandle(Snapshot([ni]), store=store or FakeStore())
    pl = vr.new(NoArgs(), handle)
    state = CycleState()
    _, s = pl.pre_filter(state, pod, [ni])
    if s is not None:
        return s
    return pl.filter(state, pod, ni)


@pytest.mark.parametrize(
    ("new", "existing", "conflict"),
    [
        pytest.param(GCE, GCE, True, id="gce-same-disk"),
        pytest.param(GCE_RO, GCE_RO, False, id="gce-both-read-only"),
        pytest.param(GCE_RO, GCE, True, id="gce-one-read-write"),
        pytest.param(GCE, GCE_B, False, id="gce-other-disk"),
        pytest.param(EBS, EBS, True, id="ebs-same-volume-even-read-only"),
        pytest.param(EBS, EBS_B, False, id="ebs-other-volume"),
        pytest.param(ISCSI, ISCSI, True, id="iscsi-same-iqn"),
        pytest.param(ISCSI_RO, ISCSI_RO, False, id="iscsi-both-read-only"),
        pytest.param(RBD, RBD_SHARED_MON, True, id="rbd-shared-monitor-default-pool"),
        pytest.param(RBD, RBD_OTHER_MON, False, id="rbd-no-common-monitor"),
        pytest.param(RBD_RO, {"rbd": {**RBD_RO["rbd"]}}, False, id="rbd-both-read-only"),
        pytest.param(GCE, EBS, False, id="different-kinds"),
    ],
)
def test_disk_conflicts(new: dict[str, Any], existing: dict[str, Any], conflict: bool) -> None:
    s = run(pod_with("new", new), pod_with("old", existing))
    if conflict:
        assert s == Status(Code.UNSCHEDULABLE, DISK, plugin=vr.NAME)
    else:
        assert s is None


def test_pod_without_restricted_volumes_skips() -> None:
    s = run(make_pod("p").volume("e", emptyDir={}).pod())
    assert s is not None and s.is_skip()


@pytest.mark.parametrize(
    ("modes", "used", "expected"),
    [
        pytest.param(("ReadWriteOncePod",), True, RWOP, id="rwop-in-use"),
        pytest.param(("ReadWriteOncePod",), False, None, id="rwop-unused-skips"),
        pytest.param(("ReadWriteOnce",), True, None, id="rwo-in-use-is-fine"),
    ],
)
def test_read_write_once_pod(modes: tuple[str, ...], used: bool, expected: str | None) -> None:
    store = FakeStore(make_pvc("data", modes=modes))
    existing = [make_pod("user").pvc("data").node("n1").pod()] if used else []
    s = run(make_pod("p").pvc("data").pod(), *existing, store=store)
    if expected is None:
        assert s is None or s.is_skip()
    else:
        assert s == Status(Code.UNSCHEDULABLE, expected, plugin=vr.NAME)


def test_rwop_conflict_counts_users_on_any_node() -> None:
    store = FakeStore(make_pvc("data", modes=("ReadWriteOncePod",)))
    n1 = make_node("n1").info()
    n2 = make_node("n2").info(make_pod("user").pvc("data").node("n2").pod())
    pl = vr.new(NoArgs(), FakeHandle(Snapshot([n1, n2]), store=store))
    state = CycleState()
    pod = make_pod("p").pvc("data").pod()
    assert pl.pre_filter(state, pod, [n1, n2]) == (None, None)
    assert pl.filter(state, pod, n1) == Status(Code.UNSCHEDULABLE, RWOP, plugin=vr.NAME)


def test_rwop_remove_pod_lets_preemption_resolve_the_conflict() -> None:
    store = FakeStore(make_pvc("data", modes=("ReadWriteOncePod",)))
    user = make_pod("user").pvc("data").node("n1").pod()
    ni = make_node("n1").info(user)
    pl = vr.new(NoArgs(), FakeHandle(Snapshot([ni]), store=store))
    state = CycleState()
    pod = make_pod("p").pvc("data").pod()
    pl.pre_filter(state, pod, [ni])
    probe = state.clone()
    assert pl.remove_pod(probe, pod, user, ni) is None
    assert pl.filter(probe, pod, ni) is None
    assert pl.add_pod(probe, pod, user, ni) is None
    assert pl.filter(probe, pod, ni) is not None
    assert pl.filter(state, pod, ni) is not None, "the original state is untouched"


def test_missing_claim_is_unresolvable() -> None:
    s = run(make_pod("p").pvc("nope").pod())
    assert s == Status(
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        'persistentvolumeclaim "nope" not found',
        plugin=vr.NAME,
    )


def test_node_events_are_additions_only() -> None:
    # A node update never changes this plugin's answer (kube-scheduler v1.37).
    pl = vr.new(NoArgs(), FakeHandle())
    node_events = [r.event for r in pl.events_to_register() if r.event.resource.value == "Node"]
    assert [e.action for e in node_events] == [ActionType.ADD]
