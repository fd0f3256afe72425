"""PodGroup status in the shape of each foreign API (ours: :func:`kubesched.api.podgroup.podgroup_status`).

* ``scheduling.x-k8s.io/v1alpha1`` (scheduler-plugins): ``phase`` (Pending, Scheduling,
  Running, Finished, Failed, as its PodGroup controller sets them), the ``running``,
  ``succeeded`` and ``failed`` counts, ``occupiedBy`` (the first members' owners) and
  ``scheduleStartTime``.
* ``scheduling.k8s.io/v1beta1`` (Kubernetes): the ``PodGroupInitiallyScheduled``
  condition as kube-scheduler 1.37 writes it after a group's attempt: True with reason
  ``Scheduled`` once the gang holds its minimum, else False with reason ``Unschedulable``
  and why; ``observedGeneration`` is the PodGroup's generation, ``lastTransitionTime``
  changes only with the status (apimachinery's SetStatusCondition), and a True condition
  is never turned back to False (kube-scheduler's rule). Other conditions (e.g.
  ``DisruptionTarget``) are kept.

Pure functions: the writer in :mod:`kubesched.operator.podgroup_handlers` supplies the
member pods, the scheduler's report and the time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "INITIALLY_SCHEDULED",
    "REASON_SCHEDULED",
    "REASON_UNSCHEDULABLE",
    "scheduler_plugins_status",
    "upstream_conditions",
]

INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"
REASON_SCHEDULED = "Scheduled"
REASON_UNSCHEDULABLE = "Unschedulable"


def _phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def _occupied_by(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    ns = str(meta.get("namespace") or "default")
    refs = sorted(f"{ns}/{r.get('name')}" for r in meta.get("ownerReferences") or ())
    return ",".join(refs)


def scheduler_plugins_status(
    group: Mapping[str, Any],
    min_member: int,
    member_pods: Iterable[Mapping[str, Any]],
    *,
    schedule_start_time: str | None = None,
) -> dict[str, Any]:
    """The ``status`` of a scheduler-plugins PodGroup (level-based: the same phases its
    controller reaches step by step from the member pods' phases)."""
    current = group.get("status") or {}
    pods = list(member_pods)
    running = sum(1 for p in pods if _phase(p) == "Running")
    succeeded = sum(1 for p in pods if _phase(p) == "Succeeded")
    failed = sum(1 for p in pods if _phase(p) == "Failed")
    if len(pods) < min_member:
        phase = "Pending"
    elif succeeded >= min_member:
        phase = "Finished"
    elif failed and failed + running + succeeded >= min_member:
        phase = "Failed"
    elif running + succeeded >= min_member:
        phase = "Running"
    else:
        phase = "Scheduling"
    out: dict[str, Any] = {
        "phase": phase,
        "running": running,
        "succeeded": succeeded,
        "failed": failed,
    }
    occupied = current.get("occupiedBy") or (_occupied_by(pods[0]) if phase != "Pending" else "")
    if occupied:
        out["occupiedBy"] = occupied
    start = current.get("scheduleStartTime") or schedule_start_time
    if start:
        out["scheduleStartTime"] = start
    return out


def upstream_conditions(
    group: Mapping[str, Any],
    *,
    scheduled: bool,
    unschedulable: str,
    now: str,
) -> list[dict[str, Any]] | None:
    """The ``status.conditions`` a Kubernetes PodGroup should have, or None when nothing
    is to be said yet (no attempt made: kube-scheduler writes only after one).
    ``scheduled``: the gang holds its minimum (bound or assumed); ``unschedulable``: why
    the last attempt failed ("" if none did)."""
    if scheduled:
        status, reason, message = "True", REASON_SCHEDULED, ""
    elif unschedulable:
        status, reason, message = "False", REASON_UNSCHEDULABLE, unschedulable
    else:
        return None
    meta = group.get("metadata") or {}
    conditions = [
        dict(c)
        for c in (group.get("status") or {}).get("conditions") or ()
        if isinstance(c, Mapping)
    ]
    existing = next((c for c in conditions if c.get("type") == INITIALLY_SCHEDULED), None)
    if existing is not None and existing.get("status") == "True" and status != "True":
        return conditions  # once scheduled, never regressed by a later attempt
    new: dict[str, Any] = {
        "type": INITIALLY_SCHEDULED,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": now,
    }
    generation = meta.get("generation")
    if isinstance(generation, int) and not isinstance(generation, bool):
        new["observedGeneration"] = generation
    if existing is None:
        return [*conditions, new]
    if existing.get("status") == status and existing.get("lastTransitionTime"):
        new["lastTransitionTime"] = existing["lastTransitionTime"]
    return [new if c is existing else c for c in conditions]
