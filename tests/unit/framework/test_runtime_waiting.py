"""Pods held in the binding cycle: waiting at Permit (allowed, rejected, timed out,
preempted), PreBindPreFlight's answer, and a pod cancelled in PreBind."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.runtime import Framework
from kubesched.framework.status import Code, Status
from kubesched.framework.types import Pod
from kubesched.framework.waiting import PodInPreBind
from tests.unit.framework.test_runtime import POD, FakePermit, framework


# -- waiting at Permit ---------------------------------------------------------------------------
def waiting_framework(timeouts: dict[str, float]) -> Framework:
    fwk = framework(permit=[FakePermit(n, Status.wait(), t) for n, t in timeouts.items()])
    st = fwk.run_permit(CycleState(), POD, "n1")
    assert st is not None and st.code == Code.WAIT
    return fwk


@pytest.mark.looptime
async def test_permit_wait_until_every_waiting_plugin_allows() -> None:
    fwk = waiting_framework({"A": 30, "B": 30})
    wp = fwk.get_waiting_pod(POD.uid)
    assert wp is not None and wp.pending_plugins() == ["A", "B"]
    loop = asyncio.get_running_loop()
    loop.call_later(1, wp.allow, "A")
    loop.call_later(2, wp.allow, "B")
    assert await fwk.wait_on_permit(POD) is None
    assert loop.time() == 2
    assert fwk.get_waiting_pod(POD.uid) is None


@pytest.mark.looptime
async def test_an_allowing_plugins_timeout_no_longer_applies() -> None:
    # A allows at t=1 with a 5 s timeout; B allows at t=20 within its 30 s: the pod binds.
    fwk = waiting_framework({"A": 5, "B": 30})
    wp = fwk.get_waiting_pod(POD.uid)
    assert wp is not None
    loop = asyncio.get_running_loop()
    loop.call_later(1, wp.allow, "A")
    loop.call_later(20, wp.allow, "B")
    assert await fwk.wait_on_permit(POD) is None
    assert loop.time() == 20


@pytest.mark.looptime
async def test_permit_reject_while_waiting() -> None:
    fwk = waiting_framework({"Gang": 60})
    loop = asyncio.get_running_loop()
    loop.call_later(3, fwk.reject_waiting_pod, POD.uid, "Gang", "group failed")
    st = await fwk.wait_on_permit(POD)
    assert st is not None and (st.code, st.plugin, st.message()) == (
        Code.UNSCHEDULABLE,
        "Gang",
        "group failed",
    )
    assert loop.time() == 3


@pytest.mark.looptime
async def test_a_waiting_pod_preempted_fails_with_kubes_error_not_a_rejection() -> None:
    # kube-scheduler 1.37's Preempt: the victim's binding cycle fails with an error, so
    # it is tried again without being marked unschedulable (reason SchedulerError)
    fwk = waiting_framework({"Gang": 60})
    wp = fwk.get_waiting_pod(POD.uid)
    assert wp is not None
    asyncio.get_running_loop().call_later(2, wp.preempt, "DefaultPreemption", "preempted")
    st = await fwk.wait_on_permit(POD)
    assert st is not None and (st.code, st.plugin, st.message()) == (
        Code.ERROR,
        "DefaultPreemption",
        "waiting on permit for pod: preempted",
    )
    assert fwk.get_waiting_pod(POD.uid) is None


@pytest.mark.looptime
async def test_permit_timeout_rejects_naming_the_plugin_that_timed_out() -> None:
    fwk = waiting_framework({"Slow": 90, "Quick": 10})
    st = await fwk.wait_on_permit(POD)
    assert st is not None and (st.code, st.plugin) == (Code.UNSCHEDULABLE, "Quick")
    assert st.message() == "rejected due to timeout after waiting 10s at plugin Quick"
    assert asyncio.get_running_loop().time() == 10


# -- PreBindPreFlight ----------------------------------------------------------------------------
class FakePreFlight:
    def __init__(self, name: str, answer: Status | Exception | None) -> None:
        self.name = name
        self.answer = answer

    def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        return None


class NoPreFlight:
    name = "Legacy"

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        return None


def pre_flights(*plugins: Any) -> Status | None:
    return framework(pre_bind=list(plugins)).run_pre_bind_pre_flights(CycleState(), POD, "n1")


def test_pre_bind_pre_flights_say_whether_prebind_has_work() -> None:
    # kube's RunPreBindPreFlights: Skip when every plugin skips (or there is none)
    skipped = pre_flights(FakePreFlight("A", Status.skip()), FakePreFlight("B", Status.skip()))
    assert skipped is not None and skipped.code == Code.SKIP
    no_plugins = pre_flights()
    assert no_plugins is not None and no_plugins.code == Code.SKIP
    # any plugin with work (or one that cannot say: no PreBindPreFlight) -> work
    assert pre_flights(FakePreFlight("A", Status.skip()), FakePreFlight("B", None)) is None
    assert pre_flights(FakePreFlight("A", Status.skip()), NoPreFlight()) is None
    # an error names the plugin in kube's words; an Unschedulable is an error there too
    for answer in (Status.as_error("no state"), Status.unschedulable("no"), RuntimeError("x")):
        st = pre_flights(FakePreFlight("A", None), FakePreFlight("B", answer))
        assert st is not None and st.code == Code.ERROR and st.plugin == "B"
        assert st.message().startswith('running PreBindPreFlight "B": ')


class SlowPreBind:
    name = "Slow"

    def __init__(self) -> None:
        self.done = False

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        await asyncio.sleep(1)
        self.done = True
        return None


@pytest.mark.looptime
async def test_a_pod_cancelled_in_prebind_fails_with_the_cause_once_prebind_returns() -> None:
    # kube's podInPreBind: preemption cancels it in memory; the binding does not go on
    slow = SlowPreBind()
    fwk = framework(pre_bind=[slow])
    loop = asyncio.get_running_loop()
    cancelled: list[bool] = []
    loop.call_later(
        0.5,
        lambda: cancelled.append(
            fwk.get_pod_in_pre_bind(POD.uid).cancel("preempted by DefaultPreemption")  # type: ignore[union-attr]
        ),
    )
    st = await fwk.run_pre_bind(CycleState(), POD, "n1")
    assert cancelled == [True] and slow.done
    assert st is not None and (st.code, st.message()) == (
        Code.ERROR,
        "preempted by DefaultPreemption",
    )
    assert fwk.get_pod_in_pre_bind(POD.uid) is None
    # not cancelled: it binds; and once PreBind is over nothing can cancel it
    assert await fwk.run_pre_bind(CycleState(), POD, "n1") is None
    entry = PodInPreBind()
    assert entry.mark_prebound() and not entry.cancel("late")
