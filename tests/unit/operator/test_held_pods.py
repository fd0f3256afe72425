"""The start's held pods (kubesched.scheduler.held_pods): the plain pending pods of the
first listing reach their queues after the first cycle, and every queue pops what it
would have popped with all of them queued as the listing delivered them: the same
first pod before they are released, the same order after, the same pods gated, parked,
unserved, in the cache, and reported as malformed."""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesched.api.podgroup import POD_GROUP_LABEL
from kubesched.backend import queue as queue_module
from kubesched.backend.queue import SchedulingQueue
from kubesched.operator.handlers import WatchRouter
from kubesched.profiles import compile_profile, default_profile_spec
from kubesched.scheduler.eventhandlers import EventHandlers
from kubesched.scheduler.scheduler import Scheduler
from tests.builders import make_node, make_pod
from tests.integration.bad_input import bad_pods
from tests.unit.operator.test_handlers import FakeCluster

JSON = dict[str, Any]
NAMES = ("kubesched", "second")
"""The served scheduler names: a queue each."""


class World:
    """A router, its event handlers and a scheduler serving :data:`NAMES`, on a cluster
    store of its own (no API server: the listing is dispatched as the informers do)."""

    def __init__(self) -> None:
        self.cluster = FakeCluster()
        self.sched = Scheduler(
            self.cluster, self.cluster, profiles=[default_profile_spec(n) for n in NAMES]
        )
        self.router = WatchRouter(
            self.cluster, scheduler_names=NAMES, reporting_controller="kubesched"
        )
        self.router.attach(EventHandlers(self.sched, on_bad_object=self.router.on_bad_object))

    def queue(self, name: str) -> SchedulingQueue:
        q = self.sched.queues.queue(name)
        assert q is not None
        return q

    def list_pods(self, pods: list[JSON]) -> None:
        self.router.dispatch("Node", None, make_node("n1").alloc(cpu="64", pods="500").obj())
        for p in pods:
            self.router.dispatch("Pod", None, copy.deepcopy(p))

    def pop(self, name: str) -> str | None:
        q = self.queue(name)
        qpi = q.pop_nowait(backoff=False)
        if qpi is None:
            return None
        q.done(qpi.pod.uid)
        return qpi.pod.uid

    def drain(self, name: str) -> list[str]:
        return list(iter(lambda: self.pop(name), None))

    def first_cycle_view(self) -> dict[str, Any]:
        """What a cycle reads besides its own pod: the cache and the nominations."""
        return {
            "nominated": sorted(
                p.uid
                for node in self.sched.nominator.nodes()
                for p in self.sched.nominator.nominated_pods_for_node(node)
            ),
            "cached": self.sched.cache.dump(),
        }

    def rest(self) -> dict[str, Any]:
        """Everything but activeQ's order: what a user (or the next cycle) would see."""
        return {
            "parked": {
                n: sorted((qpi.pod.uid, where) for qpi, where in self.queue(n).pending_pods())
                for n in NAMES
            },
            "unscheduled": sorted(self.sched.unscheduled),
            "unserved": sorted(self.sched.unserved),
            **self.first_cycle_view(),
            "reported": sorted((ref["name"], reason) for ref, reason, _, _ in self.cluster.posted),
        }


@pytest.fixture(autouse=True)
def ticking_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each queue reading of the clock a tick later: arrivals never tie, whatever the
    machine's clock resolution, so the order compared is the queues' alone."""
    ticks = itertools.count()
    monkeypatch.setattr(queue_module, "_loop_time", lambda: float(next(ticks)))


@st.composite
def listings(draw: st.DrawFn) -> list[JSON]:
    """Pending pods of every sort a start can list, the plain ones mostly."""
    pods = []
    for i in range(draw(st.integers(1, 40))):
        name = f"p{i:02d}"
        sort = draw(
            st.sampled_from(
                ["plain"] * 6
                + ["gated", "nominated", "gang", "assigned", "finished", "deleting"]
                + ["unserved", "malformed", "no-uid"]
            )
        )
        if sort == "malformed":
            pod = draw(bad_pods(name)).obj
            if isinstance(pod.get("spec"), dict):
                pod["spec"]["schedulerName"] = draw(st.sampled_from(NAMES))
            if isinstance(pod.get("metadata"), dict):
                pod["metadata"]["uid"] = f"uid-{name}"
            pods.append(pod)
            continue
        b = make_pod(name).uid(f"uid-{name}").req(cpu="100m")
        b.scheduler(draw(st.sampled_from(NAMES)))
        priority = draw(st.sampled_from([None, 0, 0, 10, 1000]))
        if priority is not None:
            b.priority(priority)
        if sort == "gated":
            b.gate("example.com/wait")
        elif sort == "nominated":
            b.nominated("n1")
        elif sort == "gang":
            b.label(POD_GROUP_LABEL, "g")
        elif sort == "assigned":
            b.node("n1")
        elif sort == "finished":
            b.phase("Succeeded")
        elif sort == "unserved":
            b.scheduler("nobody")
        pod = b.obj()
        if sort == "deleting":
            pod["metadata"]["deletionTimestamp"] = "2026-12-07T00:00:00Z"
        elif sort == "no-uid":
            del pod["metadata"]["uid"]
        pods.append(pod)
    return pods


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(listings())
def test_held_pods_are_popped_as_if_queued_by_the_listing(pods: list[JSON]) -> None:
    eager = World()
    eager.list_pods(pods)
    seen_by_the_first_cycle = eager.first_cycle_view()
    firsts = {n: eager.pop(n) for n in NAMES}
    after = {n: eager.drain(n) for n in NAMES}

    held = World()
    held.router.hold_pending()
    held.list_pods(pods)
    held.sched.admit_held_heads()
    assert held.first_cycle_view() == seen_by_the_first_cycle
    # before the release each queue pops what it would have popped with every pod in
    assert {n: held.pop(n) for n in NAMES} == firsts
    held.sched.release_held()
    assert held.sched.held is None
    assert {n: held.drain(n) for n in NAMES} == after
    assert held.rest() == eager.rest()


def test_plain_pods_wait_out_the_first_cycle_and_then_keep_their_place() -> None:
    w = World()
    w.router.hold_pending()
    w.list_pods([make_pod(f"p{i}").uid(f"u{i}").obj() for i in range(50)])
    w.router.dispatch("Pod", None, make_pod("urgent").uid("u-urgent").priority(100).obj())
    w.router.dispatch("Pod", None, make_pod("gated").uid("u-gated").gate("g").obj())
    w.sched.admit_held_heads()
    q = w.queue("kubesched")
    assert q.pending_counts()["active"] == 1  # the one the first cycle needs
    assert q.pending_counts()["gated"] == 1  # the gated pod, queued as listed
    assert w.sched.held is not None and len(w.sched.held) == 50
    assert w.pop("kubesched") == "u-urgent"
    w.sched.release_held()
    assert w.drain("kubesched") == [f"u{i}" for i in range(50)]


def test_any_event_after_the_listing_queues_the_held_pods_first() -> None:
    w = World()
    w.router.hold_pending()
    w.list_pods([make_pod(f"p{i}").uid(f"u{i}").obj() for i in range(5)])
    w.sched.admit_held_heads()
    assert w.queue("kubesched").pending_counts()["active"] == 1
    changed = make_pod("p3").uid("u3").label("app", "web").obj()
    changed["metadata"]["resourceVersion"] = "2"
    w.router.dispatch("Pod", "MODIFIED", changed)
    assert w.sched.held is None
    qpi = w.queue("kubesched").get("u3")
    assert qpi is not None and qpi.pod.labels == {"app": "web"}  # added, then updated
    assert w.drain("kubesched") == [f"u{i}" for i in range(5)]


def test_a_profile_set_during_the_listing_queues_the_held_pods_and_holds_no_more() -> None:
    w = World()
    w.router.hold_pending()
    w.list_pods([make_pod(f"p{i}").uid(f"u{i}").obj() for i in range(3)])
    w.sched.set_profile(
        compile_profile(default_profile_spec("kubesched"), w.sched.services(), None)
    )
    assert w.sched.held is None
    assert w.queue("kubesched").pending_counts()["active"] == 3  # carried to the new queue
    w.router.dispatch("Pod", None, make_pod("late").uid("u-late").obj())
    assert w.queue("kubesched").pending_counts()["active"] == 4
    assert w.drain("kubesched") == ["u0", "u1", "u2", "u-late"]


def test_a_malformed_first_pod_is_reported_and_the_next_one_is_popped_first() -> None:
    w = World()
    w.router.hold_pending()
    bad = make_pod("bad").uid("u-bad").priority(10).obj()
    bad["spec"]["containers"] = [{"name": "c", "resources": {"requests": {"cpu": "lots"}}}]
    w.list_pods([make_pod("p0").uid("u0").obj(), bad, make_pod("p1").uid("u1").priority(5).obj()])
    w.sched.admit_held_heads()
    assert [ref["name"] for ref, _, _, _ in w.cluster.posted] == ["bad"]
    assert w.pop("kubesched") == "u1"
    w.sched.release_held()
    assert w.drain("kubesched") == ["u0"]
