"""Scheduler metrics on the in-memory cluster: kube-scheduler's names, labels and values."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest

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
    assert value(h, "scheduler_pod_scheduling_sli_duration_seconds_count", attempts="1") == 1
    assert value(h, "scheduler_preemption_attempts_total") == 1
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
