"""DynamicResources' ``filterTimeout``: a search for devices that takes too long on a node
ends in kube-scheduler 1.37's Error, measured on the framework's clock (a fake one here,
advanced by every read, so the tests count steps, not seconds)."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.cluster.memory import MemoryCluster
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.dra import CANNOT_ALLOCATE
from kubesched.framework.go_duration import parse_go_duration
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Code, Status
from kubesched.plugins import dynamic_resources as dr
from kubesched.profile_status import validate_spec
from kubesched.profiles import ProfileError
from tests.builders import make_node
from tests.unit.dra.builders import device, exactly, slice_
from tests.unit.plugins.dra_builders import DraHandle, claim, device_class, kind, pod_with

NODE = make_node("n1").info()
NUMA = "gpu.example.com/numa"


class TickingHandle(DraHandle):
    """The clock moves ``step`` seconds on every read (as if each read came after that
    much work), and counts its reads."""

    def __init__(self, memory: MemoryCluster, step: float) -> None:
        super().__init__(Snapshot([NODE]), memory)
        self.t = 0.0
        self.step = step
        self.reads = 0

    def now(self) -> float:
        self.reads += 1
        self.t += self.step
        return self.t


def pathological(n_a: int = 24, n_b: int = 10) -> list[dict[str, Any]]:
    """A claim whose three ``a`` devices and one ``b`` device must share a NUMA node,
    on a node where no ``b`` device shares one with an ``a`` device: the search tries
    every combination of three ``a`` devices (2024 of 24) against every ``b`` device
    before it can say no: some 4300 steps."""
    devices = [device(f"a-{i}", kind="a", numa=0) for i in range(n_a)]
    devices += [device(f"b-{i}", kind="b", numa=1) for i in range(n_b)]
    selector = 'device.attributes["gpu.example.com"].kind == "{}"'
    return [
        device_class(),
        kind("ResourceSlice", slice_("n1-devices", devices, node="n1")),
        claim(
            "c",
            exactly("a", count=3, selectors=[selector.format("a")]),
            exactly("b", selectors=[selector.format("b")]),
            constraints=[{"requests": ["a", "b"], "matchAttribute": NUMA}],
        ),
    ]


def filter_node(
    objs: list[dict[str, Any]], args: dict[str, Any], step: float
) -> tuple[Status | None, TickingHandle]:
    memory = MemoryCluster()
    for o in objs:
        memory.apply(o)
    handle = TickingHandle(memory, step)
    pl = dr.new(dr.Args.model_validate(args), handle)
    pod = pod_with("c")
    state = CycleState()
    _, s = pl.pre_filter(state, pod, [NODE])
    assert s is None
    return pl.filter(state, pod, NODE), handle


def test_a_search_past_the_limit_is_an_error_naming_the_node() -> None:
    # 1 s a read against the default 10 s: the first read (at 1, after CHECK_EVERY
    # steps) starts the limit, the 11th (at 11) finds it passed.
    status, handle = filter_node(pathological(), {}, step=1.0)
    assert status == Status(
        Code.ERROR, "node n1: timed out trying to allocate devices", plugin=dr.NAME
    )
    assert handle.reads == 11  # one every CHECK_EVERY steps


def test_without_a_limit_the_same_search_runs_to_its_answer() -> None:
    # "0" disables the limit: the clock is never read, and the node cannot take the claim.
    status, handle = filter_node(pathological(), {"filterTimeout": "0"}, step=1.0)
    assert status == Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, CANNOT_ALLOCATE, plugin=dr.NAME)
    assert handle.reads == 0


def test_the_limit_is_read_from_the_args() -> None:
    # Same search and clock: a limit of 30s lets it run three times longer than 10s
    # before it gives up (a read every CHECK_EVERY steps either way).
    _, short = filter_node(pathological(), {"filterTimeout": "10s"}, step=1.0)
    status, long = filter_node(pathological(), {"filterTimeout": "30s"}, step=1.0)
    assert status is not None and status.code == Code.ERROR
    assert (short.reads, long.reads) == (11, 31)


def test_a_search_within_the_limit_allocates() -> None:
    # A satisfiable claim on the same ticking clock: the search is over before its
    # first read of the clock.
    objs = pathological()
    objs[1] = kind(
        "ResourceSlice",
        slice_(
            "n1-devices",
            [device(f"a-{i}", kind="a", numa=0) for i in range(3)]
            + [device("b-0", kind="b", numa=0)],
            node="n1",
        ),
    )
    status, handle = filter_node(objs, {"filterTimeout": "1ms"}, step=0.0001)
    assert status is None
    assert handle.reads == 0


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("-1s", 'Invalid value: "-1s": must be zero or positive'),
        ("10", 'time: missing unit in duration "10"'),
        ("ten", 'time: invalid duration "ten"'),
    ],
)
def test_a_profile_with_a_bad_filter_timeout_is_refused_naming_the_field(
    value: str, message: str
) -> None:
    spec = {"pluginConfig": [{"name": dr.NAME, "args": {"filterTimeout": value}}]}
    with pytest.raises(ProfileError) as exc:
        validate_spec(spec)
    assert exc.value.reason == "InvalidArgs"
    assert exc.value.message.startswith("pluginConfig[0].args.filterTimeout: ")
    assert exc.value.message.endswith(message)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0.0),
        ("10s", 10.0),
        ("1m30s", 90.0),
        ("1.5h", 5400.0),
        ("250ms", 0.25),
        ("-2s", -2.0),
        ("+3us", 3e-6),
    ],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "s", "1", "1d", "1s2", "--1s", "1..5s"])
def test_not_go_durations(text: str) -> None:
    with pytest.raises(ValueError, match=r"^time: "):
        parse_go_duration(text)
