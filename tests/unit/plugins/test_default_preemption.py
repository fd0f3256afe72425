"""DefaultPreemption: eligibility, victim selection, PDBs, node ordering, messages.

Expected victims and nodes are worked out by hand from kube-scheduler v1.37's
``SelectVictimsOnNode`` / ``pickOneNodeForPreemption`` rules.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.backend.nominator import Nominator
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.runtime import Framework, FrameworkServices
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Code, Status
from kubesched.framework.types import Pod
from kubesched.plugins import default_preemption as dp
from kubesched.profiles import compile_profile, default_profile_spec
from kubesched.scheduler.algorithm import Algorithm, FitError
from tests.builders import make_node, make_pod

T0 = "2024-01-01T00:00:00Z"
T1 = "2024-01-01T01:00:00Z"
T2 = "2024-01-01T02:00:00Z"


class Store:
    def __init__(self, pdbs: Sequence[dict[str, Any]] = ()) -> None:
        self.pdbs = list(pdbs)

    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        return None

    def list(self, kind: str, namespace: str | None = None) -> Iterable[Mapping[str, Any]]:
        return self.pdbs if kind == "PodDisruptionBudget" else ()


def pdb(
    allowed: int, ns: str = "default", disrupted: Sequence[str] = (), **labels: str
) -> dict[str, Any]:
    return {
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "pdb", "namespace": ns},
        "spec": {"selector": {"matchLabels": labels}},
        "status": {"disruptionsAllowed": allowed, "disruptedPods": {n: T0 for n in disrupted}},
    }


def pod(
    name: str, prio: int, cpu: str = "1", node: str = "", start: str = "", **labels: str
) -> Pod:
    b = make_pod(name).req(cpu=cpu).priority(prio).labels(**labels)
    if node:
        b = b.node(node)
    obj = b.obj()
    if start:
        obj["status"]["startTime"] = start
    return Pod(obj)


def node(name: str, *pods: Pod, cpu: str = "4") -> NodeInfo:
    return make_node(name).alloc(cpu=cpu, memory="32Gi").info(*pods)


def setup(
    nodes: Sequence[NodeInfo],
    pdbs: Sequence[dict[str, Any]] = (),
    nominator: Nominator | None = None,
) -> tuple[Framework, dp.DefaultPreemption, Snapshot]:
    snap = Snapshot(nodes)
    nom = nominator or Nominator()
    services = FrameworkServices(
        store=Store(pdbs),
        snapshot=lambda: snap,
        nominated_pods_for_node=nom.nominated_pods_for_node,
        nominated_nodes=nom.nodes,
        rng=random.Random(0),
    )
    fwk = compile_profile(default_profile_spec(), services).framework
    plugin = next(p for p in fwk.chain.post_filter if p.name == dp.NAME)
    assert isinstance(plugin, dp.DefaultPreemption)
    return fwk, plugin, snap


def filter_statuses(fwk: Framework, state: CycleState, p: Pod, snap: Snapshot) -> dict[str, Status]:
    _, s, _ = fwk.run_pre_filter(state, p, snap.node_infos)
    assert s is None
    out: dict[str, Status] = {}
    for ni in snap.node_infos:
        st = fwk.run_filter(state, p, ni)
        if st is not None:
            out[ni.name] = st
    return out


def names(pods: Iterable[Pod]) -> list[str]:
    return [p.name for p in pods]


# -- args ---------------------------------------------------------------------------------------------
def test_args_defaults_are_kube_schedulers() -> None:
    a = dp.Args()
    assert (a.min_candidate_nodes_percentage, a.min_candidate_nodes_absolute) == (10, 100)
    assert (
        dp.Args.model_validate(
            {"minCandidateNodesPercentage": 5, "minCandidateNodesAbsolute": 1}
        ).min_candidate_nodes_absolute
        == 1
    )


@pytest.mark.parametrize(
    "raw",
    [
        {"minCandidateNodesPercentage": 101},
        {"minCandidateNodesPercentage": -1},
        {"minCandidateNodesAbsolute": -1},
        {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0},
        {"bogus": 1},
    ],
    ids=["pct>100", "pct<0", "abs<0", "both-zero", "unknown-field"],
)
def test_args_validation(raw: dict[str, Any]) -> None:
    with pytest.raises(pydantic.ValidationError):
        dp.Args.model_validate(raw)


@pytest.mark.parametrize(
    ("pct", "absolute", "nodes", "expected"),
    [
        (10, 100, 50, 50),  # never more than there are
        (10, 100, 5000, 500),  # 10% of 5000 beats 100
        (10, 100, 500, 100),  # 10% of 500 = 50 < 100
        (0, 1, 500, 1),
        (100, 0, 7, 7),
    ],
    ids=["capped", "percentage", "absolute", "abs-only", "all"],
)
def test_num_candidates(pct: int, absolute: int, nodes: int, expected: int) -> None:
    _, plugin, _ = setup([node("n1")])
    plugin.args = dp.Args(min_candidate_nodes_percentage=pct, min_candidate_nodes_absolute=absolute)
    assert plugin.num_candidates(nodes) == expected


# -- PDBs -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("pods", "pdbs", "violating"),
    [
        ([pod("a", 1, app="x")], [], []),
        ([pod("a", 1, app="x"), pod("b", 1, app="x")], [pdb(1, app="x")], ["b"]),
        ([pod("a", 1, app="x")], [pdb(0, app="x")], ["a"]),
        ([pod("a", 1, app="x")], [pdb(0, ns="other", app="x")], []),
        ([pod("a", 1, app="x")], [pdb(0, app="y")], []),
        ([pod("a", 1)], [pdb(0)], []),
        ([pod("a", 1, app="x")], [pdb(0, disrupted=["a"], app="x")], []),
        ([pod("a", 1, app="x"), pod("b", 1, app="x")], [pdb(0, disrupted=["a"], app="x")], ["b"]),
    ],
    ids=[
        "no-pdb",
        "budget-of-one-spent-by-first",
        "zero-budget",
        "other-namespace",
        "selector-mismatch",
        "empty-selector-matches-nothing",
        "already-disrupted-not-counted",
        "disrupted-does-not-consume-budget",
    ],
)
def test_filter_pods_with_pdb_violation(
    pods: list[Pod], pdbs: list[dict[str, Any]], violating: list[str]
) -> None:
    v, nv = dp.filter_pods_with_pdb_violation(pods, [dp.PdbInfo.from_dict(d) for d in pdbs])
    assert names(v) == violating
    assert names(nv) == [p.name for p in pods if p.name not in violating]


# -- node ordering ------------------------------------------------------------------------------------------
def cand(node_name: str, violations: int, *victims: Pod) -> dp.Candidate:
    return dp.Candidate(node_name, sorted(victims, key=dp.more_important_key), violations)


@pytest.mark.parametrize(
    ("candidates", "expected"),
    [
        ([cand("a", 1, pod("x", 1)), cand("b", 0, pod("y", 1), pod("z", 1))], "b"),
        ([cand("a", 0, pod("x", 5)), cand("b", 0, pod("y", 3), pod("z", 3))], "b"),
        ([cand("a", 0, pod("x", 5), pod("w", 4)), cand("b", 0, pod("y", 5), pod("z", 1))], "b"),
        # -1 and -1 sum to less than 0 without kube's 2^31 offset; with it, fewer pods win.
        ([cand("a", 0, pod("x", -1), pod("w", -1)), cand("b", 0, pod("y", -1))], "b"),
        (
            [
                cand("a", 0, pod("x", 2), pod("w", 2)),
                cand("b", 0, pod("y", 2), pod("z", 1), pod("v", 1)),
            ],
            "a",
        ),
        (
            [
                cand("a", 0, pod("x", 3, start=T0), pod("w", 1, start=T2)),
                cand("b", 0, pod("y", 3, start=T1), pod("z", 1, start=T0)),
            ],
            "b",
        ),
        ([cand("a", 0, pod("x", 3, start=T1)), cand("b", 0, pod("y", 3))], "b"),
        ([cand("a", 0, pod("x", 1, start=T0)), cand("b", 0, pod("y", 1, start=T0))], "a"),
    ],
    ids=[
        "fewest-pdb-violations-beats-fewer-victims",
        "lowest-highest-priority",
        "smallest-priority-sum",
        "sum-offset-by-maxint32",
        "fewest-victims",
        "latest-start-of-highest-priority-victims",
        "not-started-is-latest",
        "full-tie-first",
    ],
)
def test_pick_one_node_for_preemption(candidates: list[dp.Candidate], expected: str) -> None:
    best = dp.pick_one_node_for_preemption(candidates)
    assert best is not None and best.node == expected


def test_pick_one_node_of_none() -> None:
    assert dp.pick_one_node_for_preemption([]) is None


# -- victims on a node ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("running", "preemptor_cpu", "pdbs", "victims", "violations"),
    [
        # 3 running (1+1+2 cpu) on 4 cpu; need 2: reprieve a, then b; c must go.
        ([pod("a", 3, "1"), pod("b", 2, "1"), pod("c", 1, "2")], "2", [], ["c"], 0),
        # Same priority: the later-started pod is less important and goes.
        ([pod("a", 1, "2", start=T0), pod("b", 1, "2", start=T1)], "2", [], ["b"], 0),
        # Higher-or-equal priority pods are never victims.
        ([pod("a", 10, "2"), pod("b", 1, "2")], "2", [], ["b"], 0),
        # PDB-violating pods are reprieved first even though less important.
        (
            [pod("a", 5, "2", app="web"), pod("b", 1, "2", app="db")],
            "2",
            [pdb(0, app="db")],
            ["a"],
            0,
        ),
        # Both must go: the violation is counted; victims sorted by importance.
        (
            [pod("a", 5, "2", app="web"), pod("b", 1, "2", app="db")],
            "4",
            [pdb(0, app="db")],
            ["a", "b"],
            1,
        ),
    ],
    ids=[
        "reprieve-as-many-as-possible",
        "later-start-goes-first",
        "only-lower-priority",
        "pdb-violating-reprieved-first",
        "pdb-violation-counted",
    ],
)
def test_select_victims_on_node(
    running: list[Pod],
    preemptor_cpu: str,
    pdbs: list[dict[str, Any]],
    victims: list[str],
    violations: int,
) -> None:
    ni = node("n1", *[p.assigned_to("n1") for p in running])
    fwk, plugin, snap = setup([ni], pdbs)
    p = pod("high", 10, preemptor_cpu)
    state = CycleState()
    filter_statuses(fwk, state, p, snap)
    got, n_viol, st = plugin.select_victims_on_node(state.clone(), p, ni.clone(), plugin.pdbs())
    assert st is None
    assert (names(got), n_viol) == (victims, violations)
    assert len(ni.pods) == len(running)  # the snapshot's node is untouched


def test_select_victims_no_lower_priority_pods() -> None:
    ni = node("n1", pod("a", 10, "4", node="n1"))
    fwk, plugin, snap = setup([ni])
    p = pod("high", 10, "2")
    state = CycleState()
    filter_statuses(fwk, state, p, snap)
    _, _, st = plugin.select_victims_on_node(state, p, ni.clone(), [])
    assert st == Status.unresolvable("No preemption victims found for incoming pod")


def test_select_victims_does_not_fit_even_when_all_removed() -> None:
    # 1 cpu of lower and 2 cpu of higher priority on 4 cpu: 3 cpu never fit.
    ni = node("n1", pod("a", 1, "1", node="n1"), pod("b", 20, "2", node="n1"))
    fwk, plugin, snap = setup([ni])
    p = pod("high", 10, "3")
    state = CycleState()
    filter_statuses(fwk, state, p, snap)
    _, _, st = plugin.select_victims_on_node(state, p, ni.clone(), [])
    assert st is not None and st.code == Code.UNSCHEDULABLE
    assert st.reasons == ("Insufficient cpu",)


# -- eligibility and messages ----------------------------------------------------------------------------------
def run_post_filter(
    nodes: Sequence[NodeInfo], p: Pod, pdbs: Sequence[dict[str, Any]] = ()
) -> tuple[Any, Status | None]:
    fwk, plugin, snap = setup(nodes, pdbs)
    state = CycleState()
    statuses = filter_statuses(fwk, state, p, snap)
    plugin.prepare_candidate_async = lambda c, pod: None  # type: ignore[method-assign]
    return plugin.post_filter(state, p, statuses)


def test_preemption_policy_never() -> None:
    ni = node("n1", pod("a", 1, "4", node="n1"))
    p = Pod(make_pod("p").req(cpu="2").priority(10).preemption_policy("Never").obj())
    res, st = run_post_filter([ni], p)
    assert res is None
    assert st == Status.unschedulable("preemption: not eligible due to preemptionPolicy=Never.")


def test_no_victims_message_is_kubes_fit_error() -> None:
    nodes = [node(f"n{i}", pod(f"a{i}", 10, "4", node=f"n{i}")) for i in range(3)]
    res, st = run_post_filter(nodes, pod("p", 10, "2"))
    assert res is not None and res.nominated_node_name == ""
    assert st == Status.unschedulable(
        "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
    )


def test_unresolvable_nodes_count_as_not_helpful() -> None:
    nodes = [
        node("n1", pod("a", 10, "4", node="n1")),
        make_node("n2").alloc(cpu="4", memory="32Gi").taint("k", "v").info(),
    ]
    _, st = run_post_filter(nodes, pod("p", 10, "2"))
    assert st == Status.unschedulable(
        "preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, "
        "1 Preemption is not helpful for scheduling."
    )


def test_success_nominates_the_chosen_node() -> None:
    nodes = [node("n1", pod("a", 5, "4", node="n1")), node("n2", pod("b", 1, "4", node="n2"))]
    res, st = run_post_filter(nodes, pod("p", 10, "2"))
    assert st == Status(
        Code.SUCCESS,
        "preemption: found a potential placement for pod on node n2, preempting 1 victims",
    )
    assert res is not None and res.nominated_node_name == "n2"


def terminating_victim(name: str, node_name: str, prio: int) -> Pod:
    obj = make_pod(name).req(cpu="4").priority(prio).node(node_name).obj()
    obj["metadata"]["deletionTimestamp"] = T0
    obj["status"]["conditions"] = [
        {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
    ]
    return Pod(obj)


@pytest.mark.parametrize(
    ("victim_prio", "nominated_status", "eligible"),
    [
        (1, Status.unschedulable("Insufficient cpu"), False),
        (10, Status.unschedulable("Insufficient cpu"), True),  # not lower priority
        (1, Status.unresolvable("node(s) didn't match Pod's node affinity/selector"), True),
    ],
    ids=["waits-for-terminating-victim", "equal-priority-ignored", "nominated-node-unresolvable"],
)
def test_terminating_pod_on_nominated_node(
    victim_prio: int, nominated_status: Status, eligible: bool
) -> None:
    ni = node("n1", terminating_victim("v", "n1", victim_prio))
    _, plugin, _ = setup([ni])
    p = Pod(make_pod("p").req(cpu="2").priority(10).nominated("n1").obj())
    ok, msg = plugin.pod_eligible_to_preempt_others(p, nominated_status)
    assert ok is eligible
    assert msg == (
        "" if eligible else "not eligible due to a terminating pod on the nominated node."
    )


def test_pre_enqueue_holds_a_preemptor_while_preparing() -> None:
    _, plugin, _ = setup([node("n1")])
    p = pod("p", 10)
    assert plugin.pre_enqueue(p) is None
    plugin._preempting.add(p.uid)
    assert plugin.pre_enqueue(p) == Status.unresolvable(
        "waiting for the preemption for this pod to be finished"
    )
    (reg,) = plugin.events_to_register()
    assert reg.hint is not None and reg.hint(p, None, None) is False


# -- nominated pods keep their room ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("prio", "fits"),
    [(5, False), (10, False), (20, True)],
    ids=["lower-priority-blocked", "equal-priority-blocked", "higher-priority-may-take-it"],
)
def test_nominated_pod_capacity_is_respected(prio: int, fits: bool) -> None:
    """A pod nominated to n1 (priority 10, 3 cpu of 4) keeps that room from pods of lower
    priority; pods of higher priority may take it (they could preempt it anyway)."""
    nom = Nominator()
    nominated = Pod(make_pod("nominated").req(cpu="3").priority(10).obj())
    nom.add(nominated, "n1")
    fwk, _, snap = setup([node("n1")], nominator=nom)
    newcomer = pod("new", prio, "2")
    algo = Algorithm(random.Random(0))
    if fits:
        assert algo.schedule_pod(fwk, CycleState(), newcomer, snap).node_name == "n1"
    else:
        with pytest.raises(FitError) as e:
            algo.schedule_pod(fwk, CycleState(), newcomer, snap)
        assert str(e.value).startswith("0/1 nodes are available: 1 Insufficient cpu.")


# -- the dry run keeps the nominated pods' view ------------------------------------------------------------------
def reference_victims(
    fwk: Framework, state: CycleState, p: Pod, ni: NodeInfo, pdbs: Sequence[dp.PdbInfo]
) -> tuple[list[str], int, Status | None]:
    """SelectVictimsOnNode the long way: the two-pass Filter on fresh copies of the node
    and the state with the nominated pods added, at every question."""

    def two_passes(state: CycleState, p: Pod, ni: NodeInfo) -> Status | None:
        added, state_n, info_n, error = fwk.add_nominated_pods(state, p, ni)
        if error is not None:
            return error
        first = fwk.run_filter(state_n, p, info_n)
        if first is not None or not added:
            return first
        return fwk.run_filter(state, p, ni)

    def ext(method: str, other: Pod) -> None:
        s = getattr(fwk, f"run_pre_filter_extension_{method}_pod")(state, p, other, ni)
        assert s is None

    potential = [q for q in ni.pods if q.priority < p.priority]
    for q in potential:
        ni.remove_pod(q)
        ext("remove", q)
    st = two_passes(state, p, ni)
    if st is not None:
        return [], 0, st
    potential.sort(key=dp.more_important_key)
    violating, non_violating = dp.filter_pods_with_pdb_violation(potential, pdbs)
    victims: list[Pod] = []
    n_viol = 0
    for group in (violating, non_violating):
        for q in group:
            ni.add_pod(q)
            ext("add", q)
            if two_passes(state, p, ni) is None:
                continue
            ni.remove_pod(q)
            ext("remove", q)
            victims.append(q)
            n_viol += group is violating
    if violating and non_violating:
        victims.sort(key=dp.more_important_key)
    return names(victims), n_viol, None


@given(
    running=st.lists(st.tuples(st.integers(0, 20), st.integers(1, 3)), min_size=1, max_size=6),
    nominated=st.lists(st.tuples(st.integers(0, 20), st.integers(1, 3)), max_size=3),
    preemptor=st.tuples(st.integers(5, 15), st.integers(1, 4)),
    guarded=st.integers(0, 2),
    trait=st.sampled_from(["plain", "tainted", "cordoned", "unlabelled"]),
)
@settings(max_examples=150, deadline=None)
def test_victims_with_nominated_pods_match_the_two_pass_filter(
    running: list[tuple[int, int]],
    nominated: list[tuple[int, int]],
    preemptor: tuple[int, int],
    guarded: int,
    trait: str,
) -> None:
    """Preemption's dry run keeps one view with the nominated pods instead of adding them at
    every Filter call, and asks the plugins that read only the Node object once: the
    victims, PDB violations and failures are those of the long way, on a node those
    plugins pass (plain) or refuse (a taint, cordoned, a label the preemptor requires)."""
    pods = [
        pod(f"r{i}", prio, str(cpu), node="n1", start=T0, **({"app": "db"} if i < 2 else {}))
        for i, (prio, cpu) in enumerate(running)
    ]
    nom = Nominator()
    for i, (prio, cpu) in enumerate(nominated):
        nom.add(pod(f"nom{i}", prio, str(cpu)), "n1")
    b = make_node("n1").alloc(cpu="8", memory="32Gi").label("disk", "hdd")
    if trait == "tainted":
        b.taint("dedicated", "gpu")
    elif trait == "cordoned":
        b.unschedulable()
    ni = b.info(*pods)
    fwk, plugin, snap = setup([ni], [pdb(guarded, app="db")], nominator=nom)
    p = pod("high", preemptor[0], str(preemptor[1]))
    if trait == "unlabelled":
        p = Pod({**p.raw, "spec": {**p.raw["spec"], "nodeSelector": {"disk": "ssd"}}})
    state = CycleState()
    _, s, _ = fwk.run_pre_filter(state, p, snap.node_infos)
    assert s is None
    pdbs = plugin.pdbs()
    got, n_viol, got_st = plugin.select_victims_on_node(state.clone(), p, ni.clone(), pdbs)
    want, want_viol, want_st = reference_victims(fwk, state.clone(), p, ni.clone(), pdbs)
    if not pods or all(q.priority >= p.priority for q in pods):
        return  # no victims at all: the plugin says so before filtering
    assert (names(got), n_viol) == (want, want_viol)
    assert (got_st is None) == (want_st is None)
    if got_st is not None and want_st is not None:
        assert (got_st.code, got_st.plugin, got_st.reasons) == (
            want_st.code,
            want_st.plugin,
            want_st.reasons,
        )
