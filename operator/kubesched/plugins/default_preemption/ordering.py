"""DefaultPreemption's rules as pure functions of pods, PDBs and candidates (kube-scheduler
v1.37's ``MoreImportantVictim``, ``FilterVictimsWithPDBViolation``,
``pickOneNodeForPreemption``, ``PodTerminatingByPreemption`` and the dry run's FitError
text); the plugin in ``__init__`` applies them."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kubesched.framework.labels import compile_label_selector
from kubesched.framework.status import Status, reason_counts
from kubesched.framework.types import ObjectError, Pod

__all__ = [
    "Candidate",
    "PdbInfo",
    "earliest_start_of_highest",
    "filter_pods_with_pdb_violation",
    "fit_error_message",
    "more_important_key",
    "pick_one_node_for_preemption",
    "start_time",
    "terminating_by_preemption",
]

ERR_NOT_HELPFUL = "Preemption is not helpful for scheduling"
DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
_MAX_INT32_PLUS_ONE = 2**31


def start_time(pod: Pod) -> float:
    """``status.startTime`` as epoch seconds; a pod that has not started is "now" (+inf)."""
    raw = (pod.raw.get("status") or {}).get("startTime")
    if not isinstance(raw, str) or not raw:
        return math.inf
    return _timestamp(raw)


@functools.lru_cache(maxsize=4096)
def _timestamp(raw: str) -> float:
    """An RFC 3339 time as epoch seconds (+inf if malformed); the dry run sorts the same
    pods' start times over and over, and pods started in the same second share one."""
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return math.inf


def more_important_key(pod: Pod) -> tuple[int, float]:
    """Sort key, most important first: higher priority, then earlier start."""
    return (-pod.priority, start_time(pod))


@dataclass(slots=True)
class PdbInfo:
    namespace: str
    selector: Any
    """A compiled LabelSelector, or None when the PDB selects nothing."""
    disruptions_allowed: int
    disrupted_pods: frozenset[str]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PdbInfo:
        meta = d.get("metadata") or {}
        spec = d.get("spec") or {}
        status = d.get("status") or {}
        try:
            sel = compile_label_selector(spec.get("selector"), "spec.selector")
            selector: Any = None if sel.is_empty() or sel.nothing else sel
        except ObjectError:
            selector = None  # an invalid selector matches no pod
        return cls(
            str(meta.get("namespace") or "default"),
            selector,
            int(status.get("disruptionsAllowed") or 0),
            frozenset((status.get("disruptedPods") or {}).keys()),
        )


def filter_pods_with_pdb_violation(
    pods: Sequence[Pod], pdbs: Sequence[PdbInfo]
) -> tuple[list[Pod], list[Pod]]:
    """Split ``pods`` (order kept) into (violating, non-violating) if all were evicted."""
    allowed = [p.disruptions_allowed for p in pdbs]
    violating: list[Pod] = []
    non_violating: list[Pod] = []

    def violates(pod: Pod) -> bool:
        # v1.37: the first PDB driven below zero decides; the PDBs after it are not
        # charged for this pod (v1.34 charged every matching PDB).
        if not pod.labels:
            return False
        for i, pdb in enumerate(pdbs):
            if pdb.namespace != pod.namespace or pdb.selector is None:
                continue
            if not pdb.selector.matches(pod.labels) or pod.name in pdb.disrupted_pods:
                continue
            allowed[i] -= 1
            if allowed[i] < 0:
                return True
        return False

    for pod in pods:
        (violating if violates(pod) else non_violating).append(pod)
    return violating, non_violating


@dataclass(slots=True)
class Candidate:
    node: str
    victims: list[Pod]
    """Most important first."""
    num_pdb_violations: int


def earliest_start_of_highest(victims: Sequence[Pod]) -> float:
    top = max(p.priority for p in victims)
    return min(start_time(p) for p in victims if p.priority == top)


def pick_one_node_for_preemption(candidates: Sequence[Candidate]) -> Candidate | None:
    """kube's ``pickOneNodeForPreemption``: each rule keeps the best-scoring nodes; the
    first rule that leaves one node decides; a full tie takes the first candidate."""
    if not candidates:
        return None
    rules = (
        lambda c: -c.num_pdb_violations,
        lambda c: -c.victims[0].priority,
        lambda c: -sum(p.priority + _MAX_INT32_PLUS_ONE for p in c.victims),
        lambda c: -len(c.victims),
        lambda c: earliest_start_of_highest(c.victims),
    )
    remaining = list(candidates)
    for rule in rules:
        scores = [rule(c) for c in remaining]
        best = max(scores)
        remaining = [c for c, s in zip(remaining, scores, strict=True) if s == best]
        if len(remaining) == 1:
            break
    return remaining[0]


def fit_error_message(num_all_nodes: int, statuses: Mapping[str, Status]) -> str:
    """kube's FitError text over the dry run: explicit node statuses, every other node
    counted as "Preemption is not helpful for scheduling"."""
    counts = reason_counts(statuses.values())
    absent = num_all_nodes - len(statuses)
    if absent > 0:
        counts[ERR_NOT_HELPFUL] = counts.get(ERR_NOT_HELPFUL, 0) + absent
    msg = f"0/{num_all_nodes} nodes are available:"
    parts = sorted(f"{v} {k}" for k, v in counts.items())
    if parts:
        msg += f" {', '.join(parts)}."
    return msg


def terminating_by_preemption(pod: Pod) -> bool:
    if not pod.deletion_timestamp:
        return False
    for c in (pod.raw.get("status") or {}).get("conditions") or ():
        if c.get("type") == DISRUPTION_TARGET:
            return bool(c.get("status") == "True" and c.get("reason") == PREEMPTION_BY_SCHEDULER)
    return False
