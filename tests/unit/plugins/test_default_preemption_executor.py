"""DefaultPreemption's asynchronous eviction, as kube-scheduler v1.37.2's Executor does it:
the last victim goes after the others; PreEnqueue holds the preemptor until the eviction
is done or that last victim is seen terminating; the preemptor is activated only after an
error or when the last victim went in memory (a pod waiting at Permit)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field

import pytest

from kubesched.framework.cluster_port import PodCondition
from kubesched.framework.interface import WaitingPod
from kubesched.framework.runtime import FrameworkServices
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Status
from kubesched.framework.types import Pod
from kubesched.plugins import default_preemption as dp
from kubesched.profiles import compile_profile, default_profile_spec
from tests.builders import make_pod


@dataclass
class Recorder:
    """The cluster port preemption writes through; ``fail_on`` makes a delete fail."""

    deleted: list[str] = field(default_factory=list)
    events: list[tuple[str, str]] = field(default_factory=list)
    fail_on: str = ""
    known: dict[str, Pod] = field(default_factory=dict)
    """uid -> the pod as the scheduler's cache knows it (Handle.get_pod)."""
    activated: list[str] = field(default_factory=list)
    hold: str = ""
    """The delete of this pod waits for ``gate`` before it returns (the test looks in
    between)."""
    gate: asyncio.Event = field(default_factory=asyncio.Event)

    async def delete_pod(self, pod: Pod, *, condition: PodCondition | None = None) -> None:
        if pod.name == self.fail_on:
            raise RuntimeError("apiserver says no")
        self.deleted.append(pod.name)
        if pod.name == self.hold:
            await self.gate.wait()

    async def patch_pod_status(self, pod: Pod, **_: object) -> None:
        pass

    async def record_event(self, regarding: Pod, *, reason: str, message: str, **_: object) -> None:
        self.events.append((regarding.name, message))

    def activate(self, pods: Iterable[Pod]) -> None:
        self.activated += [p.name for p in pods]


def victim(name: str) -> Pod:
    return Pod(make_pod(name).uid(f"uid-{name}").req(cpu="1").priority(1).node("n1").obj())


def plugin_for(rec: Recorder) -> dp.DefaultPreemption:
    services = FrameworkServices(
        cluster=rec,  # type: ignore[arg-type]
        snapshot=lambda: Snapshot(),
        activate=rec.activate,
        get_pod=rec.known.get,
    )
    fwk = compile_profile(default_profile_spec(), services).framework
    plugin = next(p for p in fwk.chain.post_filter if p.name == dp.NAME)
    assert isinstance(plugin, dp.DefaultPreemption)
    return plugin


PREEMPTOR = Pod(make_pod("high").uid("uid-high").req(cpu="2").priority(100).obj())
WAITING = Status.unresolvable("waiting for the preemption for this pod to be finished")


async def test_success_does_not_activate_and_the_last_victim_goes_last() -> None:
    rec = Recorder()
    plugin = plugin_for(rec)
    plugin.prepare_candidate_async(dp.Candidate("n1", [victim("a"), victim("b")], 0), PREEMPTOR)
    assert plugin.pre_enqueue(PREEMPTOR) == WAITING
    await plugin.wait()
    assert rec.deleted == ["a", "b"]
    assert rec.events == [
        ("a", "Preempted by pod uid-high on node n1"),
        ("b", "Preempted by pod uid-high on node n1"),
    ]
    assert rec.activated == []  # the victims' deletion events bring it back, as in kube
    assert plugin.pre_enqueue(PREEMPTOR) is None


@pytest.mark.parametrize(
    ("seen", "held"),
    [
        ("present", True),  # the cache still has it running: hold
        ("terminating", False),  # its deletionTimestamp is seen: let go
        ("gone", False),
    ],
    ids=["last-victim-running-holds", "last-victim-terminating-releases", "last-victim-gone"],
)
async def test_the_hold_ends_when_the_last_victim_is_seen_terminating(
    seen: str, held: bool
) -> None:
    last = victim("b")
    rec = Recorder(hold="b")
    if seen != "gone":
        obj = dict(last.raw)
        if seen == "terminating":
            obj["metadata"] = {**obj["metadata"], "deletionTimestamp": "2024-01-01T00:00:00Z"}
        rec.known[last.uid] = Pod(obj)
    plugin = plugin_for(rec)
    plugin.prepare_candidate_async(dp.Candidate("n1", [victim("a"), last], 0), PREEMPTOR)
    for _ in range(10):  # "a" is evicted; "b"'s delete is in flight
        await asyncio.sleep(0)
    assert rec.deleted == ["a", "b"] and plugin.preempting()
    assert (plugin.pre_enqueue(PREEMPTOR) == WAITING) is held
    (reg,) = plugin.events_to_register()
    assert reg.hint is not None and reg.hint(PREEMPTOR, last, None) is not held
    rec.gate.set()
    await plugin.wait()
    assert plugin.pre_enqueue(PREEMPTOR) is None


async def test_an_error_activates_the_preemptor() -> None:
    rec = Recorder(fail_on="a")
    plugin = plugin_for(rec)
    plugin.prepare_candidate_async(dp.Candidate("n1", [victim("a"), victim("b")], 0), PREEMPTOR)
    await plugin.wait()
    assert rec.deleted == []  # kube stops at the first failed eviction
    assert rec.activated == ["high"]
    assert plugin.pre_enqueue(PREEMPTOR) is None


class Waiting:
    def __init__(self, pod: Pod) -> None:
        self.pod = pod
        self.rejected: list[tuple[str, str]] = []
        self.preempted: list[tuple[str, str]] = []

    def reject(self, plugin: str, message: str) -> None:
        self.rejected.append((plugin, message))

    def preempt(self, plugin: str, message: str) -> None:
        self.preempted.append((plugin, message))


async def test_a_waiting_victim_goes_in_memory_and_activates_the_preemptor() -> None:
    rec = Recorder()
    plugin = plugin_for(rec)
    v = victim("w")
    waiting = Waiting(v)

    def get_waiting_pod(uid: str) -> WaitingPod | None:
        return waiting if uid == v.uid else None  # type: ignore[return-value]

    plugin.handle.get_waiting_pod = get_waiting_pod  # type: ignore[method-assign]
    plugin.prepare_candidate_async(dp.Candidate("n1", [v], 0), PREEMPTOR)
    await plugin.wait()
    assert (waiting.preempted, waiting.rejected) == ([("DefaultPreemption", "preempted")], [])
    assert rec.deleted == []
    assert rec.events == [("w", "Preempted by pod uid-high on node n1 (in kube-scheduler memory).")]
    assert rec.activated == ["high"]


async def test_victims_already_terminating_start_nothing() -> None:
    rec = Recorder()
    plugin = plugin_for(rec)
    obj = dict(victim("t").raw)
    obj["metadata"] = {**obj["metadata"], "deletionTimestamp": "2024-01-01T00:00:00Z"}
    plugin.prepare_candidate_async(dp.Candidate("n1", [Pod(obj)], 0), PREEMPTOR)
    assert not plugin.preempting()
    assert plugin.pre_enqueue(PREEMPTOR) is None
    assert (rec.deleted, rec.activated) == ([], [])
