from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import ActionType, ClusterEvent, EventResource
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.registry import NoArgs
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Code, Status
from kubesched.framework.types import Pod
from kubesched.plugins import node_ports
from tests.builders import PodBuilder, make_node, make_pod
from tests.unit.plugins.fakes import FakeHandle

REASON = "node(s) didn't have free ports for the requested pod ports"


def plugin() -> node_ports.NodePorts:
    return node_ports.new(NoArgs(), FakeHandle())


def port_pod(name: str, *ports: tuple[int, str, str]) -> Pod:
    b = make_pod(name)
    for port, proto, ip in ports:
        b.host_port(port, proto, ip)
    return b.pod()


def sidecar_pod(name: str, port: int, *, restart_always: bool) -> Pod:
    b: PodBuilder = make_pod(name).init_container(sidecar=restart_always)
    init = b.obj()["spec"]["initContainers"][0]
    init["ports"] = [{"containerPort": port, "hostPort": port}]
    return b.pod()


def run_filter(pod: Pod, node: NodeInfo) -> Status | None:
    pl = plugin()
    state = CycleState()
    _, s = pl.pre_filter(state, pod, [node])
    if s is not None and s.is_skip():
        return None
    return pl.filter(state, pod, node)


@pytest.mark.parametrize(
    ("wanted", "existing", "fits"),
    [
        pytest.param([(8080, "TCP", "")], [], True, id="empty-node"),
        pytest.param([(8080, "TCP", "")], [(8080, "TCP", "")], False, id="same-port"),
        pytest.param([(8080, "TCP", "")], [(8081, "TCP", "")], True, id="other-port"),
        pytest.param([(8080, "UDP", "")], [(8080, "TCP", "")], True, id="other-protocol"),
        pytest.param(
            [(8080, "TCP", "127.0.0.1")], [(8080, "TCP", "127.0.0.2")], True, id="other-ip"
        ),
        pytest.param(
            [(8080, "TCP", "127.0.0.1")], [(8080, "TCP", "127.0.0.1")], False, id="same-ip"
        ),
        pytest.param(
            [(8080, "TCP", "127.0.0.1")], [(8080, "TCP", "")], False, id="used-on-wildcard"
        ),
        pytest.param(
            [(8080, "TCP", "")], [(8080, "TCP", "127.0.0.1")], False, id="wildcard-vs-specific"
        ),
        pytest.param(
            [(8080, "TCP", "0.0.0.0")], [(8080, "TCP", "10.0.0.1")], False, id="explicit-wildcard"
        ),
        pytest.param(
            [(8080, "UDP", "")], [(8080, "TCP", "10.0.0.1")], True, id="wildcard-other-protocol"
        ),
        pytest.param(
            [(80, "TCP", ""), (443, "TCP", "")], [(443, "TCP", "")], False, id="second-port"
        ),
    ],
)
def test_filter_port_conflicts(
    wanted: list[tuple[int, str, str]], existing: list[tuple[int, str, str]], fits: bool
) -> None:
    node = make_node("n").info(*([port_pod("old", *existing)] if existing else []))
    st_ = run_filter(port_pod("p", *wanted), node)
    if fits:
        assert st_ is None
    else:
        assert st_ == Status.unschedulable(REASON, plugin="NodePorts")
        assert st_.code == Code.UNSCHEDULABLE  # preemption may free the port


def test_sidecar_host_ports_count_and_plain_init_containers_do_not() -> None:
    node = make_node("n").info(sidecar_pod("old", 9000, restart_always=True))
    assert run_filter(port_pod("p", (9000, "TCP", "")), node) is not None
    assert run_filter(sidecar_pod("p2", 9000, restart_always=True), node) is not None
    plain = make_node("n").info(sidecar_pod("old", 9000, restart_always=False))
    assert run_filter(port_pod("p", (9000, "TCP", "")), plain) is None


def test_pre_filter_skips_pods_without_host_ports() -> None:
    _, s = plugin().pre_filter(CycleState(), make_pod("p").pod(), [])
    assert s is not None and s.is_skip()
    r, s = plugin().pre_filter(CycleState(), port_pod("p", (80, "TCP", "")), [])
    assert (r, s) == (None, None)


def test_events_and_pod_deleted_hint() -> None:
    regs = plugin().events_to_register()
    assert [r.event for r in regs] == [
        ClusterEvent(EventResource.POD, ActionType.DELETE),
        ClusterEvent(EventResource.NODE, ActionType.ADD),
    ]
    hint = regs[0].hint
    assert hint is not None
    pod = port_pod("p", (80, "TCP", ""))
    holder = make_pod("h").host_port(80).node("n").pod()
    assert hint(pod, holder, None) is True
    assert hint(pod, make_pod("h").host_port(81).node("n").pod(), None) is False
    assert hint(pod, make_pod("h").node("n").pod(), None) is False
    assert hint(pod, make_pod("h").host_port(80).pod(), None) is False  # never placed


PORTS = st.tuples(
    st.sampled_from((80, 443)), st.sampled_from(("TCP", "UDP")), st.sampled_from(("", "10.0.0.1"))
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    wanted=st.lists(PORTS, min_size=1, max_size=2),
    nodes=st.lists(st.lists(PORTS, max_size=2), min_size=1, max_size=5),
)
def test_filter_mask_equals_filter(
    wanted: list[tuple[int, str, str]], nodes: list[list[tuple[int, str, str]]]
) -> None:
    infos = [
        make_node(f"n{i}").info(*([port_pod(f"e{i}", *used)] if used else []))
        for i, used in enumerate(nodes)
    ]
    snap = Snapshot(infos)
    pod = port_pod("p", *wanted)
    pl = plugin()
    state = CycleState()
    pl.pre_filter(state, pod, infos)
    mask = pl.filter_mask(state, pod, snap)
    assert mask is not None
    expected = np.array([pl.filter(state, pod, ni) is None for ni in infos])
    assert (mask == expected).all()
