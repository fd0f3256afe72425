"""Benchmark numbers: percentiles, scheduler_perf's throughput summary, and the output.

One run of one scheduler yields a :class:`RunResult`; ``kubesched bench`` prints one
document per invocation::

    {"workload": ..., "nodes": N, "pods": M, "target": "cluster",
     "kubesched": {...}, "kube-scheduler": {...} (with --compare),
     "ratio": kubesched's average throughput / kube-scheduler's,
     "notes": [...] (only when something needs saying)}

Per scheduler: scheduled/pods (measured pods), throughput (average and percentiles of
one-second samples, and overall), latency_seconds p50/p90/p99, cpu_seconds,
peak_rss_bytes, start_to_first_bind_seconds (backlog arrival on a cluster), phases
(per pod role: pods, bound, deleted) and, for gangs,
gang_latency_seconds {p50, p90, p99, gangs, bound, partial}.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MIN_SAMPLES",
    "RunResult",
    "document",
    "percentile",
    "render_table",
    "samples_compared",
    "throughput_ratio",
    "throughput_summary",
]


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of ``values``; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def throughput_summary(samples: Sequence[float]) -> dict[str, float | None]:
    """scheduler_perf's SchedulingThroughput: pods/s per one-second sample (the first,
    partial one already dropped by the caller), as average and percentiles."""
    return {
        "average": sum(samples) / len(samples) if samples else None,
        "p50": percentile(samples, 50),
        "p90": percentile(samples, 90),
        "p99": percentile(samples, 99),
        "samples": len(samples),
    }


@dataclass
class RunResult:
    """What one scheduler did with one copy of the workload."""

    scheduler: str
    pods: int
    scheduled: int = 0
    samples: list[float] = field(default_factory=list)
    """Bound pods per second, one per one-second interval, the first dropped."""
    latencies: list[float] = field(default_factory=list)
    """Create-to-bound seconds of each bound pod."""
    seconds: float = 0.0
    """From the first pod created to the last pod bound (or to giving up)."""
    cpu_seconds: float | None = None
    """The scheduler process's user + system CPU over the measured window."""
    cpu_wait_seconds: float | None = None
    """How long the scheduler's threads were runnable but waiting for a CPU over the
    measured window, summed over its threads (a cluster target, from the kernel's
    schedstat): a one-threaded scheduler on a busy machine waits here, not on I/O."""
    peak_rss_bytes: int | None = None
    """The scheduler process's peak resident set size (VmHWM), startup included."""
    creation_seconds: float = 0.0
    """How long the benchmark took to create the pods (a bound on measurable throughput)."""
    other_cpu_seconds: dict[str, float] = field(default_factory=dict)
    """CPU over the measured window of the rest of the path: kube-apiserver, etcd (on a
    control plane the bench started) and the bench process (creators, watch)."""
    phases: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per role (init, gated, measured, background): pods, bound, deleted (see tracker)."""
    gang_latency: dict[str, Any] | None = None
    """Gang workloads: first member created to last bound, p50/p90/p99; gangs, bound, partial."""
    start_to_first_bind: float | None = None
    """``backlog`` arrival on a cluster: seconds from the scheduler process's start (the
    bench spawning it, the pods already waiting) to its first measured bind."""
    gang_api: str | None = None
    """Gang workloads on a cluster: the API the gangs were declared with
    (``scheduling.k8s.io/v1beta1``, ``kubesched.dev/v1alpha1``, or ``none``: members only)."""

    def to_json(self) -> dict[str, Any]:
        tp = throughput_summary(self.samples)
        return {
            "scheduled": self.scheduled,
            "pods": self.pods,
            "throughput": {
                **tp,
                "overall": self.scheduled / self.seconds if self.seconds > 0 else None,
            },
            "latency_seconds": {
                "p50": percentile(self.latencies, 50),
                "p90": percentile(self.latencies, 90),
                "p99": percentile(self.latencies, 99),
            },
            "seconds": round(self.seconds, 3),
            "pod_creation_seconds": round(self.creation_seconds, 3),
            "cpu_seconds": self.cpu_seconds,
            **(
                {"cpu_wait_seconds": self.cpu_wait_seconds}
                if self.cpu_wait_seconds is not None
                else {}
            ),
            "peak_rss_bytes": self.peak_rss_bytes,
            **(
                {"start_to_first_bind_seconds": self.start_to_first_bind}
                if self.start_to_first_bind is not None
                else {}
            ),
            **({"other_cpu_seconds": self.other_cpu_seconds} if self.other_cpu_seconds else {}),
            **({"phases": self.phases} if self.phases else {}),
            **(
                {"gang_latency_seconds": self.gang_latency} if self.gang_latency is not None else {}
            ),
            **({"gang_api": self.gang_api} if self.gang_api is not None else {}),
        }


MIN_SAMPLES = 3
"""Fewer one-second samples than this on either side, and the ratio compares overall
throughput (pods bound / seconds of the window) instead: one or two samples of a run
that lasted two or three seconds say more about where its second boundaries fell than
about its speed."""


MIN_SAMPLED_SHARE = 0.75
"""A run's one-second samples must hold at least this share of the binds they would
hold at an even rate over its window (their seconds over the window's), or the ratio
compares overall throughput: when the binds bunched outside the whole seconds (the
first sample is dropped, a part second at the end is none), the samples' average says
where a burst fell, not how fast the run was (PreemptionBasic, whose preemptors bind in
bursts once their victims are gone: 23 samples covering 94% of a 24.5 s window once
held half its binds, and their average read kubesched's run 1.03 times as fast where
overall throughput read 1.95)."""


def _sampled_share(side: Mapping[str, Any]) -> float:
    """The share of the run's binds that its one-second samples hold (1 if unknown)."""
    tp, bound = side.get("throughput") or {}, side.get("scheduled")
    if not bound or tp.get("average") is None:
        return 1.0
    return float(tp["average"]) * float(tp.get("samples") or 0) / float(bound)


def _even_share(side: Mapping[str, Any]) -> float:
    """The share of the run's binds its samples would hold at an even rate: their
    seconds (one each) over the window's, at most 1 (1 if the window is unknown)."""
    samples, seconds = (side.get("throughput") or {}).get("samples") or 0, side.get("seconds")
    return min(1.0, samples / float(seconds)) if seconds else 1.0


def samples_compared(ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> bool:
    """Whether the ratio compares the averages of one-second samples (else overall
    throughput): both runs have :data:`MIN_SAMPLES` samples, holding at least
    :data:`MIN_SAMPLED_SHARE` of the binds an even rate would put in them."""
    a, b = ours.get("throughput") or {}, theirs.get("throughput") or {}
    return min(a.get("samples") or 0, b.get("samples") or 0) >= MIN_SAMPLES and all(
        _sampled_share(side) >= MIN_SAMPLED_SHARE * _even_share(side) for side in (ours, theirs)
    )


def throughput_ratio(ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> float | None:
    """kubesched's throughput over kube-scheduler's, from their figures (``to_json``):
    scheduler_perf's average of one-second samples when both runs have
    :data:`MIN_SAMPLES` of them holding what an even rate would put in them
    (:func:`samples_compared`), else pods bound / seconds of the window."""
    a, b = ours["throughput"], theirs["throughput"]
    if samples_compared(ours, theirs):
        x, y = a.get("average"), b.get("average")
    else:
        x, y = a.get("overall"), b.get("overall")
    if x is None or not y:
        return None
    return round(float(x) / float(y), 3)


def document(
    *,
    workload: str,
    nodes: int,
    pods: int,
    target: str,
    results: Mapping[str, RunResult],
    notes: Sequence[str] = (),
) -> dict[str, Any]:
    doc: dict[str, Any] = {"workload": workload, "nodes": nodes, "pods": pods, "target": target}
    for name, result in results.items():
        doc[name] = result.to_json()
    ratio = None
    if "kubesched" in doc and "kube-scheduler" in doc:
        ratio = throughput_ratio(doc["kubesched"], doc["kube-scheduler"])
    doc["ratio"] = ratio
    if notes:
        doc["notes"] = list(notes)
    return doc


def _fmt(value: Any, unit: str = "", digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}{unit}"
    return f"{value}{unit}"


Row = tuple[str, Callable[[Mapping[str, Any]], str]]


def _mib(value: int | None) -> float | None:
    return value / 2**20 if value is not None else None


def _tp(r: Mapping[str, Any]) -> str:
    return "/".join(_fmt(r["throughput"][k], digits=0) for k in ("p50", "p90", "p99"))


def _gang(r: Mapping[str, Any]) -> str:
    g = r.get("gang_latency_seconds")
    if not g:
        return "-"
    return "/".join(_fmt(g[k], digits=2) for k in ("p50", "p90", "p99"))


ROWS: tuple[Row, ...] = (
    ("scheduled", lambda r: f"{r['scheduled']}/{r['pods']}"),
    ("throughput avg (pods/s)", lambda r: _fmt(r["throughput"]["average"])),
    ("throughput p50/p90/p99", _tp),
    ("throughput overall (pods/s)", lambda r: _fmt(r["throughput"]["overall"])),
    ("latency p50 (s)", lambda r: _fmt(r["latency_seconds"]["p50"], digits=3)),
    ("latency p90 (s)", lambda r: _fmt(r["latency_seconds"]["p90"], digits=3)),
    ("latency p99 (s)", lambda r: _fmt(r["latency_seconds"]["p99"], digits=3)),
    ("cpu (s)", lambda r: _fmt(r["cpu_seconds"], digits=2)),
    ("peak rss (MiB)", lambda r: _fmt(_mib(r["peak_rss_bytes"]))),
    ("duration (s)", lambda r: _fmt(r["seconds"], digits=2)),
    ("gang latency p50/p90/p99 (s)", lambda r: _gang(r)),
)


def render_table(doc: Mapping[str, Any]) -> str:
    names = [n for n in ("kubesched", "kube-scheduler") if n in doc]
    width = max(len(label) for label, _ in ROWS)
    lines = [
        f"{doc['workload']}: {doc['nodes']} nodes, {doc['pods']} pods, target {doc['target']}",
        " " * width + "".join(f"  {n:>16}" for n in names),
    ]
    for label, get in ROWS:
        lines.append(f"{label:<{width}}" + "".join(f"  {get(doc[n]):>16}" for n in names))
    if doc.get("ratio") is not None:
        lines.append(f"ratio (kubesched / kube-scheduler throughput): {doc['ratio']:.3f}")
    lines.extend(f"note: {n}" for n in doc.get("notes") or ())
    return "\n".join(lines)
