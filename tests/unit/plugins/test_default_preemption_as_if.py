"""Answers taken from a node's figures, without a copy of the node (``filter_as_if``):
NodeResourcesFit's answer equals its Filter on the changed copy; preemption's walk, which
skips the dry run of a node Filter rejects even with every lower-priority pod gone, finds
the candidates, statuses and errors of the walk that dry-runs every node; Filter's first
pass on a node with nominated pods, answered by its first plugin, says what the long way
says."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.backend.nominator import Nominator
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.nominated import NominatedFilter
from kubesched.framework.status import Status
from kubesched.framework.types import Pod
from kubesched.plugins import node_resources_fit as fit
from kubesched.scheduler.algorithm import Algorithm, FitError
from tests.builders import make_node, make_pod
from tests.unit.plugins.fakes import FakeHandle
from tests.unit.plugins.test_default_preemption import T0, names, setup

PodSpec = tuple[int, int, int]  # priority, milli-cpu, memory GiB


def mkpod(name: str, spec: PodSpec, node: str = "", port: int = 0) -> Pod:
    prio, cpu, mem = spec
    b = make_pod(name).req(cpu=f"{cpu}m", memory=f"{mem}Gi").priority(prio)
    if port:
        b = b.host_port(port)
    if node:
        b = b.node(node)
    obj = b.obj()
    obj["status"]["startTime"] = T0
    return Pod(obj)


def view(s: Status | None) -> tuple[object, ...] | None:
    return None if s is None else (s.code, s.plugin, tuple(s.reasons))


specs = st.tuples(st.integers(0, 20), st.integers(100, 2500), st.integers(1, 12))


# -- NodeResourcesFit ----------------------------------------------------------------------------------
@given(
    running=st.lists(specs, max_size=6),
    removed=st.lists(st.booleans(), min_size=6, max_size=6),
    added=st.lists(specs, max_size=3),
    incoming=specs,
    max_pods=st.integers(1, 8),
)
@settings(max_examples=200, deadline=None)
def test_fit_filter_as_if_is_filter_on_the_changed_copy(
    running: list[PodSpec],
    removed: list[bool],
    added: list[PodSpec],
    incoming: PodSpec,
    max_pods: int,
) -> None:
    pods = [mkpod(f"r{i}", s, node="n1") for i, s in enumerate(running)]
    ni = make_node("n1").alloc(cpu="4", memory="16Gi", pods=max_pods).info(*pods)
    gone = [p for p, r in zip(pods, removed, strict=False) if r]
    new = [mkpod(f"a{i}", s) for i, s in enumerate(added)]
    plugin = fit.new(fit.Args(), FakeHandle())
    p = mkpod("incoming", incoming)
    state = CycleState()
    plugin.pre_filter(state, p, [ni])

    copy = ni.clone()
    for q in gone:
        copy.remove_pod(q)
    for q in new:
        copy.add_pod(q)
    assert view(plugin.filter_as_if(state, p, ni, gone, new)) == view(plugin.filter(state, p, copy))
    # The node itself is left as it was.
    assert names(ni.pods) == names(pods)


# -- preemption's walk ---------------------------------------------------------------------------------
NodeSpec = tuple[list[PodSpec], list[PodSpec], bool]  # running, nominated, cordoned


def cluster(nodes: Sequence[NodeSpec], port: int) -> tuple[list[NodeInfo], Nominator]:
    infos: list[NodeInfo] = []
    nom = Nominator()
    for n, (running, nominated, cordoned) in enumerate(nodes):
        name = f"n{n}"
        pods = [
            mkpod(f"{name}-r{i}", s, node=name, port=port if i == 0 else 0)
            for i, s in enumerate(running)
        ]
        b = make_node(name).alloc(cpu="4", memory="16Gi", pods=6)
        if cordoned:
            b = b.unschedulable()
        infos.append(b.info(*pods))
        for i, s in enumerate(nominated):
            nom.add(mkpod(f"{name}-nom{i}", s, port=port if i == 0 else 0), name)
    return infos, nom


node_specs = st.tuples(st.lists(specs, max_size=5), st.lists(specs, max_size=2), st.booleans())


def clusters(test: Callable[[list[NodeSpec], PodSpec, int], None]) -> Callable[[], None]:
    """Up to seven nodes (running pods, nominated pods, cordoned or not), the incoming pod,
    and a host port the incoming pod and the first pods of each node ask for (or none)."""
    cases = given(
        nodes=st.lists(node_specs, min_size=1, max_size=7),
        incoming=specs,
        port=st.sampled_from([0, 0, 8080]),
    )
    return settings(max_examples=200, deadline=None)(cases(test))


@clusters
def test_preemption_walk_matches_a_dry_run_of_every_node(
    nodes: list[NodeSpec], incoming: PodSpec, port: int
) -> None:
    """Candidates (node, victims, PDB violations) in order; with none, every node's status
    and the errors, as when each node is dry-run."""

    def walk(skip_rejected: bool) -> tuple[object, ...]:
        infos, nom = cluster(nodes, port)
        fwk, plugin, snap = setup(infos, nominator=nom)
        if not skip_rejected:
            fwk.filter_rejects_as_if = lambda *_: False  # type: ignore[method-assign]
        plugin.rng = random.Random(7)
        p = mkpod("incoming", incoming, port=port)
        state = CycleState()
        fwk.run_pre_filter(state, p, snap.node_infos)
        statuses = {}
        for ni in snap.node_infos:
            s = fwk.run_filter_plugins_with_nominated_pods(state, p, ni)
            if s is not None:
                statuses[ni.name] = s
        cands, node_statuses, errors = plugin.find_candidates(state, p, snap.node_infos, statuses)
        got = [(c.node, names(c.victims), c.num_pdb_violations) for c in cands]
        if cands:
            return (got,)
        return got, {n: view(s) for n, s in node_statuses.items()}, errors

    assert walk(skip_rejected=True) == walk(skip_rejected=False)


# -- Filter's first pass on a node with nominated pods -------------------------------------------------
@clusters
def test_first_pass_answered_by_its_first_plugin_matches_the_long_way(
    nodes: list[NodeSpec], incoming: PodSpec, port: int
) -> None:
    """The node chosen, or the FitError and every node's status, as when the first pass
    always runs Filter on the node with the nominated pods added."""

    def schedule() -> tuple[object, ...]:
        infos, nom = cluster(nodes, port)
        fwk, _, snap = setup(infos, nominator=nom)
        p = mkpod("incoming", incoming, port=port)
        try:
            return (
                "bound",
                Algorithm(random.Random(3)).schedule_pod(fwk, CycleState(), p, snap).node_name,
            )
        except FitError as e:
            found = e.diagnosis.node_to_status
            return str(e), {n: view(found[n]) for n in sorted(found)}

    quick = schedule()
    with pytest.MonkeyPatch.context() as m:
        m.setattr(NominatedFilter, "_lead_as_if", lambda *_: None)
        long_way = schedule()
    assert quick == long_way
