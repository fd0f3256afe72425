from __future__ import annotations

from typing import Any

import pytest

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.registry import NoArgs
from kubesched.framework.status import Code, Status
from kubesched.framework.types import Pod
from kubesched.plugins import node_volume_limits as nvl
from tests.builders import make_node, make_pod
from tests.unit.plugins.fakes import FakeHandle, FakeStore
from tests.unit.plugins.storage_builders import (
    make_csi_driver,
    make_csi_node,
    make_pv,
    make_pvc,
    make_sc,
)

EXCEEDED = "node(s) exceed max volume count"
DRIVER = "ebs.csi.example.com"


def claims(*names: str) -> list[dict[str, Any]]:
    """Claims bound to CSI PVs of DRIVER with handle = claim name."""
    out: list[dict[str, Any]] = []
    for n in names:
        out.append(make_pvc(n, volume=f"pv-{n}"))
        out.append(make_pv(f"pv-{n}", csi=(DRIVER, n), claim=n))
    return out


def using(name: str, *claim_names: str, node: str = "") -> Pod:
    b = make_pod(name)
    for c in claim_names:
        b.pvc(c)
    if node:
        b.node(node)
    return b.pod()


def run(pod: Pod, existing: list[Pod], objs: list[dict[str, Any]]) -> Status | None:
    ni = make_node("n1").info(*existing)
    pl = nvl.new(NoArgs(), FakeHandle(store=FakeStore(*objs)))
    state = CycleState()
    _, s = pl.pre_filter(state, pod, [ni])
    if s is not None:
        return s
    return pl.filter(state, pod, ni)


LIMIT_2 = make_csi_node("n1", ebs_csi_example_com=2)


@pytest.mark.parametrize(
    ("new", "existing", "limit", "fits"),
    [
        pytest.param(("a",), [], LIMIT_2, True, id="under-limit"),
        pytest.param(("a", "b"), [], LIMIT_2, True, id="at-limit"),
        pytest.param(("a", "b", "c"), [], LIMIT_2, False, id="over-limit-alone"),
        pytest.param(("c",), [("a", "b")], LIMIT_2, False, id="over-limit-with-existing"),
        pytest.param(("a",), [("a", "b")], LIMIT_2, True, id="shared-volume-counts-once"),
        pytest.param(("c",), [("a",), ("a",)], LIMIT_2, True, id="existing-dupes-count-once"),
        pytest.param(("a", "b", "c"), [], None, True, id="no-csinode-no-limit"),
        pytest.param(
            ("a", "b", "c"),
            [],
            make_csi_node("n1", ebs_csi_example_com=None),
            True,
            id="driver-without-count",
        ),
        pytest.param(
            ("a", "b", "c"),
            [],
            make_csi_node("n1", other_csi=1),
            True,
            id="limit-of-another-driver",
        ),
    ],
)
def test_filter(
    new: tuple[str, ...],
    existing: list[tuple[str, ...]],
    limit: dict[str, Any] | None,
    fits: bool,
) -> None:
    objs = claims("a", "b", "c") + ([limit] if limit else [])
    pods = [using(f"old{i}", *cs, node="n1") for i, cs in enumerate(existing)]
    s = run(using("p", *new), pods, objs)
    if fits:
        assert s is None
    else:
        assert s == Status(Code.UNSCHEDULABLE, EXCEEDED, plugin=nvl.NAME)


def test_unbound_claim_counts_against_its_class_provisioner() -> None:
    objs = [
        *claims("a"),
        make_pvc("new", sc="ebs"),
        make_sc("ebs", provisioner=DRIVER, wffc=True),
        make_csi_node("n1", ebs_csi_example_com=1),
    ]
    s = run(using("p", "new"), [using("old", "a", node="n1")], objs)
    assert s == Status(Code.UNSCHEDULABLE, EXCEEDED, plugin=nvl.NAME)


def test_node_allocatable_attach_limit_is_ignored() -> None:
    # kube-scheduler (v1.34 and v1.37) reads limits from CSINode only.
    objs = claims("a", "b")
    ni = make_node("n1").alloc(cpu="4", **{"attachable-volumes-csi-" + DRIVER: "1"}).info()
    pl = nvl.new(NoArgs(), FakeHandle(store=FakeStore(*objs)))
    assert pl.filter(CycleState(), using("p", "a", "b"), ni) is None


def test_in_tree_pv_is_not_counted() -> None:
    objs = [
        make_pvc("a", volume="pv-a"),
        make_pv("pv-a", awsElasticBlockStore={"volumeID": "v"}),
        make_csi_node("n1", ebs_csi_example_com=0),
    ]
    assert run(using("p", "a"), [], objs) is None


def test_missing_claim_is_unresolvable() -> None:
    s = run(using("p", "nope"), [], [LIMIT_2])
    assert s == Status(
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        'looking up PVC default/nope: persistentvolumeclaim "nope" not found',
        plugin=nvl.NAME,
    )


def test_pod_without_claims_skips() -> None:
    s = run(make_pod("p").volume("e", emptyDir={}).pod(), [], [])
    assert s is not None and s.is_skip()


def test_long_driver_names_are_hashed_like_kube() -> None:
    key = nvl.csi_attach_limit_key("x" * 60)
    assert key.startswith("attachable-volumes-csi-" + "x" * 23)
    assert len(key) == len("attachable-volumes-csi-") + 23 + 16


# -- v1.37 (VolumeLimitScaling): a driver that must be registered on the node -----------------------
def csi_driver(prevent: bool | None) -> dict[str, Any]:
    return make_csi_driver(DRIVER, storage_capacity=None, prevent_if_missing=prevent)


NOT_INSTALLED = Status(
    Code.UNSCHEDULABLE,
    "ebs.csi.example.com CSI driver is not installed on the node",
    plugin="NodeVolumeLimits",
)


@pytest.mark.parametrize(
    ("driver", "csi_node", "expected"),
    [
        pytest.param(csi_driver(True), None, NOT_INSTALLED, id="opted-in-no-csinode"),
        pytest.param(
            csi_driver(True), make_csi_node("n1", other_csi=5), NOT_INSTALLED, id="opted-in-other"
        ),
        pytest.param(
            csi_driver(True),
            make_csi_node("n1", ebs_csi_example_com=None),
            None,
            id="opted-in-registered",
        ),
        pytest.param(csi_driver(False), None, None, id="opted-out"),
        pytest.param(csi_driver(None), None, None, id="unset-means-false"),
        pytest.param(None, None, None, id="no-csidriver-object"),
        pytest.param(
            csi_driver(True),
            make_csi_node("n1", ebs_csi_example_com=0),
            Status(Code.UNSCHEDULABLE, EXCEEDED, plugin=nvl.NAME),
            id="registered-then-limit-applies",
        ),
    ],
)
def test_driver_must_be_installed(
    driver: dict[str, Any] | None, csi_node: dict[str, Any] | None, expected: Status | None
) -> None:
    objs = claims("a") + [o for o in (driver, csi_node) if o is not None]
    assert run(using("p", "a"), [], objs) == expected


def test_csinode_update_hint_queues_when_a_limit_grows() -> None:
    reg = [
        r
        for r in nvl.new(NoArgs(), FakeHandle()).events_to_register()
        if r.event.resource.value == "CSINode" and r.hint is not None
    ]
    assert len(reg) == 1
    hint, pod = reg[0].hint, using("p", "a")
    assert hint is not None
    one, two = (
        make_csi_node("n1", ebs_csi_example_com=1),
        make_csi_node("n1", ebs_csi_example_com=2),
    )
    assert hint(pod, one, two)
    assert not hint(pod, two, one)
    # A driver newly listed without a count is not a grown limit (as kube-scheduler).
    assert not hint(pod, make_csi_node("n1"), make_csi_node("n1", ebs_csi_example_com=None))
