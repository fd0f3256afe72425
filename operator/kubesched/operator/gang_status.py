"""PodGroup status, computed: ours (:func:`podgroup_status`), and in the shape of each
foreign API.

* ``kubesched.dev/v1alpha1`` (ours, :class:`kubesched.api.podgroup.PodGroupStatus`): a
  phase readable at a glance, member counts, a KEP-1623 ``PodGroupScheduled`` condition
  and a message naming what blocks the gang.

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

from kubesched.api.podgroup import (
    CONDITION_SCHEDULED,
    MemberCounts,
    Phase,
    ScheduledReason,
    parse_spec,
)

__all__ = [
    "INITIALLY_SCHEDULED",
    "REASON_SCHEDULED",
    "REASON_SCHEDULER_ERROR",
    "REASON_UNSCHEDULABLE",
    "podgroup_status",
    "scheduler_plugins_status",
    "upstream_conditions",
]

INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"
REASON_SCHEDULED = "Scheduled"
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_SCHEDULER_ERROR = "SchedulerError"


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
    error: bool = False,
) -> list[dict[str, Any]] | None:
    """The ``status.conditions`` a Kubernetes PodGroup should have, or None when nothing
    is to be said yet (no attempt made: kube-scheduler writes only after one).
    ``scheduled``: the gang holds its minimum (bound or assumed); ``unschedulable``: why
    the last attempt failed ("" if none did); ``error``: it failed with an error, not
    for want of room (reason ``SchedulerError``)."""
    if scheduled:
        status, reason, message = "True", REASON_SCHEDULED, ""
    elif unschedulable:
        reason = REASON_SCHEDULER_ERROR if error else REASON_UNSCHEDULABLE
        status, message = "False", unschedulable
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


# -- ours (kubesched.dev/v1alpha1) ----------------------------------------------------------------
def podgroup_status(
    group: Mapping[str, Any],
    member_pods: Iterable[Mapping[str, Any]],
    waiting_uids: Iterable[str] = (),
    *,
    now: str,
    blocked: str = "",
    timed_out: bool = False,
    schedule_start_time: str | None = None,
) -> dict[str, Any]:
    """The ``status`` a PodGroup should have, as a dict ready for a status patch.

    ``member_pods`` are the group's member pods as the API server has them;
    ``waiting_uids`` those held at Permit; ``now`` an RFC 3339 time for condition
    transitions; ``blocked`` the scheduler's last reason why the gang does not fit
    (e.g. "3/8 members fit; 5 pods: Insufficient nvidia.com/gpu"); ``timed_out``
    whether the last attempt ended at the Permit timeout. The condition's
    lastTransitionTime is kept from the current status when its status is unchanged.
    """
    n = parse_spec(group).min_member
    generation = (group.get("metadata") or {}).get("generation")
    current = group.get("status") or {}
    counts = _count(member_pods, set(waiting_uids))
    phase, message = _gang_phase(counts, n, current, blocked)
    condition = _scheduled_condition(counts, n, current, message, blocked, timed_out, now)
    if isinstance(generation, int):
        condition["observedGeneration"] = generation
    out: dict[str, Any] = {
        "phase": str(phase),
        "conditions": [condition],
        "counts": counts.model_dump(),
        "message": message,
    }
    if isinstance(generation, int):
        out["observedGeneration"] = generation
    start = schedule_start_time or current.get("scheduleStartTime")
    if start:
        out["scheduleStartTime"] = start
    return out


def _member_state(pod: Mapping[str, Any], waiting_uids: set[str]) -> str:
    meta = pod.get("metadata") or {}
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    if phase == "Succeeded":
        return "succeeded"
    if phase == "Failed":
        return "failed"
    if (pod.get("spec") or {}).get("nodeName"):
        return "running" if phase == "Running" else "bound"
    if str(meta.get("uid") or "") in waiting_uids:
        return "waiting"
    return "pending"


def _count(member_pods: Iterable[Mapping[str, Any]], waiting: set[str]) -> MemberCounts:
    counts = MemberCounts()
    for pod in member_pods:
        state = _member_state(pod, waiting)
        setattr(counts, state, getattr(counts, state) + 1)
    return counts


def _placed(c: MemberCounts) -> int:
    return c.bound + c.running + c.succeeded + c.failed


def _was_placed(current: Mapping[str, Any]) -> bool:
    """The gang held its minimum before (or was already reported below it)."""
    if current.get("phase") in (Phase.SCHEDULED, Phase.RUNNING):
        return True
    return any(
        c.get("type") == CONDITION_SCHEDULED
        and (c.get("status") == "True" or c.get("reason") == ScheduledReason.BELOW_MINIMUM)
        for c in current.get("conditions") or ()
    )


def _below_minimum(placed: int, n: int) -> str:
    return f"{placed}/{n} members placed, below the minimum"


def _gang_phase(
    c: MemberCounts, n: int, current: Mapping[str, Any], blocked: str
) -> tuple[Phase, str]:
    """The gang's phase and the message that says what it waits for."""
    total = c.pending + c.waiting + _placed(c)
    placed = _placed(c)
    message = ""
    if c.failed and total - c.failed < n and c.succeeded < n:
        phase = Phase.FAILED
        message = f"{c.failed} member(s) failed; {total - c.failed}/{n} left"
    elif c.succeeded >= n and c.pending + c.waiting + c.bound + c.running == 0:
        phase = Phase.SUCCEEDED
    elif c.running + c.succeeded >= n:
        phase = Phase.RUNNING
    elif placed >= n:
        phase = Phase.SCHEDULED
    elif c.waiting or placed:
        phase = Phase.SCHEDULING  # some members hold nodes; a gang that fits nowhere is Pending
    else:
        phase = Phase.PENDING
    if phase in (Phase.PENDING, Phase.SCHEDULING) and not message:
        if total < n:
            message = f"{total}/{n} member pods exist; waiting for {n - total} more"
        elif blocked:
            message = blocked
        elif c.waiting:
            message = f"{c.waiting + placed}/{n} members reserved; waiting at Permit"
    if phase is Phase.SCHEDULING and _was_placed(current) and 0 < placed < n:
        # A running gang lost members: say so (its replacements are placed together).
        message = (
            f"{_below_minimum(placed, n)} after a member was deleted "
            f"or evicted; its replacements are scheduled together, as a group"
            + (f": {blocked}" if blocked else "")
        )
    return phase, message


def _scheduled_condition(
    c: MemberCounts,
    n: int,
    current: Mapping[str, Any],
    message: str,
    blocked: str,
    timed_out: bool,
    now: str,
) -> dict[str, Any]:
    """The ``PodGroupScheduled`` condition; its lastTransitionTime is kept while its
    status holds."""
    placed = _placed(c)
    if placed >= n:
        status, reason = "True", ScheduledReason.SCHEDULED
        cond_msg = f"{placed}/{n} members bound"
    elif message.startswith(_below_minimum(placed, n)):
        status, reason = "False", ScheduledReason.BELOW_MINIMUM
        cond_msg = message
    elif timed_out:
        status, reason = "False", ScheduledReason.TIMEOUT
        cond_msg = message or "the gang timed out waiting at Permit"
    elif blocked:
        status, reason = "False", ScheduledReason.UNSCHEDULABLE
        cond_msg = blocked
    else:
        status, reason = "False", ScheduledReason.WAITING
        cond_msg = message
    last = now
    for cond in current.get("conditions") or ():
        if cond.get("type") == CONDITION_SCHEDULED and cond.get("status") == status:
            last = str(cond.get("lastTransitionTime") or now)
    return {
        "type": CONDITION_SCHEDULED,
        "status": status,
        "reason": str(reason),
        "message": cond_msg,
        "lastTransitionTime": last,
    }
