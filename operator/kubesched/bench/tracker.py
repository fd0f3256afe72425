"""What a benchmark run observed, the same for both targets.

Pods are told apart by their role label (``measured``, ``init``, ``gated``,
``background``; see ``simulator.templates``). The runner reports creates (the moment
the create returned), every pod it saw change (watch events), and samples once a
second; :meth:`Tracker.fill` turns that into a :class:`RunResult`:

- throughput: measured pods bound per one-second sample, the first sample dropped
  (scheduler_perf's way), up to the last measured bind;
- latency: create-to-bound of each measured pod;
- per gang: from its first member created to its last member bound (p50/p90/p99), and
  how many gangs were bound completely or only partly;
- per phase: how many pods there were, how many were bound and how many were deleted
  (by the scheduler, i.e. preemption victims, or by the benchmark's churn).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Any

from kubesched.bench.report import RunResult, percentile
from kubesched.simulator.templates import GANG_LABEL, ROLE_LABEL
from kubesched.simulator.workloads import MEASURED, Plan

__all__ = ["Tracker"]


class Tracker:
    def __init__(self, plan: Plan, clock: Callable[[], float]) -> None:
        self.plan = plan
        self.clock = clock
        self.role: dict[str, str] = {}
        self.gang: dict[str, str] = {}
        for obj in [*plan.init, *plan.gated, *plan.measured]:
            self._learn(obj)
        self.measured_total = len(plan.measured)
        self.created: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self.deleted: set[str] = set()
        self.deleted_by_bench: set[str] = set()
        self.counts: list[tuple[float, int]] = []
        self.measured_bound = 0
        self.last_activity = clock()
        self.ticks = 0
        self.background_ops = {"create": 0, "delete": 0}
        self.on_progress: Callable[[], None] = lambda: None
        """Called once every measured pod is bound."""

    def _learn(self, obj: Mapping[str, Any]) -> str:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name") or "")
        labels = meta.get("labels") or {}
        self.role[name] = str(labels.get(ROLE_LABEL) or "other")
        if GANG_LABEL in labels:
            self.gang[name] = str(labels[GANG_LABEL])
        return name

    # -- what the runner reports --------------------------------------------------------------
    def created_pod(self, obj: Mapping[str, Any]) -> None:
        name = self._learn(obj)
        self.created[name] = self.clock()

    def restart_clocks(self, role: str, at: float) -> None:
        """Count the latency of ``role``'s pods from ``at`` (a backlog's window start)."""
        for name, r in self.role.items():
            if r == role and name in self.created:
                self.created[name] = max(self.created[name], at)

    def deleting(self, name: str) -> None:
        """The benchmark itself deletes ``name`` (churn), so it is no preemption victim."""
        self.deleted_by_bench.add(name)

    def seen(self, event: str, obj: Mapping[str, Any]) -> None:
        """A watch event of a pod in the run's namespace."""
        self.last_activity = self.clock()
        meta = obj.get("metadata") or {}
        name = str(meta.get("name") or "")
        if name not in self.role:
            self._learn(obj)
        if event == "DELETED":
            self.deleted.add(name)
            return
        if (obj.get("spec") or {}).get("nodeName") and name not in self.bound:
            self.bound[name] = self.clock()
            if self.role.get(name) == MEASURED:
                self.measured_bound += 1
                if self.done:
                    self.on_progress()

    def sample(self) -> None:
        self.counts.append((self.clock(), self.measured_bound))

    @property
    def done(self) -> bool:
        return self.measured_bound >= self.measured_total

    def count(self, role: str) -> int:
        return sum(1 for r in self.role.values() if r == role)

    def bound_in(self, role: str) -> int:
        return sum(1 for n in self.bound if self.role.get(n) == role)

    # -- the result ---------------------------------------------------------------------------
    def fill(self, result: RunResult, start: float) -> None:
        measured = {n for n, r in self.role.items() if r == MEASURED}
        binds = [t for n, t in self.bound.items() if n in measured]
        end = max(binds) if binds else self.clock()
        result.scheduled = len(binds)
        result.seconds = max(0.0, end - start)
        samples = []
        for (t0, c0), (t1, c1) in itertools.pairwise(self.counts):
            if t0 >= end:
                break
            if t1 > t0:
                samples.append((c1 - c0) / (t1 - t0))
        result.samples = samples[1:]
        result.latencies = [
            max(0.0, self.bound[n] - self.created[n])
            for n in measured
            if n in self.bound and n in self.created
        ]
        result.phases = self._phases()
        if self.plan.gangs:
            result.gang_latency = self._gangs()

    def _phases(self) -> dict[str, dict[str, int]]:
        phases: dict[str, dict[str, int]] = {}
        for role in ("init", "gated", "measured", "background"):
            names = [n for n, r in self.role.items() if r == role]
            if not names and role != MEASURED:
                continue
            phases[role] = {
                "pods": len(names),
                "bound": sum(1 for n in names if n in self.bound),
                "deleted_by_scheduler": sum(
                    1 for n in names if n in self.deleted and n not in self.deleted_by_bench
                ),
                "deleted_by_bench": sum(1 for n in names if n in self.deleted_by_bench),
            }
        if self.ticks:
            phases["background"] = {
                **phases.get("background", {}),
                "ticks": self.ticks,
                "created": self.background_ops["create"],
                "deleted": self.background_ops["delete"],
            }
        return phases

    def _gangs(self) -> dict[str, Any]:
        members: dict[str, list[str]] = {}
        for name, group in self.gang.items():
            if self.role.get(name) == MEASURED:
                members.setdefault(group, []).append(name)
        latencies: list[float] = []
        complete = partial = 0
        for names in members.values():
            bound = [self.bound[n] for n in names if n in self.bound]
            if len(bound) == len(names):
                complete += 1
                first = min(self.created.get(n, 0.0) for n in names)
                latencies.append(max(0.0, max(bound) - first))
            elif bound:
                partial += 1
        return {
            "p50": percentile(latencies, 50),
            "p90": percentile(latencies, 90),
            "p99": percentile(latencies, 99),
            "gangs": len(members),
            "bound": complete,
            "partial": partial,
        }
