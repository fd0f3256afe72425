"""DefaultPreemption's exact victims and nodes, as kube-scheduler v1.37.2 picks them.

Each case's expectation is worked out by hand from v1.37.2's rules (the test ids and
comments give the reasoning):

- ``SelectVictimsOnNode``: every lower-priority pod is removed; the victims are sorted
  by ``MoreImportantVictim`` (priority, then the earlier ``status.startTime``, a pod
  without one reading the clock when its victim is built, so "now", later than any
  start and later than the pods before it on the node); ``FilterVictimsWithPDBViolation``
  splits them (a pod stops charging PDBs at the first one it drives below zero); the
  violating ones are reprieved first, then the others.
- ``pickOneNodeForPreemption``: fewest PDB violations, lowest highest-priority victim,
  smallest priority sum, fewest victims, latest start among the highest-priority victims.
- ``PodEligibleToPreemptOthers``: ``preemptionPolicy: Never``; a lower-priority pod
  terminating by preemption on the nominated node.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.backend.nominator import Nominator
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.status import Code, Status
from kubesched.framework.types import Pod
from kubesched.plugins import default_preemption as dp
from tests.builders import make_pod
from tests.unit.plugins.test_default_preemption import (
    T0,
    T1,
    filter_statuses,
    names,
    node,
    pdb,
    pod,
    run_post_filter,
    setup,
    terminating_victim,
)


def two_label_pdbs(first: str) -> list[dict[str, Any]]:
    """PDB "app=x" with no disruption allowed and PDB "tier=t" with one, in that order
    when ``first`` is "app", else reversed."""
    a, b = pdb(0, app="x"), pdb(1, tier="t")
    return [a, b] if first == "app" else [b, a]


# -- FilterVictimsWithPDBViolation ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("first", "violating"),
    [
        # p1 drives "app=x" to -1 and stops: "tier=t" keeps its 1 for p2 (v1.34 charged
        # both PDBs for p1, so p2 violated too).
        ("app", ["p1"]),
        # "tier=t" is checked first: p1 spends its 1, then "app=x" goes to -1 (violation);
        # p2 finds "tier=t" at 0 and drives it to -1.
        ("tier", ["p1", "p2"]),
    ],
    ids=["first-violation-stops-charging", "earlier-pdb-charged-before-violation"],
)
def test_a_pod_stops_charging_pdbs_at_its_first_violation(first: str, violating: list[str]) -> None:
    pods = [pod("p1", 1, app="x", tier="t"), pod("p2", 1, tier="t")]
    pdbs = [dp.PdbInfo.from_dict(d) for d in two_label_pdbs(first)]
    v, nv = dp.filter_pods_with_pdb_violation(pods, pdbs)
    assert names(v) == violating
    assert names(nv) == [p.name for p in pods if p.name not in violating]


# -- SelectVictimsOnNode ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("running", "cpu", "pdbs", "victims", "violations"),
    [
        # 6 cpu: w (prio 5), d1, d2 (prio 1, app=db, budget 1), 2 cpu each; need 4.
        # Sorted w, d1, d2; d1 spends the budget, d2 violates. d2 is reprieved first
        # (fits: 2 used), then w (4 used: no), then d1 (no): victims w, d1; 0 violations.
        (
            [pod("w", 5, "2", app="web"), pod("d1", 1, "2", app="db"), pod("d2", 1, "2", app="db")],
            "4",
            [pdb(1, app="db")],
            ["w", "d1"],
            0,
        ),
        # 4 cpu: d1, d2 (app=db, budget 0) both violate and both must go: 2 violations.
        (
            [pod("d1", 1, "2", app="db"), pod("d2", 1, "2", app="db")],
            "4",
            [pdb(0, app="db")],
            ["d1", "d2"],
            2,
        ),
        # Mixed groups: victims re-sorted by importance (w prio 5 before d prio 1).
        (
            [pod("d", 1, "2", app="db"), pod("w", 5, "2", app="web")],
            "4",
            [pdb(0, app="db")],
            ["w", "d"],
            1,
        ),
        # Equal priority, both started: the earlier start (a, T0) is more important and
        # is reprieved first; b (T1) is the victim, whatever the node's pod order.
        ([pod("b", 1, "2", start=T1), pod("a", 1, "2", start=T0)], "2", [], ["b"], 0),
        # No startTime reads as "now": the started pod is more important even though the
        # unstarted one comes first on the node; the unstarted one is the victim.
        (
            [pod("a-unstarted", 1, "2"), pod("b-started", 1, "2", start=T0)],
            "2",
            [],
            ["a-unstarted"],
            0,
        ),
        (
            [pod("b-started", 1, "2", start=T0), pod("a-unstarted", 1, "2")],
            "2",
            [],
            ["a-unstarted"],
            0,
        ),
        # Neither started: kube reads the clock per pod in the node's order, so the first
        # is "earlier", more important, reprieved; the second goes.
        ([pod("y", 1, "2"), pod("x", 1, "2")], "2", [], ["x"], 0),
        # Priority beats start time: the old low-priority pod goes, the new one stays.
        ([pod("old", 1, "2", start=T0), pod("new", 2, "2")], "2", [], ["old"], 0),
    ],
    ids=[
        "budget-spent-by-first-second-violates-and-is-reprieved-first",
        "both-violating-both-counted",
        "mixed-victims-sorted-by-importance",
        "equal-priority-later-start-goes",
        "unstarted-goes-before-started",
        "unstarted-goes-before-started-any-node-order",
        "both-unstarted-node-order",
        "priority-before-start-time",
    ],
)
def test_select_victims(
    running: list[Pod], cpu: str, pdbs: list[dict[str, Any]], victims: list[str], violations: int
) -> None:
    total = str(sum(p.requests.milli_cpu for p in running) // 1000)
    ni = node("n1", *[p.assigned_to("n1") for p in running], cpu=total)
    fwk, plugin, snap = setup([ni], pdbs)
    p = pod("high", 10, cpu)
    state = CycleState()
    filter_statuses(fwk, state, p, snap)
    got, n_viol, st = plugin.select_victims_on_node(state.clone(), p, ni.clone(), plugin.pdbs())
    assert st is None
    assert (names(got), n_viol) == (victims, violations)


# -- the node, through PostFilter ------------------------------------------------------------------
def found(node_name: str, n: int) -> Status:
    return Status(
        Code.SUCCESS,
        f"preemption: found a potential placement for pod on node {node_name}, "
        f"preempting {n} victims",
    )


@pytest.mark.parametrize(
    ("nodes", "pdbs", "expected", "n_victims"),
    [
        # n1 evicts one db pod (prio 1) against its PDB; n2 one prio-50 pod: fewest
        # violations comes before the lowest victim priority.
        (
            [("n1", [pod("db", 1, "4", app="db")]), ("n2", [pod("web", 50, "4")])],
            [pdb(0, app="db")],
            "n2",
            1,
        ),
        # Same priority and size, both started: the latest start among the highest-
        # priority victims wins (n2, T1), in either node order.
        (
            [("n1", [pod("a", 1, "4", start=T0)]), ("n2", [pod("b", 1, "4", start=T1)])],
            [],
            "n2",
            1,
        ),
        (
            [("n1", [pod("a", 1, "4", start=T1)]), ("n2", [pod("b", 1, "4", start=T0)])],
            [],
            "n1",
            1,
        ),
        # A victim without startTime started "now": later than T1.
        (
            [("n1", [pod("a", 1, "4", start=T1)]), ("n2", [pod("b", 1, "4")])],
            [],
            "n2",
            1,
        ),
        # Start time only compares the highest-priority victims: n1's prio-1 pod started
        # last but its prio-3 victim started first (T0 < n2's T1 for prio 3).
        (
            [
                ("n1", [pod("a3", 3, "2", start=T0), pod("a1", 1, "2", start=T1)]),
                ("n2", [pod("b3", 3, "2", start=T1), pod("b1", 1, "2", start=T0)]),
            ],
            [],
            "n2",
            2,
        ),
    ],
    ids=[
        "fewest-pdb-violations-before-victim-priority",
        "latest-start-wins",
        "latest-start-wins-first-node",
        "unstarted-is-latest",
        "start-of-highest-priority-victims-only",
    ],
)
def test_post_filter_picks_the_node(
    nodes: list[tuple[str, list[Pod]]], pdbs: list[dict[str, Any]], expected: str, n_victims: int
) -> None:
    infos = [node(name, *[p.assigned_to(name) for p in pods]) for name, pods in nodes]
    res, st = run_post_filter(infos, pod("p", 100, "4"), pdbs)
    assert res is not None and res.nominated_node_name == expected
    assert st == found(expected, n_victims)


# -- eligibility ------------------------------------------------------------------------------------
def test_never_keeps_the_nomination_and_evicts_nothing() -> None:
    ni = node("n1", pod("a", 1, "4", node="n1"))
    p = Pod(
        make_pod("p").req(cpu="2").priority(10).preemption_policy("Never").nominated("n1").obj()
    )
    res, st = run_post_filter([ni], p)
    assert res is None  # no result: the nominatedNodeName stays as it is
    assert st == Status.unschedulable("preemption: not eligible due to preemptionPolicy=Never.")


@pytest.mark.parametrize(
    ("victim_prio", "result", "message"),
    [
        # A lower-priority pod preempted earlier is still terminating on n1: wait for it.
        (1, None, "preemption: not eligible due to a terminating pod on the nominated node."),
        # The terminating pod has the preemptor's priority: not its victim, so preemption
        # goes on and picks n2 (its prio-1 pod).
        (
            10,
            "n2",
            "preemption: found a potential placement for pod on node n2, preempting 1 victims",
        ),
    ],
    ids=["waits-for-its-terminating-victim", "other-terminating-pod-ignored"],
)
def test_nominated_pod(victim_prio: int, result: str | None, message: str) -> None:
    nodes = [
        node("n1", terminating_victim("v", "n1", victim_prio)),
        node("n2", pod("w", 1, "4", node="n2")),
    ]
    p = Pod(make_pod("p").req(cpu="2").priority(10).nominated("n1").obj())
    res, st = run_post_filter(nodes, p)
    assert (None if res is None else res.nominated_node_name) == result
    assert st is not None and st.message() == message


def test_room_of_a_higher_priority_nominated_pod_is_kept_in_the_dry_run() -> None:
    """n1 (4 cpu) runs v (prio 1, 4 cpu) and has "big" (prio 20, 3 cpu) nominated to it;
    n2 runs w (prio 2, 4 cpu). Evicting v leaves 1 cpu on n1 once big's room is counted,
    so n1 is no candidate although its victim has the lower priority: n2 is chosen."""
    nom = Nominator()
    nom.add(Pod(make_pod("big").req(cpu="3").priority(20).obj()), "n1")
    nodes = [node("n1", pod("v", 1, "4", node="n1")), node("n2", pod("w", 2, "4", node="n2"))]
    fwk, plugin, snap = setup(nodes, nominator=nom)
    p = pod("p", 10, "2")
    state = CycleState()
    statuses = filter_statuses(fwk, state, p, snap)
    plugin.prepare_candidate_async = lambda c, pod: None  # type: ignore[method-assign]
    res, st = plugin.post_filter(state, p, statuses)
    assert res is not None and res.nominated_node_name == "n2"
    assert st == found("n2", 1)


def test_a_removed_pods_place_goes_to_the_last_pod_on_the_node() -> None:
    """x, y, z (priority 1, 2 cpu, none started) on a 6-cpu node; x is deleted. kube's
    NodeInfo moves the last pod into the removed one's place: the node reads z, y. "high"
    (4 cpu) needs one of them gone: unstarted pods are ordered by the node's order, so z
    is reprieved first and y is the victim (an order-keeping removal would evict z)."""
    x, y, z = (pod(n, 1, "2").assigned_to("n1") for n in ("x", "y", "z"))
    ni = node("n1", x, y, z, cpu="6")
    assert ni.remove_pod(x)
    assert names(ni.pods) == ["z", "y"]
    fwk, plugin, snap = setup([ni])
    p = pod("high", 10, "4")
    state = CycleState()
    filter_statuses(fwk, state, p, snap)
    got, _, st = plugin.select_victims_on_node(state.clone(), p, ni.clone(), [])
    assert st is None and names(got) == ["y"]
