"""NodeDeclaredFeatures (kube-scheduler v1.37): the features a pod's spec needs, the nodes
that declare them, the message users read, and when a parked pod is retried."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import ActionType, ClusterEvent, EventResource
from kubesched.framework.registry import NoArgs
from kubesched.framework.runtime import FrameworkServices
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Status
from kubesched.framework.types import Node, Pod
from kubesched.plugins import node_declared_features as ndf
from kubesched.profiles import compile_profile, default_profile_spec
from kubesched.scheduler.algorithm import Algorithm, FitError
from kubesched.scheduler.eventhandlers import node_update_action
from tests.builders import NodeBuilder, PodBuilder, make_node, make_pod
from tests.unit.plugins.fakes import FakeHandle

RESTART = "RestartAllContainersOnContainerExits"
USERNS = "UserNamespacesHostNetworkSupport"
BIND = "VolumeBindMountOptions"
REASON = "node(s) didn't match Pod's required features"


def plugin() -> ndf.NodeDeclaredFeatures:
    return ndf.new(NoArgs(), FakeHandle())


def restart_rule(action: str) -> dict[str, Any]:
    return {
        "name": "c",
        "image": "i",
        "restartPolicy": "Never",
        "restartPolicyRules": [{"action": action, "exitCodes": {"operator": "In", "values": [1]}}],
    }


def mount(**extra: Any) -> dict[str, Any]:
    return {"name": "c", "image": "i", "volumeMounts": [{"name": "v", "mountPath": "/v", **extra}]}


def declaring(name: str, *features: str) -> NodeBuilder:
    b = make_node(name)
    b.obj()["status"]["declaredFeatures"] = sorted(features)
    return b


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param({"containers": [{"name": "c", "image": "i"}]}, set(), id="plain-pod"),
        pytest.param(
            {"containers": [restart_rule("RestartAllContainers")]}, {RESTART}, id="restart-all"
        ),
        pytest.param(
            {
                "containers": [{"name": "c"}],
                "initContainers": [restart_rule("RestartAllContainers")],
            },
            {RESTART},
            id="restart-all-in-init-container",
        ),
        pytest.param(
            {"containers": [restart_rule("Restart")]}, set(), id="other-restart-rule-action"
        ),
        pytest.param({"hostNetwork": True, "hostUsers": False}, {USERNS}, id="userns-host-net"),
        pytest.param({"hostNetwork": True}, set(), id="host-network-host-users-unset"),
        pytest.param({"hostNetwork": True, "hostUsers": True}, set(), id="host-users-true"),
        pytest.param({"hostUsers": False}, set(), id="userns-without-host-network"),
        pytest.param(
            {"containers": [mount(bindMountOptions=["ro"])]}, {BIND}, id="bind-mount-options"
        ),
        pytest.param(
            {"containers": [{"name": "c"}], "ephemeralContainers": [mount(bindMountOptions=["x"])]},
            {BIND},
            id="bind-mount-options-ephemeral",
        ),
        pytest.param(
            {"containers": [mount(bindMountOptions=[])]}, set(), id="empty-bind-mount-options"
        ),
        pytest.param(
            {
                "hostNetwork": True,
                "hostUsers": False,
                "containers": [restart_rule("RestartAllContainers"), mount(bindMountOptions=["a"])],
            },
            {RESTART, USERNS, BIND},
            id="all-three",
        ),
        pytest.param({"containers": "garbage", "hostNetwork": "yes"}, set(), id="malformed"),
    ],
)
def test_required_features(spec: dict[str, Any], expected: set[str]) -> None:
    assert ndf.required_features(spec) == expected


@pytest.mark.parametrize(
    ("spec", "declared", "expected"),
    [
        pytest.param({"hostNetwork": True, "hostUsers": False}, [USERNS], None, id="declared"),
        pytest.param(
            {"hostNetwork": True, "hostUsers": False},
            [BIND, "SomethingNew", USERNS],
            None,
            id="unknown-names-ignored",
        ),
        pytest.param(
            {"hostNetwork": True, "hostUsers": False},
            [],
            Status.unresolvable(REASON, plugin="NodeDeclaredFeatures"),
            id="not-declared",
        ),
        pytest.param(
            {
                "hostNetwork": True,
                "hostUsers": False,
                "containers": [mount(bindMountOptions=["a"])],
            },
            [USERNS],
            Status.unresolvable(REASON, plugin="NodeDeclaredFeatures"),
            id="one-of-two-missing",
        ),
    ],
)
def test_filter(spec: dict[str, Any], declared: list[str], expected: Status | None) -> None:
    pod = make_pod("p").spec(**spec).pod()
    node = declaring("n", *declared).info()
    pl, state = plugin(), CycleState()
    result, status = pl.pre_filter(state, pod, [node])
    assert (result, status) == (None, None)
    assert pl.filter(state, pod, node) == expected


def test_pre_filter_skips_a_pod_that_needs_nothing() -> None:
    _, status = plugin().pre_filter(CycleState(), make_pod("p").pod(), [])
    assert status is not None
    assert status.is_skip()


def scheduling_error(pod: Pod, *nodes: NodeBuilder) -> str:
    snap = Snapshot([n.info() for n in nodes])
    fwk = compile_profile(default_profile_spec(), FrameworkServices(snapshot=lambda: snap))
    with pytest.raises(FitError) as exc:
        Algorithm().schedule_pod(fwk.framework, CycleState(), pod, snap)
    assert "NodeDeclaredFeatures" in exc.value.diagnosis.unschedulable_plugins
    return str(exc.value)


def test_default_profile_reports_nodes_without_the_feature() -> None:
    pod = make_pod("p").spec(hostNetwork=True, hostUsers=False).pod()
    message = scheduling_error(
        pod, declaring("a"), declaring("b", BIND), make_node("c").unschedulable()
    )
    assert message == ("0/3 nodes are available: 1 node(s) were unschedulable, 2 " + REASON + ".")


def test_default_profile_places_the_pod_on_a_declaring_node() -> None:
    pod = make_pod("p").spec(hostNetwork=True, hostUsers=False).pod()
    snap = Snapshot([declaring("a").info(), declaring("b", USERNS).info()])
    fwk = compile_profile(default_profile_spec(), FrameworkServices(snapshot=lambda: snap))
    result = Algorithm().schedule_pod(fwk.framework, CycleState(), pod, snap)
    assert result.node_name == "b"


# -- queueing --------------------------------------------------------------------------------------
def test_events() -> None:
    events = [e.event for e in plugin().events_to_register()]
    assert events == [
        ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_DECLARED_FEATURE),
        ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE),
    ]


def hint(index: int, pod: Pod, old: object, new: object) -> bool:
    fn = plugin().events_to_register()[index].hint
    assert fn is not None
    return bool(fn(pod, old, new))


def test_node_hint_queues_on_a_new_node_or_changed_features_only() -> None:
    pod = make_pod("p").spec(hostNetwork=True, hostUsers=False).pod()
    before = declaring("n").node()
    assert hint(0, pod, None, before)
    assert hint(0, pod, before, declaring("n", USERNS).node())
    assert not hint(0, pod, before, declaring("n").label("x", "y").node())


def test_declared_feature_change_is_its_own_node_update_kind() -> None:
    old, new = declaring("n").node(), declaring("n", USERNS).node()
    assert node_update_action(old, new) == ActionType.UPDATE_NODE_DECLARED_FEATURE
    assert node_update_action(old, declaring("n").node()) == ActionType(0)


def updated(b: PodBuilder, **spec: Any) -> tuple[Pod, Pod]:
    old = Pod(copy.deepcopy(b.obj()))
    b.spec(**spec)
    return old, b.pod()


def test_pod_hint_queues_when_the_pods_own_requirements_change() -> None:
    b = make_pod("p").uid("u1").spec(hostNetwork=True, hostUsers=False)
    old, new = updated(b, hostUsers=True)
    assert hint(1, old, old, new)
    same_old, same_new = updated(make_pod("p").uid("u1"), priorityClassName="x")
    assert not hint(1, same_old, same_old, same_new)
    # Another pod's update never requeues this one (kube registers TargetPod).
    other_old, other_new = updated(make_pod("q").uid("u2").spec(hostUsers=False), hostNetwork=True)
    assert not hint(1, old, other_old, other_new)


def test_node_features_drops_unknown_names() -> None:
    node: Node = declaring("n", "Bogus", RESTART).node()
    assert ndf.node_features(node) == {RESTART}
