"""kube-scheduler 1.37's check of a Kubernetes PodGroup's pods before its cycle
(``validatePodGroup``): the first pod that breaks a rule, in kube's words."""

from __future__ import annotations

from kubesched.framework.types import Pod
from kubesched.plugins.coscheduling.consistency import group_mismatch
from tests.builders import make_pod


def pod(name: str, prio: int = 0, scheduler: str = "kubesched", policy: str = "") -> Pod:
    b = make_pod(name).priority(prio).scheduler(scheduler)
    if policy:
        b = b.preemption_policy(policy)
    return Pod(b.obj())


def test_pods_that_agree_with_each_other_and_the_group_pass() -> None:
    queued = [pod("a", 5), pod("b", 5, policy="PreemptLowerPriority")]
    assert group_mismatch(5, queued, [pod("c", 5)]) == ""
    # a PodGroup without spec.priority is priority 0, as a pod without one
    assert group_mismatch(None, [pod("a"), pod("b")], []) == ""


def test_a_pod_whose_priority_is_not_the_groups() -> None:
    assert group_mismatch(None, [pod("a"), pod("b", 100)], []) == (
        "all pods in a single pod group should have the same priority as the pod group's "
        "priority, got 100 and 0"
    )
    # every pod of the right priority but the group's own differs: the first pod is named
    assert group_mismatch(7, [pod("a", 3), pod("b", 3)], []).endswith("got 3 and 7")


def test_the_first_queued_pod_sets_the_scheduler_name_and_the_preemption_policy() -> None:
    assert group_mismatch(0, [pod("a"), pod("b", scheduler="other")], []) == (
        "all pods in a single pod group should have the same .spec.schedulerName set, "
        'got: "other" and "kubesched"'
    )
    assert group_mismatch(0, [pod("a", policy="Never"), pod("b")], []) == (
        "all pods in a single pod group should have the same preemption policy, "
        "got PreemptLowerPriority and Never"
    )


def test_pods_already_on_nodes_are_checked_after_the_queued_ones() -> None:
    on_node = pod("z", 0, policy="Never")
    assert group_mismatch(0, [pod("a")], [on_node]).endswith("got Never and PreemptLowerPriority")
    # the queued pods' own mismatch is found first
    assert group_mismatch(0, [pod("a", 9)], [on_node]).endswith("got 9 and 0")


def test_rules_are_taken_in_kubes_order_for_each_pod() -> None:
    # b breaks the scheduler name and the priority: the name is said
    msg = group_mismatch(0, [pod("a"), pod("b", 4, scheduler="other", policy="Never")], [])
    assert ".spec.schedulerName" in msg
