"""Our PodGroup's status: the phase, the member counts, the PodGroupScheduled condition
and the message a user reads with ``kubectl get podgroups``."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.operator.gang_status import podgroup_status
from tests.unit.api.test_podgroup import NOW, group, pod

STATUS_CASES = [
    ("too-few-members", [pod("a")], set(), "", "Pending", "WaitingForMembers", "1/3 member pods"),
    (
        "blocked",
        [pod("a"), pod("b"), pod("c")],
        set(),
        "2/3 members fit; 1 pods: Insufficient nvidia.com/gpu",
        "Pending",
        "Unschedulable",
        "2/3 members fit; 1 pods: Insufficient nvidia.com/gpu",
    ),
    (
        "waiting",
        [pod("a"), pod("b"), pod("c")],
        {"a"},
        "",
        "Scheduling",
        "WaitingForMembers",
        "1/3 members reserved",
    ),
    (
        "bound",
        [pod("a", node="n"), pod("b", node="n"), pod("c", node="n")],
        set(),
        "",
        "Scheduled",
        "Scheduled",
        "",
    ),
    (
        "running",
        [pod(n, node="n", phase="Running") for n in "abc"],
        set(),
        "",
        "Running",
        "Scheduled",
        "",
    ),
    (
        "succeeded",
        [pod(n, node="n", phase="Succeeded") for n in "abc"],
        set(),
        "",
        "Succeeded",
        "Scheduled",
        "",
    ),
    (
        "failed",
        [pod("a", node="n", phase="Failed"), pod("b", node="n", phase="Running")],
        set(),
        "",
        "Failed",
        "Scheduled" if False else "False",
        "1 member(s) failed",
    ),
]


@pytest.mark.parametrize(
    ("pods", "waiting", "blocked", "phase", "reason", "message"),
    [c[1:] for c in STATUS_CASES],
    ids=[c[0] for c in STATUS_CASES],
)
def test_status_phase_counts_and_condition(
    pods: list[dict[str, Any]],
    waiting: set[str],
    blocked: str,
    phase: str,
    reason: str,
    message: str,
) -> None:
    st = podgroup_status(group(3), pods, waiting, now=NOW, blocked=blocked)
    assert st["phase"] == phase
    assert st["message"].startswith(message)
    assert st["observedGeneration"] == 2
    (cond,) = st["conditions"]
    assert cond["type"] == "PodGroupScheduled"
    assert cond["observedGeneration"] == 2
    if reason in ("Scheduled", "Unschedulable", "WaitingForMembers"):
        assert cond["reason"] == reason
    assert sum(st["counts"].values()) == len(pods)


def test_timeout_condition_and_transition_time_kept_while_status_unchanged() -> None:
    g = group(3)
    st = podgroup_status(g, [pod("a"), pod("b"), pod("c")], now=NOW, timed_out=True)
    assert st["conditions"][0]["reason"] == "Timeout"
    assert st["conditions"][0]["status"] == "False"
    g["status"] = st
    later = podgroup_status(g, [pod("a"), pod("b"), pod("c")], now="2025-01-01T01:00:00Z")
    assert later["conditions"][0]["lastTransitionTime"] == NOW
    bound = podgroup_status(g, [pod(n, node="x") for n in "abc"], now="2025-01-01T02:00:00Z")
    assert bound["conditions"][0]["lastTransitionTime"] == "2025-01-01T02:00:00Z"
    assert bound["counts"]["bound"] == 3


def test_a_running_gang_that_drops_below_its_minimum_says_so_until_it_is_back() -> None:
    g = group(3)
    running = [pod(n, node="x", phase="Running") for n in "abc"]
    g["status"] = podgroup_status(g, running, now=NOW)
    assert g["status"]["phase"] == "Running"
    # A member is deleted; its replacement is created but not placed yet.
    left = [*running[:2], pod("d")]
    st = podgroup_status(g, left, now="2025-01-01T01:00:00Z", blocked="")
    assert st["phase"] == "Scheduling"
    (cond,) = st["conditions"]
    assert (cond["status"], cond["reason"]) == ("False", "BelowMinimum")
    assert (
        cond["message"]
        == st["message"]
        == (
            "2/3 members placed, below the minimum after a member was deleted or evicted; "
            "its replacements are scheduled together, as a group"
        )
    )
    g["status"] = st
    # Still below (the replacement's group does not fit): the gang's reason is added.
    why = 'pod group "default/g": 2/3 members fit; 1 pods: 0/1 nodes are available'
    again = podgroup_status(g, left, now="2025-01-01T02:00:00Z", blocked=why)
    assert again["conditions"][0]["reason"] == "BelowMinimum"
    assert again["message"].endswith(f"as a group: {why}")
    # Back at its minimum: Scheduled again.
    back = podgroup_status(g, [*running[:2], pod("d", node="x")], now="2025-01-01T03:00:00Z")
    assert back["conditions"][0]["reason"] == "Scheduled"


def test_a_gang_never_placed_is_not_below_its_minimum() -> None:
    st = podgroup_status(group(3), [pod("a", node="x"), pod("b")], now=NOW)
    assert st["conditions"][0]["reason"] != "BelowMinimum"
