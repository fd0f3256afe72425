"""kube-scheduler 1.37's check of a Kubernetes PodGroup before its cycle
(``validatePodGroup`` in ``pkg/scheduler/schedule_one_podgroup.go``).

A ``scheduling.k8s.io/v1beta1`` PodGroup is scheduled as one entity: its pods must agree
with each other and with the group. kube-scheduler goes through the pods it has queued
for the group, then the group's pods already on nodes, and stops at the first that
breaks one of three rules, in this order for each pod:

* the same ``spec.schedulerName`` as the first queued pod;
* the PodGroup's priority (``spec.priority``, which the API server's Priority admission
  resolves from ``priorityClassName``; 0 when unset), as the pod's own (0 when unset);
* the same preemption policy as the first queued pod (``PreemptLowerPriority`` when
  unset). This is the rule with the ``PodGroupPreemptionPolicy`` gate off (alpha, off
  by default); with it on, kube-scheduler compares with the PodGroup's policy instead.

Then none of the group is scheduled: every queued pod fails with the message as an error
(``PodScheduled=False``, reason ``SchedulerError``, a FailedScheduling event) and goes
to backoff, and the PodGroup's ``PodGroupInitiallyScheduled`` condition is False with
reason ``SchedulerError``. Our and scheduler-plugins' PodGroups have no such check: their
gangs are scheduled with the PodGroup's priority, else the lowest member's.
"""

from __future__ import annotations

from collections.abc import Iterable

from kubesched.framework.types import Pod

__all__ = ["DEFAULT_PREEMPTION_POLICY", "group_mismatch"]

DEFAULT_PREEMPTION_POLICY = "PreemptLowerPriority"


def group_mismatch(
    group_priority: int | None, queued: Iterable[Pod], scheduled: Iterable[Pod]
) -> str:
    """kube-scheduler's error for the first pod that breaks a rule ("" when none does).
    ``queued``: the group's pods to schedule, in queue order (the first is the reference
    for the scheduler name and the preemption policy); ``scheduled``: its pods on nodes."""
    priority = group_priority or 0
    scheduler_name = ""
    policy = ""
    for pod in (*queued, *scheduled):
        if not scheduler_name:
            # kube takes the first queued pod's name; a group with nothing queued is
            # never checked.
            scheduler_name = pod.scheduler_name
        if pod.scheduler_name != scheduler_name:
            return (
                "all pods in a single pod group should have the same .spec.schedulerName "
                f'set, got: "{pod.scheduler_name}" and "{scheduler_name}"'
            )
        if pod.priority != priority:
            return (
                "all pods in a single pod group should have the same priority as the pod "
                f"group's priority, got {pod.priority} and {priority}"
            )
        own = pod.preemption_policy or DEFAULT_PREEMPTION_POLICY
        if not policy:
            policy = own
        elif own != policy:
            return (
                "all pods in a single pod group should have the same preemption policy, "
                f"got {own} and {policy}"
            )
    return ""
