"""NodeResourcesFit with extended resources backed by DRA (DRAExtendedResource, GA in
1.37): a request a DeviceClass serves is left to DynamicResources on a node that has
none of it in allocatable, as kube-scheduler's shouldDelegateResourceToDRA decides."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Code, Status
from kubesched.framework.types import Pod
from kubesched.plugins import node_resources_fit as fit
from kubesched.scheduler.signers import plugin_signer
from tests.builders import make_node, make_pod
from tests.unit.dra.test_extended import cls
from tests.unit.plugins.fakes import FakeHandle, FakeStore

GPU = "example.com/gpu"
IMPLICIT = "deviceclass.resource.kubernetes.io/gpu"


def plugin(*classes: dict[str, Any], snap: Snapshot | None = None) -> fit.NodeResourcesFit:
    return fit.new(fit.Args(), FakeHandle(snap, FakeStore(*classes)))


def gpu_pod(name: str = GPU, q: str = "1") -> Pod:
    return make_pod("p").req(cpu="1", **{name: q}).pod()


def node(name: str = "n", **alloc: str) -> NodeInfo:
    return make_node(name).alloc(cpu="4", memory="8Gi", **alloc).info()


def with_gpus(n: str, used: int = 0) -> NodeInfo:
    ni = node(**{GPU: n})
    for i in range(used):
        ni.add_pod(make_pod(f"u{i}").req(**{GPU: "1"}).node("n").pod())
    return ni


def unresolvable(reason: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reason, plugin=fit.NAME)


@pytest.mark.parametrize(
    ("classes", "pod", "node_info", "expected"),
    [
        pytest.param(
            [], gpu_pod(), node(), unresolvable(f"Insufficient {GPU}"), id="no-class-no-device"
        ),
        pytest.param([cls("gpu", GPU)], gpu_pod(), node(), None, id="class-serves-it"),
        pytest.param([cls("gpu", GPU)], gpu_pod(), node(**{GPU: "0"}), None, id="allocatable-zero"),
        pytest.param([cls("gpu")], gpu_pod(IMPLICIT), node(), None, id="implicit-class-name"),
        pytest.param(
            [cls("other")],
            gpu_pod(IMPLICIT),
            node(),
            unresolvable(f"Insufficient {IMPLICIT}"),
            id="implicit-name-of-a-missing-class",
        ),
        pytest.param(
            [cls("gpu", GPU)],
            gpu_pod(),
            with_gpus("1", used=1),
            Status(Code.UNSCHEDULABLE, f"Insufficient {GPU}", plugin=fit.NAME),
            id="device-plugin-node-full-is-still-checked",
        ),
        pytest.param(
            [cls("gpu", GPU)], gpu_pod(q="2"), with_gpus("2"), None, id="device-plugin-fits"
        ),
    ],
)
def test_filter(
    classes: list[dict[str, Any]], pod: Pod, node_info: NodeInfo, expected: Status | None
) -> None:
    snap = Snapshot([node_info])
    pl = plugin(*classes, snap=snap)
    state = CycleState()
    pl.pre_filter(state, pod, [node_info])
    assert pl.filter(state, pod, node_info) == expected
    mask = pl.filter_mask(state, pod, snap)
    assert mask is not None
    np.testing.assert_array_equal(mask, [expected is None])
    assert pl.filter_statuses(state, pod, snap, np.array([0], dtype=np.intp)) == [expected]


def test_node_hint_counts_a_node_without_the_resource() -> None:
    hint = plugin(cls("gpu", GPU)).events_to_register()[1].hint
    assert hint is not None
    pod = gpu_pod()
    bare = make_node("n").alloc(cpu="4", memory="8Gi").node()
    assert hint(pod, None, bare) is True, "DRA may serve it on a new node"
    assert hint(gpu_pod("example.com/nic"), None, bare) is False, "no class serves it"
    more_cpu = make_node("n").alloc(cpu="8", memory="8Gi").node()
    assert hint(pod, bare, more_cpu) is True


@pytest.mark.parametrize(
    ("old", "new", "pod", "expected"),
    [
        pytest.param(None, cls("gpu", GPU), gpu_pod(), True, id="added-names-it"),
        pytest.param(None, cls("gpu"), gpu_pod(IMPLICIT), True, id="added-implicit"),
        pytest.param(None, cls("gpu"), gpu_pod(), False, id="added-unrelated"),
        pytest.param(cls("gpu"), cls("gpu", GPU), gpu_pod(), True, id="now-names-it"),
        pytest.param(cls("gpu", GPU), cls("gpu", GPU), gpu_pod(), False, id="same-name"),
        pytest.param(
            cls("gpu"), cls("gpu", "example.com/nic"), gpu_pod(), False, id="names-another"
        ),
    ],
)
def test_device_class_hint(
    old: dict[str, Any] | None, new: dict[str, Any], pod: Pod, expected: bool
) -> None:
    hint = plugin().events_to_register()[2].hint
    assert hint is not None
    assert hint(pod, old, new) is expected


def test_pods_using_dra_extended_resources_are_not_batched() -> None:
    sign = plugin_signer(plugin(cls("gpu", GPU)))
    assert sign is not None
    _, status = sign(gpu_pod())
    assert status is not None
    assert (
        status.message() == "signature disabled when dra extended resources are used in the cluster"
    )
    _, status = sign(gpu_pod("example.com/nic"))
    assert status is None
