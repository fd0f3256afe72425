"""Prometheus metrics with kube-scheduler's names, labels and buckets.

Names, labels and buckets follow ``pkg/scheduler/metrics/metrics.go`` so dashboards and
alerts written for kube-scheduler read kubesched the same way. Each :class:`Scheduler`
owns one :class:`SchedulerMetrics` with its own ``CollectorRegistry`` (never the
process-global one: tests create many schedulers).

Cost on the hot path: per cycle, a few ``perf_counter`` calls and one observation per
extension point. Per-plugin durations are recorded in a 10 % sample of scheduling
cycles, as kube-scheduler does (``pluginMetricsSamplePercent``): :meth:`sample_cycle`
draws whether a cycle is sampled; a sampled cycle runs the profile's instrumented
plugins (wrapped once when the profile is compiled, beside the plain ones that other
cycles run: :mod:`kubesched.framework.instrumented`), which report to :meth:`plugin`. Binding-cycle plugins (PreBind, Bind) are timed only per extension point.

Queue gauges (``scheduler_pending_pods``, ``scheduler_unschedulable_pods``) are read from
the queues when scraped, by a collector, rather than updated on every queue move.

``scheduler_queue_incoming_pods_total`` is counted as pods enter a queue (each profile's
queue reports to :meth:`SchedulerMetrics.incoming`; ``SchedulingQueue.on_incoming``).
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from kubesched.framework.status import Code, Status

if TYPE_CHECKING:
    from kubesched.backend.queue_set import QueueSet

__all__ = ["PLUGIN_METRICS_SAMPLE_PERCENT", "SchedulerMetrics", "status_label"]

PLUGIN_METRICS_SAMPLE_PERCENT = 10
"""kube-scheduler's pluginMetricsSamplePercent: per-plugin timing in 10 % of cycles."""


def _exponential(start: float, factor: float, count: int) -> list[float]:
    return [start * factor**i for i in range(count)]


_STATUS_LABEL = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.WAIT: "Wait",
    Code.SKIP: "Skip",
    Code.PENDING: "Pending",
}


def status_label(s: Status | None) -> str:
    """kube-scheduler's ``status`` label: the code's name, ``Success`` for None."""
    return "Success" if s is None else _STATUS_LABEL[s.code]


def attempts_label(attempts: int) -> str:
    """kube-scheduler's ``attempts`` label: the count, capped at ``15+``."""
    return "15+" if attempts >= 15 else str(attempts)


_ATTEMPT_BUCKETS = _exponential(0.001, 2, 15)
_RESULT_PROFILE = ("result", "profile")


def _attempt_metrics(
    r: CollectorRegistry, prefix: str, attempts: str, attempt_duration: str, algorithm: str
) -> tuple[Counter, _Histogram, _Histogram]:
    """The three attempt metrics pods and pod groups both have, named after ``prefix``:
    attempts by result, attempt duration by result, algorithm duration."""
    return (
        Counter(f"{prefix}schedule_attempts", attempts, _RESULT_PROFILE, registry=r),
        _Histogram(
            f"{prefix}scheduling_attempt_duration_seconds",
            attempt_duration,
            _RESULT_PROFILE,
            buckets=_ATTEMPT_BUCKETS,
            registry=r,
        ),
        _Histogram(
            f"{prefix}scheduling_algorithm_duration_seconds",
            algorithm,
            buckets=_ATTEMPT_BUCKETS,
            registry=r,
        ),
    )


class SchedulerMetrics:
    """The metrics one scheduler reports; :attr:`registry` is what ``/metrics`` serves."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        sample_percent: int = PLUGIN_METRICS_SAMPLE_PERCENT,
        rng: random.Random | None = None,
    ) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        self.sample_percent = sample_percent
        # Its own random source: sampling must not shift the scheduler's seeded choices.
        self._rng = rng or random.Random()
        self._pod_metrics(self.registry)
        self._bind_metrics(self.registry)
        self._podgroup_metrics(self.registry)
        self._queues: QueueSet | None = None
        self._ep_children: dict[tuple[str, Code | None, str], Any] = {}
        self._plugin_children: dict[tuple[str, str, str], Any] = {}
        self._attempt_children: dict[tuple[str, str], tuple[Any, Any]] = {}
        self._sli_children: dict[str, Any] = {}

    def _pod_metrics(self, r: CollectorRegistry) -> None:
        """Pod attempts, preemption, the framework's extension points and plugins."""
        (
            self.schedule_attempts,
            self.scheduling_attempt_duration,
            self.scheduling_algorithm_duration,
        ) = _attempt_metrics(
            r,
            "scheduler_",
            "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod "
            "could not be scheduled, while 'error' means an internal scheduler problem.",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            "Scheduling algorithm latency in seconds",
        )
        self.preemption_attempts = Counter(
            "scheduler_preemption_attempts",
            "Total preemption attempts in the cluster till now",
            registry=r,
        )
        self.preemption_victims = _Histogram(
            "scheduler_preemption_victims",
            "Number of selected preemption victims for preemption initiated by a single pod",
            buckets=_exponential(1, 2, 7),
            registry=r,
        )
        self.workload_preemption_victims = _Histogram(
            "scheduler_workload_preemption_victims",
            "Number of pod preemption victims caused by workload preemption.",
            buckets=_exponential(1, 2, 11),
            registry=r,
        )
        self.queue_incoming_pods = _Counts(
            "scheduler_queue_incoming_pods",
            "Number of pods added to scheduling queues by event and queue type.",
            ["queue", "event"],
            registry=r,
        )
        self.pod_scheduled_after_flush = Counter(
            "scheduler_pod_scheduled_after_flush",
            "Number of pods that were successfully scheduled after being flushed from the "
            "unschedulable pool due to timeout. This metric helps detect potential queueing "
            "hint misconfigurations or event handling issues.",
            registry=r,
        )
        self.pod_scheduling_sli_duration = _Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from the time the pod enters the "
            "scheduling queue and might involve multiple scheduling attempts.",
            ["attempts"],
            buckets=_exponential(0.01, 2, 20),
            registry=r,
        )
        self.pod_scheduling_attempts = _Histogram(
            "scheduler_pod_scheduling_attempts",
            "Number of attempts to successfully schedule a pod.",
            buckets=_exponential(1, 2, 5),
            registry=r,
        )
        self.extension_point_duration = _Histogram(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point.",
            ["extension_point", "status", "profile"],
            buckets=_exponential(0.0001, 2, 12),
            registry=r,
        )
        self.plugin_execution_duration = _Histogram(
            "scheduler_plugin_execution_duration_seconds",
            "Duration for running a plugin at a specific extension point.",
            ["plugin", "extension_point", "status"],
            buckets=_exponential(0.00001, 1.5, 20),
            registry=r,
        )

    def _bind_metrics(self, r: CollectorRegistry) -> None:
        """kubesched's own: failed binding cycles, Bind calls retried and failed."""
        self.bind_errors = Counter(
            "kubesched_bind_errors",
            "Binding cycles that failed, by the extension point that failed (kubesched).",
            ["extension_point", "profile"],
            registry=r,
        )
        self.bind_retries = Counter(
            "kubesched_bind_retries",
            "Bind calls retried in place after a transient error, by the error's code "
            "(HTTP status, timeout, connection) (kubesched).",
            ["code"],
            registry=r,
        )
        self.bind_request_errors = Counter(
            "kubesched_bind_request_errors",
            "Bind calls that failed, by the error's code (HTTP status, timeout, "
            "connection, other) (kubesched).",
            ["code"],
            registry=r,
        )

    def _podgroup_metrics(self, r: CollectorRegistry) -> None:
        """Pod groups (kube-scheduler 1.37, GenericWorkload / TopologyAwareWorkloadScheduling)."""
        (
            self.podgroup_schedule_attempts,
            self.podgroup_scheduling_attempt_duration,
            self.podgroup_scheduling_algorithm_duration,
        ) = _attempt_metrics(
            r,
            "scheduler_podgroup_",
            "Number of attempts to schedule pod group, by the result. 'unschedulable' means "
            "a pod group could not be scheduled, while 'error' means an internal scheduler "
            "problem.",
            "Pod group scheduling attempt latency in seconds",
            "Pod group scheduling algorithm latency in seconds",
        )
        self.generated_placements = Counter(
            "scheduler_generated_placements",
            "Number of candidate placements generated when scheduling pod groups.",
            ["profile"],
            registry=r,
        )
        self.placement_evaluations = Counter(
            "scheduler_placement_evaluations",
            "Number of candidate placements evaluated when scheduling pod groups, by result. "
            "'feasible' means the pod group fit into the placement, while 'infeasible' means "
            "it did not.",
            _RESULT_PROFILE,
            registry=r,
        )
        self.placement_evaluation_duration = _Histogram(
            "scheduler_placement_evaluation_duration_seconds",
            "Latency in seconds of evaluating a single candidate placement when scheduling "
            "pod groups, by result. 'feasible' means the pod group fit into the placement, "
            "while 'infeasible' means it did not.",
            _RESULT_PROFILE,
            buckets=_ATTEMPT_BUCKETS,
            registry=r,
        )

    # -- queue gauges ---------------------------------------------------------------------
    def watch_queues(self, queues: QueueSet) -> None:
        """Report ``scheduler_pending_pods`` and ``scheduler_unschedulable_pods`` from
        these queues at scrape time."""
        if self._queues is None:
            self.registry.register(_QueueCollector(lambda: self._queues))
        self._queues = queues

    # -- recording ------------------------------------------------------------------------
    def sample_cycle(self) -> bool:
        """Whether this scheduling cycle records per-plugin durations (10 %)."""
        return self._rng.random() * 100 < self.sample_percent

    def extension_point(self, point: str, status: Status | None, profile: str, sec: float) -> None:
        key = (point, None if status is None else status.code, profile)
        child = self._ep_children.get(key)
        if child is None:
            labels = (point, status_label(status), profile)
            child = self._ep_children[key] = self.extension_point_duration.labels(*labels)
        child.observe(sec)

    def plugin(self, plugin: str, point: str, status: str, sec: float) -> None:
        key = (plugin, point, status)
        child = self._plugin_children.get(key)
        if child is None:
            child = self._plugin_children[key] = self.plugin_execution_duration.labels(*key)
        child.observe(sec)

    def attempt(self, result: str, profile: str, sec: float) -> None:
        """One scheduling attempt ended: ``scheduled``, ``unschedulable`` or ``error``."""
        key = (result, profile)
        children = self._attempt_children.get(key)
        if children is None:
            children = self._attempt_children[key] = (
                self.schedule_attempts.labels(*key),
                self.scheduling_attempt_duration.labels(*key),
            )
        children[0].inc()
        children[1].observe(sec)

    def group_attempt(self, result: str, profile: str, sec: float) -> None:
        """One pod group attempt ended: ``scheduled``, ``unschedulable`` or ``error``."""
        self.podgroup_schedule_attempts.labels(result, profile).inc()
        self.podgroup_scheduling_attempt_duration.labels(result, profile).observe(sec)

    def group_algorithm(self, sec: float) -> None:
        self.podgroup_scheduling_algorithm_duration.observe(sec)

    def placements_generated(self, profile: str, count: int) -> None:
        self.generated_placements.labels(profile).inc(count)

    def placement_evaluation(self, result: str, profile: str, sec: float) -> None:
        """One candidate placement (topology domain) tried: ``feasible`` or ``infeasible``."""
        self.placement_evaluations.labels(result, profile).inc()
        self.placement_evaluation_duration.labels(result, profile).observe(sec)

    def incoming(self, queue: str, event: str) -> None:
        """A pod entered ``queue`` on ``event`` (``SchedulingQueue.on_incoming``)."""
        counts = self.queue_incoming_pods.counts
        key = (queue, event)
        counts[key] = counts.get(key, 0) + 1

    def scheduled(self, attempts: int, sli_seconds: float | None, *, flushed: bool) -> None:
        """A pod bound after ``attempts``; ``flushed``: the unschedulable pool's time
        limit, not an event, sent it to the attempt that placed it."""
        self.pod_scheduling_attempts.observe(attempts)
        if flushed:
            self.pod_scheduled_after_flush.inc()
        if sli_seconds is not None:
            label = attempts_label(attempts)
            child = self._sli_children.get(label)
            if child is None:
                child = self._sli_children[label] = self.pod_scheduling_sli_duration.labels(label)
            child.observe(max(0.0, sli_seconds))


class _Series:
    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: list[float]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one is +Inf
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value


class _Histogram(Collector):
    """A Prometheus histogram at a third of ``prometheus_client.Histogram``'s cost per
    observation (a bisect, no lock): the scheduling loop observes several per pod. Only
    the event loop's thread observes; a scrape reads (ints and a float: no torn values).
    """

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        *,
        buckets: Sequence[float],
        registry: CollectorRegistry,
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = list(labelnames)
        self.bounds = sorted(float(b) for b in buckets)
        self.series: dict[tuple[str, ...], _Series] = {}
        if not self.labelnames:
            self.labels()  # one series, exported at zero until observed (as client_golang)
        registry.register(self)

    def labels(self, *values: str) -> _Series:
        s = self.series.get(values)
        if s is None:
            if len(values) != len(self.labelnames):
                raise ValueError(f"{self.name}: expected labels {self.labelnames}")
            s = self.series[values] = _Series(self.bounds)
        return s

    def observe(self, value: float) -> None:
        self.labels().observe(value)

    def describe(self) -> Iterator[Metric]:
        yield HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        les = [*(_le(b) for b in self.bounds), "+Inf"]
        for values, s in list(self.series.items()):
            cumulative, buckets = 0, []
            for le, c in zip(les, list(s.counts), strict=True):
                cumulative += c
                buckets.append((le, float(cumulative)))
            family.add_metric(list(values), buckets, s.sum)
        yield family


class _Counts(Collector):
    """A labelled Prometheus counter at a tenth of ``prometheus_client.Counter``'s cost
    per increment (a dict, no lock): the queue counts every pod it moves. Only the event
    loop's thread counts; a scrape reads a copy."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        *,
        registry: CollectorRegistry,
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = list(labelnames)
        self.counts: dict[tuple[str, ...], int] = {}
        registry.register(self)

    def describe(self) -> Iterator[Metric]:
        yield CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for values, count in list(self.counts.items()):
            family.add_metric(list(values), float(count))
        yield family


def _le(bound: float) -> str:
    return repr(bound) if bound != int(bound) else f"{bound:.1f}"


class _QueueCollector(Collector):
    def __init__(self, queues: Callable[[], QueueSet | None]) -> None:
        self._queues = queues

    def collect(self) -> Iterator[Metric]:
        from kubesched.backend.queue import GATED

        pending = GaugeMetricFamily(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type. 'active' means number of pods in "
            "activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means "
            "number of pods in unschedulablePods that the scheduler attempted to schedule "
            "and failed; 'gated' is the number of unschedulable pods that the scheduler "
            "never attempted to schedule because they are gated.",
            labels=["queue"],
        )
        reasons = GaugeMetricFamily(
            "scheduler_unschedulable_pods",
            "The number of unschedulable pods broken down by plugin name. A pod will "
            "increment the gauge for all plugins that caused it to not schedule and so "
            "this metric have meaning only when broken down by plugin.",
            labels=["plugin", "profile"],
        )
        qs = self._queues()
        counts = {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 0}
        by_plugin: dict[tuple[str, str], int] = {}
        if qs is not None:
            for profile, q in qs.queues().items():
                for k, v in q.pending_counts().items():
                    counts[k] = counts.get(k, 0) + v
                # as kube-scheduler 1.37 keeps the gauge: every queued pod (not in
                # flight) under the plugins that rejected it in its last attempt, and a
                # gated one under the plugin that gates it
                for qpi, where in q.pending_pods():
                    plugins = qpi.unschedulable_plugins | qpi.pending_plugins
                    if where == GATED and qpi.gating_plugin:
                        plugins = plugins | {qpi.gating_plugin}
                    for p in plugins:
                        by_plugin[(p, profile)] = by_plugin.get((p, profile), 0) + 1
        for k, v in counts.items():
            pending.add_metric([k], v)
        for (plugin, profile), v in sorted(by_plugin.items()):
            reasons.add_metric([plugin, profile], v)
        yield pending
        yield reasons
