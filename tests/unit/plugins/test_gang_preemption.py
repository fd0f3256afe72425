"""Gang-aware preemption's victims (``default_preemption.gang``), worked out by hand.

Each cluster below is nodes of 2 cpu; pods take 1 cpu unless said. Victims' gangs come
from the label ``g`` (``gang_of``), with the disruption mode and minMember of ``GANGS``.
The preempting gang is placed first fit, in node order, by the profile's PreFilter and
Filter (``first_fit``), as the whole-group cycle places members one after another.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.runtime import Framework, FrameworkServices
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Code, Status
from kubesched.framework.types import Pod
from kubesched.plugins.default_preemption import PdbInfo
from kubesched.plugins.default_preemption import gang as gp
from kubesched.profiles import compile_profile, default_profile_spec
from tests.builders import make_node, make_pod
from tests.unit.plugins.test_default_preemption import T0, T1, pdb

GANGS = {
    "all": gp.VictimGang("default/all", 2, "All"),
    "all2": gp.VictimGang("default/all2", 2, "All"),
    "single": gp.VictimGang("default/single", 2, "Single"),
    "single3": gp.VictimGang("default/single3", 3, "Single"),
    "prio": gp.VictimGang("default/prio", 2, "All", priority=1),
}


def gang_of(p: Pod) -> gp.VictimGang | None:
    g = p.labels.get("g")
    return GANGS[g] if g else None


def pod(
    name: str,
    prio: int,
    node: str = "",
    cpu: str = "1",
    g: str = "",
    start: str = "",
    **labels: str,
) -> Pod:
    b = make_pod(name).req(cpu=cpu).priority(prio).labels(**labels)
    if g:
        b = b.label("g", g)
    if node:
        b = b.node(node)
    obj = b.obj()
    if start:
        obj["status"]["startTime"] = start
    return Pod(obj)


def node(name: str, *pods: Pod, cpu: str = "2") -> NodeInfo:
    return make_node(name).alloc(cpu=cpu, memory="32Gi", pods=110).info(*pods)


def members(n: int, prio: int = 10, cpu: str = "1") -> list[Pod]:
    return [pod(f"m{i}", prio, cpu=cpu) for i in range(n)]


def framework(snap: Snapshot) -> tuple[Framework, list[Snapshot]]:
    """The default profile, its ``handle.snapshot`` following ``current[0]``."""
    current = [snap]
    services = FrameworkServices(snapshot=lambda: current[0], rng=random.Random(0))
    return compile_profile(default_profile_spec(), services).framework, current


def first_fit(fwk: Framework, gang: Sequence[Pod], need: int) -> gp.Place:
    def place(work: Snapshot) -> list[gp.Assignment] | Status:
        out: list[gp.Assignment] = []
        for m in gang:
            if len(out) == need:
                break
            state = CycleState()
            _, s, _ = fwk.run_pre_filter(state, m, work.node_infos)
            assert s is None
            for ni in work.node_infos:
                if fwk.run_filter_plugins_with_nominated_pods(state, m, ni) is None:
                    ni.add_pod(m.assigned_to(ni.name))
                    out.append(gp.Assignment(m, ni.name, state))
                    break
        for a in out:
            work.get(a.node).remove_pod(a.pod)  # type: ignore[union-attr]
        if len(out) < need:
            return Status.unschedulable(f"{len(out)}/{need} members fit")
        return out

    return place


@dataclass
class Case:
    nodes: list[NodeInfo]
    gang: list[Pod]
    need: int = 0
    priority: int = 10
    pdbs: list[PdbInfo] = field(default_factory=list)


def run(c: Case) -> gp.GangPlan | Status:
    snap = Snapshot(c.nodes)
    fwk, current = framework(snap)

    @contextmanager
    def use(s: Snapshot) -> Iterator[None]:
        current[0] = s  # plugins reading handle.snapshot see the round's copy
        try:
            yield
        finally:
            current[0] = snap

    before = {ni.name: sorted(p.name for p in ni.pods) for ni in snap.node_infos}
    out = gp.find_gang_victims(
        fwk,
        snap,
        priority=c.priority,
        place=first_fit(fwk, c.gang, c.need or len(c.gang)),
        gang_of=gang_of,
        pdbs=c.pdbs,
        use=use,
    )
    # The snapshot handed in never changes: every round works on a copy.
    assert {ni.name: sorted(p.name for p in ni.pods) for ni in snap.node_infos} == before
    return out


def plan(c: Case) -> gp.GangPlan:
    out = run(c)
    assert isinstance(out, gp.GangPlan), out
    return out


def victim_names(p: gp.GangPlan) -> list[str]:
    return sorted(v.name for v in p.victims)


# -- whole gangs ------------------------------------------------------------------------------------
CASES = {
    # A gang of 4 on two full nodes held by two gangs of 2 (All), one member per node:
    # all four go, and the members are nominated two per node.
    "two-all-gangs-evicted-whole": (
        Case(
            [
                node("n1", pod("a1", 1, "n1", g="all"), pod("b1", 1, "n1", g="all2")),
                node("n2", pod("a2", 1, "n2", g="all"), pod("b2", 1, "n2", g="all2")),
            ],
            members(4),
        ),
        ["a1", "a2", "b1", "b2"],
    ),
    # One member needs one cpu. The gang (All) and the plain pods have the same
    # priority: the gang is more important (kube ranks PodGroup victims over pods), so
    # it is reprieved first and x, the plain pod on the first node, goes.
    "gang-kept-before-plain-pod": (
        Case(
            [
                node("n1", pod("a1", 1, "n1", g="all"), pod("x", 1, "n1")),
                node("n2", pod("a2", 1, "n2", g="all"), pod("y", 1, "n2")),
            ],
            members(1),
        ),
        ["x"],
    ),
    # The gang is of lower priority than the plain pods: x and y are reprieved first,
    # then the gang does not fit back, and goes whole -- a2 too, on a node the member
    # does not need.
    "lower-priority-gang-goes-whole": (
        Case(
            [
                node("n1", pod("a1", 1, "n1", g="all"), pod("x", 2, "n1")),
                node("n2", pod("a2", 1, "n2", g="all"), pod("y", 2, "n2")),
            ],
            members(1),
        ),
        ["a1", "a2"],
    ),
    # A gang's priority (spec.priority 1) decides, not its pods' (5): it is a victim of
    # a preemptor of priority 3; the pods alone at 5 are not.
    "gang-priority-overrides-pods": (
        Case(
            [
                node("n1", pod("p1", 5, "n1", g="prio"), pod("x", 5, "n1")),
                node("n2", pod("p2", 5, "n2", g="prio"), pod("y", 5, "n2")),
            ],
            members(1, prio=3),
            priority=3,
        ),
        ["p1", "p2"],
    ),
    # Single, minMember 2, three members: one may go alone (two stay).
    "single-member-alone-keeps-min": (
        Case(
            [
                node("n1", pod("s1", 1, "n1", g="single"), pod("z", 10, "n1")),
                node("n2", pod("s2", 1, "n2", g="single"), pod("z2", 10, "n2")),
                node("n3", pod("s3", 1, "n3", g="single"), pod("z3", 10, "n3")),
            ],
            members(1),
        ),
        ["s1"],
    ),
    # Single, minMember 3, three members: one going alone would leave 2 < 3, so the
    # gang goes whole.
    "single-below-min-goes-whole": (
        Case(
            [
                node("n1", pod("t1", 1, "n1", g="single3"), pod("z", 10, "n1")),
                node("n2", pod("t2", 1, "n2", g="single3"), pod("z2", 10, "n2")),
                node("n3", pod("t3", 1, "n3", g="single3"), pod("z3", 10, "n3")),
            ],
            members(1),
        ),
        ["t1", "t2", "t3"],
    ),
    # Members already placed are not victims (same priority), and only `need` members
    # are placed: one more member needs one cpu.
    "need-counts-only-missing-members": (
        Case(
            [
                node("n1", pod("m-bound", 10, "n1"), pod("x", 1, "n1")),
                node("n2", pod("q", 1, "n2", start=T0), pod("r", 1, "n2", start=T1)),
            ],
            members(3),
            need=1,
        ),
        ["x"],
    ),
}


@pytest.mark.parametrize(("case", "victims"), CASES.values(), ids=CASES.keys())
def test_victims(case: Case, victims: list[str]) -> None:
    p = plan(case)
    assert victim_names(p) == victims
    assert p.message() == f"found a placement for podgroup, preempting {len(victims)} victims"
    # Every member placed is nominated to a node.
    need = case.need or len(case.gang)
    assert len(p.nominations) == need


def test_four_members_nominated_two_per_node() -> None:
    p = plan(CASES["two-all-gangs-evicted-whole"][0])
    assert sorted(p.nominations.values()) == ["n1", "n1", "n2", "n2"]
    assert p.num_group_disruptions == 2


def test_single_gang_escalation_is_reported() -> None:
    assert plan(CASES["single-below-min-goes-whole"][0]).whole == {"default/single3"}
    assert plan(CASES["single-member-alone-keeps-min"][0]).whole == frozenset()


# -- nothing to evict -------------------------------------------------------------------------------
def test_gang_that_cannot_fit_even_after_evicting_everything_evicts_nothing() -> None:
    out = run(
        Case(
            [node("n1", pod("a1", 1, "n1", g="all")), node("n2", pod("x", 1, "n2"))],
            members(3, cpu="2"),
        )
    )
    assert isinstance(out, Status)
    assert out.code == Code.UNSCHEDULABLE
    assert out.message() == "2/3 members fit"


def test_no_lower_priority_pod_is_unresolvable_with_kubes_message() -> None:
    out = run(Case([node("n1", pod("x", 10, "n1"), pod("y", 11, "n1"))], members(1)))
    assert isinstance(out, Status)
    assert out.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert out.message() == "No preemption victims found for incoming preemptor"


def test_gang_with_a_member_above_the_preemptor_is_never_a_victim() -> None:
    # Gang "all" has one pod at priority 20: the unit's priority is its highest, so
    # none of it may go; x is the only way.
    p = plan(
        Case(
            [
                node("n1", pod("a1", 1, "n1", g="all"), pod("x", 1, "n1")),
                node("n2", pod("a2", 20, "n2", g="all"), pod("w", 20, "n2")),
            ],
            members(1),
        )
    )
    assert victim_names(p) == ["x"]


def test_the_preempting_gangs_own_members_are_never_victims() -> None:
    # A member of the gang already bound at a lower priority (1) than its pending
    # siblings (10) stays; x goes, though x (5) is the more important of the two.
    snap = Snapshot([node("n1", pod("own-0", 1, "n1", g="all"), pod("x", 5, "n1"))])
    fwk, _ = framework(snap)

    def victims(own: str) -> list[str]:
        out = gp.find_gang_victims(
            fwk,
            snap,
            priority=10,
            place=first_fit(fwk, members(1), 1),
            gang_of=gang_of,
            own=own,
        )
        assert isinstance(out, gp.GangPlan)
        return victim_names(out)

    assert victims("default/all") == ["x"]
    assert victims("") == ["own-0"]  # another gang's pod would be the one to go


# -- PDBs -------------------------------------------------------------------------------------------
def test_pdb_protected_pod_is_kept_when_another_will_do() -> None:
    # One of p and q must go. q started earlier (more important), so without a PDB p
    # goes; with p's PDB allowing no disruption, p is reprieved first and q goes.
    def nodes() -> list[NodeInfo]:
        return [node("n1", pod("p", 1, "n1", start=T1, app="db"), pod("q", 1, "n1", start=T0))]

    assert victim_names(plan(Case(nodes(), members(1)))) == ["p"]
    p = plan(Case(nodes(), members(1), pdbs=[PdbInfo.from_dict(pdb(0, app="db"))]))
    assert victim_names(p) == ["q"]
    assert p.num_pdb_violations == 0


def test_pdb_violation_counted_when_unavoidable() -> None:
    n1 = node("n1", pod("p", 1, "n1", app="db"), pod("z1", 10, "n1"))
    p = plan(Case([n1], members(1), pdbs=[PdbInfo.from_dict(pdb(0, app="db"))]))
    assert victim_names(p) == ["p"]
    assert p.num_pdb_violations == 1


def test_a_gang_violates_when_any_of_its_pods_does() -> None:
    u = gp.Unit(
        [pod("a1", 1, "n1", g="all"), pod("a2", 1, "n2", g="all", app="db")], 1, "default/all"
    )
    violating, others = gp.filter_units_with_pdb_violation(
        [u, gp.Unit([pod("x", 1, "n1")], 1)], [PdbInfo.from_dict(pdb(0, app="db"))]
    )
    assert [(v.group, n) for v, n in violating] == [("default/all", 1)]
    assert [o.pods[0].name for o in others] == ["x"]


# -- ordering, eligibility, ongoing preemption ------------------------------------------------------
def test_importance_order() -> None:
    units = [
        gp.Unit([pod("plain-late", 1, start=T1)], 1),
        gp.Unit([pod("plain-early", 1, start=T0)], 1),
        gp.Unit([pod("member", 1)], 1, "g1"),
        gp.Unit([pod("g-a", 1), pod("g-b", 1)], 1, "g2", whole=True),
        gp.Unit([pod("high", 2)], 2),
    ]
    ordered = sorted(units, key=gp.unit_importance_key)
    assert [u.pods[0].name for u in ordered] == [
        "high",  # priority first
        "g-a",  # a gang's pods before a pod alone, the bigger unit first
        "member",
        "plain-early",  # then the earlier start
        "plain-late",
    ]


@pytest.mark.parametrize(
    ("policy", "pod_policy", "ok"),
    [
        (None, "PreemptLowerPriority", True),
        (None, "Never", False),
        ("Never", "PreemptLowerPriority", False),
        ("PreemptLowerPriority", "Never", True),  # the gang's own policy decides
    ],
    ids=["default", "a-member-never", "gang-never", "gang-overrides-pods"],
)
def test_eligibility(policy: str | None, pod_policy: str, ok: bool) -> None:
    m = Pod(make_pod("m").preemption_policy(pod_policy).obj())
    assert gp.preemptor_eligible(policy, [m]) == (
        (True, "") if ok else (False, "not eligible due to preemptionPolicy=Never.")
    )


def test_ongoing_preemption_on_a_nominated_node() -> None:
    victim = pod("v", 1, "n1")
    raw = victim.raw
    raw["metadata"]["deletionTimestamp"] = T1
    raw["status"]["conditions"] = [
        {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
    ]
    snap = Snapshot([node("n1", Pod(raw)), node("n2")])
    nominated = Pod(make_pod("m0").priority(10).nominated("n1").obj())
    assert gp.ongoing_preemption([nominated], snap, 10, gang_of)
    assert not gp.ongoing_preemption([nominated], snap, 1, gang_of)  # not lower
    other = Pod(make_pod("m1").priority(10).nominated("n2").obj())
    assert not gp.ongoing_preemption([other], snap, 10, gang_of)
