"""Scheduler metrics on the in-memory cluster: kube-scheduler's names, labels and values."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from prometheus_client import generate_latest

from kubesched.api.profile import PluginRef, Plugins, PluginSet, ProfileSpec
from kubesched.backend.queue import SchedulingQueue
from kubesched.backend.queue_events import EVENT_UNSCHEDULABLE_TIMEOUT
from kubesched.backend.queue_set import QueueSet
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import ClusterEventWithHint, PreFilterResult
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.status import Status
from kubesched.framework.types import Pod
from kubesched.plugins import in_tree_registry
from kubesched.scheduler.metrics import SchedulerMetrics
from tests.builders import make_node, make_pod
from tests.integration.harness import Harness, running

pytestmark = pytest.mark.looptime


def value(h: Harness, name: str, **labels: str) -> float:
    v = h.sched.metrics.registry.get_sample_value(name, labels)
    return 0.0 if v is None else v


async def test_attempts_durations_and_queue_gauges() -> None:
    h = Harness()
    h.apply(
        make_node("n1").alloc(cpu="2", memory="4Gi").obj(),
        make_node("n2").alloc(cpu="2", memory="4Gi").obj(),
        make_pod("fits").req(cpu="1").obj(),
        make_pod("big").req(cpu="8").obj(),
        make_pod("gated").gate("example.com/wait").obj(),
    )
    async with running(h):
        await h.wait_for(lambda: h.node_of("default/fits") is not None)
        await h.wait_for(lambda: "FailedScheduling" in h.reasons("default/big"))
        await h.wait_for(lambda: value(h, "scheduler_pending_pods", queue="unschedulable") == 1)
    p = "kubesched"
    assert value(h, "scheduler_schedule_attempts_total", result="scheduled", profile=p) == 1
    assert value(h, "scheduler_schedule_attempts_total", result="unschedulable", profile=p) == 1
    assert value(h, "scheduler_schedule_attempts_total", result="error", profile=p) == 0
    assert (
        value(
            h, "scheduler_scheduling_attempt_duration_seconds_count", result="scheduled", profile=p
        )
        == 1
    )
    assert value(h, "scheduler_pending_pods", queue="gated") == 1
    assert value(h, "scheduler_pending_pods", queue="active") == 0
    assert value(h, "scheduler_unschedulable_pods", plugin="NodeResourcesFit", profile=p) == 1
    # kube-scheduler 1.37 counts a gated pod under the plugin that gates it
    assert value(h, "scheduler_unschedulable_pods", plugin="SchedulingGates", profile=p) == 1
    assert value(h, "scheduler_pod_scheduling_sli_duration_seconds_count", attempts="1") == 1
    assert value(h, "scheduler_preemption_attempts_total") == 1
    assert value(h, "scheduler_pod_scheduled_after_flush_total") == 0

    # as kube-scheduler 1.37 records them (checked against it in
    # tests/e2e/test_queue_metrics_differential.py): PreEnqueue once per pod queued, a
    # success whatever the plugins said; Filter once per filtering pass; PreBindPreFlight
    # skipped when no PreBind plugin has work; PostBind after each bind
    def point_count(point: str, status: str = "Success") -> float:
        return value(
            h,
            "scheduler_framework_extension_point_duration_seconds_count",
            extension_point=point,
            status=status,
            profile=p,
        )

    assert point_count("PreEnqueue") == 3
    assert point_count("Filter") == 2
    assert point_count("PreBindPreFlight", "Skip") == 1
    assert point_count("PostBind") == 1
    for point in ("PreFilter", "PreScore", "Score", "Reserve", "Permit", "Bind"):
        assert (
            value(
                h,
                "scheduler_framework_extension_point_duration_seconds_count",
                extension_point=point,
                status="Success",
                profile=p,
            )
            >= 1
        ), point
    assert (
        value(
            h,
            "scheduler_framework_extension_point_duration_seconds_count",
            extension_point="PostFilter",
            status="Unschedulable",
            profile=p,
        )
        == 1
    )


async def test_plugin_durations_in_sampled_cycles_count_vector_calls() -> None:
    h = Harness()
    h.sched.metrics = m = SchedulerMetrics(sample_percent=100)
    h.sched.metrics.watch_queues(h.sched.queues)
    h.sched.algorithm.on_extension_point = m.extension_point
    h.apply(
        make_node("n1").obj(),
        make_node("n2").obj(),
        make_pod("web").req(cpu="1").obj(),
    )
    async with running(h):
        await h.wait_for(lambda: h.node_of("default/web") is not None)

    def count(plugin: str, point: str, status: str = "Success") -> float:
        v = m.registry.get_sample_value(
            "scheduler_plugin_execution_duration_seconds_count",
            {"plugin": plugin, "extension_point": point, "status": status},
        )
        return 0.0 if v is None else v

    assert count("NodeResourcesFit", "PreFilter") == 1
    # A vectorised Filter runs once for all nodes and counts as one execution.
    assert count("NodeResourcesFit", "Filter") == 1
    assert count("NodeResourcesBalancedAllocation", "Score") == 1
    assert count("TaintToleration", "Filter") >= 1


async def test_unsampled_cycles_record_no_plugin_durations() -> None:
    h = Harness()
    h.sched.metrics.sample_percent = 0
    h.apply(make_node("n1").obj(), make_pod("web").obj())
    async with running(h):
        await h.wait_for(lambda: h.node_of("default/web") is not None)
    text = generate_latest(h.sched.metrics.registry).decode()
    assert "scheduler_plugin_execution_duration_seconds_count{" not in text
    assert 'scheduler_schedule_attempts_total{profile="kubesched",result="scheduled"} 1.0' in text


def test_each_scheduler_has_its_own_registry() -> None:
    a, b = SchedulerMetrics(), SchedulerMetrics()
    a.schedule_attempts.labels("scheduled", "x").inc()
    assert b.registry.get_sample_value(
        "scheduler_schedule_attempts_total", {"result": "scheduled", "profile": "x"}
    ) in (None, 0.0)


class RejectWhileClosed:
    """A PreFilter that rejects every pod while ``closed`` and registers for no event:
    only the unschedulable pool's 5-minute flush sends a pod it rejected back."""

    name = "RejectWhileClosed"
    closed = True

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        if RejectWhileClosed.closed:
            return None, Status.unschedulable("closed", plugin=self.name)
        return None, None

    def pre_filter_extensions(self) -> None:
        return None

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return []


async def test_a_pod_bound_after_the_flush_sent_it_back_is_counted() -> None:
    registry = in_tree_registry()
    registry.register(RejectWhileClosed.name, lambda args, handle: RejectWhileClosed())
    spec = ProfileSpec(
        plugins=Plugins(pre_filter=PluginSet(enabled=[PluginRef(name=RejectWhileClosed.name)]))
    )
    h = Harness(profiles=[spec], registry=registry)
    RejectWhileClosed.closed = True
    h.apply(make_node("n1").obj(), make_pod("p").obj())
    async with running(h):
        await h.wait_for(lambda: "FailedScheduling" in h.reasons("default/p"))
        RejectWhileClosed.closed = False
        await asyncio.sleep(200)
        assert h.node_of("default/p") is None, "no event brings it back"
        await h.wait_for(lambda: h.node_of("default/p") == "n1", within=200)
    # kube-scheduler's scheduler_pod_scheduled_after_flush_total: a hint that missed
    assert value(h, "scheduler_pod_scheduled_after_flush_total") == 1
    assert (
        value(h, "scheduler_schedule_attempts_total", result="scheduled", profile="kubesched") == 1
    )


async def test_preemption_victims_per_preemptor() -> None:
    h = Harness()
    low = [make_pod(f"low-{i}").req(cpu="1").priority(1).node("n1").obj() for i in range(2)]
    h.apply(make_node("n1").alloc(cpu="2", memory="4Gi").obj(), *low)
    async with running(h):
        await h.wait_for(lambda: h.sched.cache.pod_count() == 2)
        h.apply(make_pod("high").req(cpu="2").priority(100).obj())
        await h.wait_for(lambda: h.node_of("default/high") == "n1", within=60)
    # kube-scheduler's histogram: one preemptor, two victims (buckets 1, 2, 4, ..., 64)
    assert value(h, "scheduler_preemption_victims_count") == 1
    assert value(h, "scheduler_preemption_victims_sum") == 2
    assert value(h, "scheduler_preemption_victims_bucket", le="1.0") == 0
    assert value(h, "scheduler_preemption_victims_bucket", le="2.0") == 1
    assert value(h, "scheduler_workload_preemption_victims_count") == 0


async def test_pods_entering_the_queues_are_counted_by_queue_and_event() -> None:
    """kube-scheduler's scheduler_queue_incoming_pods_total: a pod too big for the only
    node is added, rejected, and moved by the node that fits it; a gated pod is added."""
    h = Harness()
    h.apply(
        make_node("small").alloc(cpu="1", memory="4Gi").obj(),
        make_pod("big").req(cpu="4").obj(),
        make_pod("gated").gate("example.com/wait").obj(),
    )
    async with running(h):
        await h.wait_for(lambda: "FailedScheduling" in h.reasons("default/big"))
        h.apply(make_node("large").alloc(cpu="8", memory="4Gi").obj())
        await h.wait_for(lambda: h.node_of("default/big") == "large")
    name = "scheduler_queue_incoming_pods_total"
    assert value(h, name, queue="active", event="UnscheduledPodAdd") == 1
    assert value(h, name, queue="unschedulable", event="UnscheduledPodAdd") == 1  # gated
    assert value(h, name, queue="unschedulable", event="ScheduleAttemptFailure") == 1
    # the node came within the pod's first second of backoff: backoffQ, then popped
    # from it at once, activeQ being empty (SchedulerPopFromBackoffQ)
    assert value(h, name, queue="backoff", event="NodeAdd") == 1
    assert value(h, name, queue="active", event="PopFromBackoffQ") == 1


def test_a_rejected_pod_counts_under_its_rejectors_until_it_is_tried_again() -> None:
    """scheduler_unschedulable_pods as kube-scheduler keeps it: from the failed attempt
    until the next one begins, wherever the pod waits (the unschedulable pool, backoffQ,
    activeQ), not only while it is parked."""
    t = [100.0]
    q = SchedulingQueue(clock=lambda: t[0])
    qs = QueueSet()
    qs.add_queue("p", q)
    m = SchedulerMetrics()
    m.watch_queues(qs)
    q.add(make_pod("big").pod())
    qpi = q.pop_nowait()
    assert qpi is not None
    qpi.unschedulable_plugins = {"NodeResourcesFit"}
    q.add_unschedulable(qpi, scheduling_cycle=q.scheduling_cycle())

    def gauge() -> float | None:
        return m.registry.get_sample_value(
            "scheduler_unschedulable_pods", {"plugin": "NodeResourcesFit", "profile": "p"}
        )

    assert gauge() == 1  # parked
    q.move_all_to_active_or_backoff(EVENT_UNSCHEDULABLE_TIMEOUT)
    assert dict((qp.pod.name, where) for qp, where in q.pending_pods()) == {"big": "backoff"}
    assert gauge() == 1  # backing off: still counted
    t[0] += 60
    q.flush_backoff_completed()
    assert dict((qp.pod.name, where) for qp, where in q.pending_pods()) == {"big": "active"}
    assert gauge() == 1  # in activeQ, not yet tried again
    assert q.pop_nowait() is not None
    assert not gauge()  # its next attempt began


async def test_a_post_filter_error_leaves_the_attempt_unschedulable_with_its_message() -> None:
    """kube-scheduler 1.37 on a pod whose claim does not exist: VolumeRestrictions rejects
    it at PreFilter, so DynamicResources' PreFilter never ran, and its PostFilter fails to
    read its state ("not found", an Error). The error ends PostFilter (no preemption is
    tried) and joins the message; the attempt is Unschedulable, not a scheduler error."""
    h = Harness()
    h.apply(make_node("n1").obj(), make_pod("claimless").pvc("missing").obj())
    async with running(h):
        await h.wait_for(lambda: "FailedScheduling" in h.reasons("default/claimless"))
    events = [
        e for e in h.cluster.events_for("default/claimless") if e.reason == "FailedScheduling"
    ]
    assert events[0].message == (
        '0/1 nodes are available: persistentvolumeclaim "missing" not found. not found'
    )
    p = "kubesched"
    assert value(h, "scheduler_schedule_attempts_total", result="unschedulable", profile=p) == 1
    assert value(h, "scheduler_schedule_attempts_total", result="error", profile=p) == 0
    assert value(h, "scheduler_preemption_attempts_total") == 0
    assert (
        value(
            h,
            "scheduler_framework_extension_point_duration_seconds_count",
            extension_point="PostFilter",
            status="Error",
            profile=p,
        )
        == 1
    )
    assert value(h, "scheduler_unschedulable_pods", plugin="VolumeRestrictions", profile=p) == 1
