"""Placing one pod: how many nodes the Filter scan looks for, where it starts, the
FitError users read, and the vector fast path agreeing with the node-by-node path."""

from __future__ import annotations

import copy
import dataclasses
import random
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import Diagnosis
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.runtime import Framework, FrameworkServices, PluginChain
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Status
from kubesched.framework.types import Pod
from kubesched.profiles import compile_profile, default_profile_spec
from kubesched.scheduler.algorithm import Algorithm, FitError, num_feasible_nodes_to_find
from tests.builders import make_node, make_pod
from tests.unit.plugins.fakes import FakeStore
from tests.unit.plugins.strategies import cases, pods

# (percentage, nodes, expected): kube-scheduler's numFeasibleNodesToFind.
FEASIBLE_CASES = [
    (None, 50, 50),
    (None, 99, 99),
    (None, 100, 100),
    (None, 1000, 420),  # 50 - 1000/125 = 42 %
    (None, 5000, 500),  # 50 - 40 = 10 %
    (None, 6000, 300),  # 50 - 48 = 2 %, raised to the 5 % floor
    (None, 20000, 1000),
    (0, 1000, 420),  # 0 means adaptive, as unset
    (10, 1000, 100),
    (10, 500, 100),  # never under 100 nodes
    (50, 1000, 500),
    (100, 1000, 1000),
    (1, 50, 50),  # under 100 nodes: all of them, whatever the percentage
]


@pytest.mark.parametrize(
    ("percentage", "nodes", "expected"),
    FEASIBLE_CASES,
    ids=[f"{p}%-of-{n}" for p, n, _ in FEASIBLE_CASES],
)
def test_num_feasible_nodes_to_find(percentage: int | None, nodes: int, expected: int) -> None:
    assert num_feasible_nodes_to_find(percentage, nodes) == expected


# -- FitError ------------------------------------------------------------------------------------
def fit_error(num_nodes: int, diagnosis: Diagnosis) -> str:
    return str(FitError(make_pod("p").pod(), num_nodes, diagnosis))


TAINT = "node(s) had untolerated taint(s)"


def test_fit_error_counts_reasons_sorted_as_strings() -> None:
    d = Diagnosis(
        node_to_status={
            "n1": Status.unschedulable("Insufficient cpu"),
            "n2": Status.unresolvable(TAINT),
            "n3": Status.unresolvable(TAINT),
        }
    )
    assert fit_error(3, d) == f"0/3 nodes are available: 1 Insufficient cpu, 2 {TAINT}."


def test_fit_error_sorts_counts_as_text_like_kube() -> None:
    statuses = {f"a{i}": Status.unschedulable("Insufficient memory") for i in range(10)}
    statuses |= {
        f"b{i}": Status.unschedulable("Insufficient cpu", "Too many pods") for i in range(2)
    }
    # "10 ..." sorts before "2 ...": kube sorts the "count reason" strings.
    assert fit_error(12, Diagnosis(node_to_status=statuses)) == (
        "0/12 nodes are available: 10 Insufficient memory, 2 Insufficient cpu, 2 Too many pods."
    )


def test_fit_error_from_prefilter_shows_only_its_message() -> None:
    msg = "node(s) didn't satisfy plugin NodeAffinity"
    d = Diagnosis(
        node_to_status={n: Status.unresolvable(msg) for n in ("a", "b")}, pre_filter_msg=msg
    )
    assert fit_error(2, d) == f"0/2 nodes are available: {msg}."


# -- the Filter scan -------------------------------------------------------------------------------
class RejectSome:
    """Rejects the named nodes; with ``vector`` it also answers for all nodes at once."""

    name = "RejectSome"

    def __init__(self, reject: set[str], vector: bool) -> None:
        self.reject = reject
        self.filtered: list[str] = []
        if vector:
            self.filter_mask = self._mask

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        self.filtered.append(node_info.name)
        return Status.unschedulable("rejected") if node_info.name in self.reject else None

    def _mask(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> npt.NDArray[np.bool_]:
        return np.array([ni.name not in self.reject for ni in snapshot.node_infos])


def framework(*filters: Any) -> Framework:
    fwk = Framework("test", FrameworkServices())
    fwk.set_chain(PluginChain(filter=list(filters)), {})
    return fwk


def big_snapshot(n: int) -> Snapshot:
    return Snapshot([make_node(f"n{i:03}").info() for i in range(n)])


def scan(alg: Algorithm, fwk: Framework, snap: Snapshot) -> list[str]:
    rows, _ = alg._find_nodes_that_fit(fwk, CycleState(), make_pod("p").pod(), snap)
    return [snap.node_infos[int(r)].name for r in rows]


@pytest.mark.parametrize("vector", [False, True], ids=["scalar", "vector"])
def test_scan_starts_where_the_last_one_stopped(vector: bool) -> None:
    snap = big_snapshot(200)  # 49 % of 200 is under 100: the scan wants 100 nodes
    rejected = {f"n{i:03}" for i in range(0, 200, 4)}  # every 4th node
    fwk, alg = framework(RejectSome(rejected, vector)), Algorithm()

    first = scan(alg, fwk, snap)
    # 100 feasible nodes among the first 134 (n000, n004, ..., n132 rejected).
    assert first == [f"n{i:03}" for i in range(134) if i % 4]
    assert alg.next_start_node_index == 134

    second = scan(alg, fwk, snap)
    # Starts at n134, wraps around, stops at the 100th feasible node (133 examined).
    assert second == [f"n{i % 200:03}" for i in range(134, 134 + 133) if i % 4]
    assert len(second) == 100
    assert alg.next_start_node_index == (134 + 133) % 200


def test_scan_without_enough_feasible_nodes_examines_all_and_says_why() -> None:
    snap = big_snapshot(120)
    rejected = {f"n{i:03}" for i in range(120) if i != 7}
    fwk, alg = framework(RejectSome(rejected, vector=True)), Algorithm()
    alg.next_start_node_index = 50
    assert scan(alg, fwk, snap) == ["n007"]
    assert alg.next_start_node_index == 50  # 120 processed: back where it started


def test_every_node_rejected_is_a_fit_error_listing_each_reason() -> None:
    snap = Snapshot([make_node(n).info() for n in ("a", "b", "c")])
    fwk = framework(RejectSome({"a", "b", "c"}, vector=True))
    with pytest.raises(FitError) as exc:
        Algorithm().schedule_pod(fwk, CycleState(), make_pod("p").pod(), snap)
    assert str(exc.value) == "0/3 nodes are available: 3 rejected."
    assert exc.value.diagnosis.unschedulable_plugins == {"RejectSome"}


class Rejects:
    """Rejects the named nodes with its own reason; ``mode``: node by node only
    ("scalar"), with a mask ("mask"), with a mask and the statuses of many nodes at once
    ("statuses"; it says nothing about the nodes in ``lies``, which its mask rejects)."""

    def __init__(
        self, name: str, reject: set[str], mode: str, lies: frozenset[str] = frozenset()
    ) -> None:
        self.name, self.reject, self.lies = name, reject, lies
        self.status = Status.unschedulable(f"{name} says no")
        self.one_by_one: list[str] = []
        if mode in ("mask", "statuses"):
            self.filter_mask = self._mask
        if mode == "statuses":
            self.filter_statuses = self._statuses

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        self.one_by_one.append(node_info.name)
        return self.status if node_info.name in self.reject else None

    def _mask(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> npt.NDArray[np.bool_]:
        out = self.reject | self.lies
        return np.array([ni.name not in out for ni in snapshot.node_infos])

    def _statuses(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: npt.NDArray[np.intp]
    ) -> list[Status | None]:
        names = [snapshot.node_infos[int(r)].name for r in rows]
        return [self.status if n in self.reject else None for n in names]


@pytest.mark.parametrize("mode", ["scalar", "mask", "statuses"])
def test_each_node_is_diagnosed_by_the_first_plugin_that_rejects_it(mode: str) -> None:
    snap = Snapshot([make_node(n).info() for n in "abcde"])
    first = Rejects("First", {"a", "b"}, mode, lies=frozenset("e"))
    second = Rejects("Second", {"b", "c", "d", "e"}, mode)
    third = Rejects("Third", {"a", "b", "c", "d", "e"}, "scalar")
    with pytest.raises(FitError) as exc:
        Algorithm().schedule_pod(
            framework(first, second, third), CycleState(), make_pod("p").pod(), snap
        )
    d = exc.value.diagnosis
    assert {n: s.message() for n, s in d.node_to_status.items()} == {
        "a": "First says no",
        "b": "First says no",
        "c": "Second says no",
        "d": "Second says no",
        "e": "Second says no",  # First's mask and statuses disagree: the next plugin says
    }
    assert list(d.node_to_status) == list("abcde")  # in scan order
    assert {s.plugin for s in d.node_to_status.values()} == {"First", "Second"}
    assert d.unschedulable_plugins == {"First", "Second"}
    assert third.one_by_one == []  # every node was decided before it
    assert str(exc.value) == "0/5 nodes are available: 2 First says no, 3 Second says no."
    if mode != "scalar":  # (a scalar plugin also ran in the scan)
        # Node by node only where the plugin cannot answer for many nodes at once.
        assert second.one_by_one == ([] if mode == "statuses" else ["c", "d", "e"])


def test_without_filter_plugins_the_scan_takes_only_the_nodes_it_needs() -> None:
    snap = big_snapshot(1000)
    alg = Algorithm()
    alg.next_start_node_index = 900
    found = scan(alg, framework(), snap)
    # kube: 420 nodes from the rotating offset, wrapping around.
    assert found == [f"n{i % 1000:03}" for i in range(900, 1320)]
    assert alg.next_start_node_index == 320


def test_no_nodes_is_a_fit_error() -> None:
    with pytest.raises(FitError, match=r"^0/0 nodes are available: no nodes available"):
        Algorithm().schedule_pod(framework(), CycleState(), make_pod("p").pod(), Snapshot())


# -- vector path == scalar path ----------------------------------------------------------------------
class Scalar:
    """A plugin with its vector methods hidden: the framework must call filter/score."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.name = inner.name

    def __getattr__(self, attr: str) -> Any:
        if attr in ("filter_mask", "filter_statuses", "score_vector"):
            raise AttributeError(attr)
        return getattr(self._inner, attr)


def scalar_twin(fwk: Framework) -> Framework:
    chain = fwk.chain
    twin = Framework("scalar", fwk.services)
    twin.set_chain(
        dataclasses.replace(
            chain,
            filter=[Scalar(p) for p in chain.filter],
            score=[(Scalar(p), w) for p, w in chain.score],
        ),
        fwk.events,
    )
    return twin


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_vector_and_scalar_paths_agree(case: tuple[Snapshot, Pod]) -> None:
    snap, pod = case
    vector = compile_profile(
        # (a store, as the scheduler's: DRA's plugins read DeviceClasses for extended resources)
        default_profile_spec(),
        FrameworkServices(snapshot=lambda: snap, store=FakeStore()),
    ).framework
    scalar = scalar_twin(vector)
    start = random.Random(len(snap)).randrange(len(snap))
    results = []
    for fwk in (vector, scalar):
        alg = Algorithm()
        alg.next_start_node_index = start
        state = CycleState()
        rows, diagnosis = alg._find_nodes_that_fit(fwk, state, pod, snap)
        statuses = {n: (s.code, s.plugin, s.reasons) for n, s in diagnosis.node_to_status.items()}
        scores: list[int] = []
        if len(rows) > 1:
            assert fwk.run_pre_score(state, pod, [snap.node_infos[int(r)] for r in rows]) is None
            total, _, st = fwk.run_score(state, pod, snap, rows)
            assert st is None
            scores = total.tolist()
        results.append((rows.tolist(), alg.next_start_node_index, statuses, scores))
    assert results[0] == results[1]


def _nominated_twins(pod: Pod, nodes: list[str], data: st.DataObject) -> dict[str, list[Pod]]:
    """Pods like ``pod`` nominated to some of ``nodes`` (an earlier preemption's), at its
    priority or around it, so that some count against it and some do not."""
    out: dict[str, list[Pod]] = {}
    for i, node in enumerate(data.draw(st.lists(st.sampled_from(nodes), max_size=len(nodes)))):
        raw = copy.deepcopy(dict(pod.raw))
        raw["metadata"] = {**raw["metadata"], "name": f"nominated-{i}", "uid": f"nom-{i}"}
        raw["spec"] = {
            **raw["spec"],
            "priority": pod.priority + data.draw(st.sampled_from([-1, 0, 1])),
        }
        raw["status"] = {"nominatedNodeName": node}
        out.setdefault(node, []).append(Pod(raw))
    return out


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases(), data=st.data())
def test_a_pod_that_fits_nowhere_is_diagnosed_as_each_node_answers_with_its_nominated_pods(
    case: tuple[Snapshot, Pod], data: st.DataObject
) -> None:
    """With pods nominated to some nodes (waiting for their victims to go), each node's
    reason in the FitError is what the Filter says on that node alone, with the nominated
    pods of equal or higher priority added (kube's RunFilterPluginsWithNominatedPods)."""
    snap, pod = case
    nominated = _nominated_twins(pod, [ni.name for ni in snap.node_infos], data)
    fwk = compile_profile(
        default_profile_spec(),
        FrameworkServices(
            snapshot=lambda: snap,
            store=FakeStore(),
            nominated_pods_for_node=lambda name: nominated.get(name, []),
            nominated_nodes=lambda: list(nominated),
        ),
    ).framework
    state = CycleState()
    rows, diagnosis = Algorithm()._find_nodes_that_fit(fwk, state, pod, snap)
    if len(rows) or diagnosis.pre_filter_msg:
        return  # a node fits (the scan stopped there), or PreFilter said why for all
    result, _, _ = fwk.run_pre_filter(CycleState(), pod, snap.node_infos)
    allowed = None if result is None else result.node_names
    examined = [
        ni for ni in snap.node_infos if allowed is None or ni.name in allowed
    ]  # the others were left out by PreFilter, and say so
    expected = {
        ni.name: fwk.run_filter_plugins_with_nominated_pods(state, pod, ni) for ni in examined
    }
    assert {
        n: (s.code, s.plugin, s.reasons)
        for n, s in diagnosis.node_to_status.items()
        if n in expected
    } == {n: (s.code, s.plugin, s.reasons) for n, s in expected.items() if s is not None}


def _said(s: Status | None) -> tuple[Any, ...] | None:
    return None if s is None else (s.code, s.plugin, s.reasons)


def _two_fresh_passes(fwk: Framework, state: CycleState, pod: Pod, ni: NodeInfo) -> Status | None:
    """kube's RunFilterPluginsWithNominatedPods spelled out on fresh copies."""
    added, state_n, info_n, error = fwk.add_nominated_pods(state, pod, ni)
    if error is not None:
        return error
    first = fwk.run_filter(state_n, pod, info_n)
    if first is not None or not added:
        return first
    return fwk.run_filter(state, pod, ni)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases(), data=st.data())
def test_the_first_pass_on_a_kept_node_view_answers_as_on_a_fresh_copy(
    case: tuple[Snapshot, Pod], data: st.DataObject
) -> None:
    """Filter with nominated pods keeps each node's copy (with them added) between
    cycles, and on a node every vector mask passed the scan skips what the masks already
    said: the answers stay those of two passes on fresh copies while the node's pods and
    the nominations change under it."""
    snap, pod = case
    names = [ni.name for ni in snap.node_infos]
    nominated = _nominated_twins(pod, names, data)
    fwk = compile_profile(
        default_profile_spec(),
        FrameworkServices(
            snapshot=lambda: snap,
            store=FakeStore(),
            nominated_pods_for_node=lambda name: list(nominated.get(name, [])),
            nominated_nodes=lambda: list(nominated),
        ),
    ).framework
    state = CycleState()
    if fwk.run_pre_filter(state, pod, snap.node_infos)[1] is not None:
        return
    for step in range(4):
        combined, scalar, _ = fwk.filter_masks(state, pod, snap)
        for ni in snap.node_infos:
            expected = _said(_two_fresh_passes(fwk, state, pod, ni))
            assert _said(fwk.run_filter_plugins_with_nominated_pods(state, pod, ni)) == expected
            assert _said(fwk.run_filter_plugins_with_nominated_pods(state, pod, ni)) == expected
            if combined is None or combined[ni.index]:  # what the scan asks of such a node
                got = fwk.run_nominated_passes_after_mask(state, pod, ni, scalar)
                assert _said(got) == expected
        ni = snap.node_infos[data.draw(st.integers(0, len(names) - 1))]
        if step == 0 and ni.pods:  # a pod of the node goes
            ni.remove_pod(ni.pods[0])
        elif step == 1:  # one more pod lands there
            ni.add_pod(make_pod(f"landed-{step}").req(cpu="1").node(ni.name).pod())
        else:  # the nominations change: other pods, priorities and nodes
            nominated = _nominated_others(pod, names, data)
        snap.refresh_row(ni)


def _nominated_others(pod: Pod, nodes: list[str], data: st.DataObject) -> dict[str, list[Pod]]:
    """Pods of any size nominated to some of ``nodes``, around ``pod``'s priority."""
    out: dict[str, list[Pod]] = {}
    for node in data.draw(st.lists(st.sampled_from(nodes), max_size=len(nodes))):
        raw = copy.deepcopy(dict(data.draw(pods()).raw))
        raw["spec"] = {
            **raw["spec"],
            "priority": pod.priority + data.draw(st.sampled_from([-1, 0, 1])),
        }
        raw["spec"].pop("nodeName", None)
        raw["status"] = {"nominatedNodeName": node}
        out.setdefault(node, []).append(Pod(raw))
    return out
