"""Plugins are instrumented once, when their profile is compiled, beside the plain ones;
the framework runs the instrumented ones only in sampled cycles
(``CycleState.record_plugin_metrics``), so other cycles, and preemption's dry run in
them, never go through a wrapper."""

from __future__ import annotations

import random
import sys
from collections.abc import Callable, Iterable, Mapping
from types import CodeType, FrameType
from typing import Any

from kubesched.framework import instrumented
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.instrumented import InstrumentedPlugin
from kubesched.framework.interface import PostFilterResult
from kubesched.framework.runtime import Framework, FrameworkServices
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Code, Status
from kubesched.framework.types import Pod
from kubesched.plugins.node_resources_fit import NodeResourcesFit
from kubesched.profiles import compile_profile, default_profile_spec
from tests.builders import make_node, make_pod
from tests.unit.framework.test_runtime import nodes

Record = tuple[str, str, Status | None, float]


def compiled(records: list[Record], snapshot: Snapshot | None = None) -> Framework:
    services = FrameworkServices(
        record_plugin=lambda *r: records.append(r),
        snapshot=(lambda: snapshot) if snapshot is not None else None,
        store=_NoObjects(),
        rng=random.Random(0),
    )
    return compile_profile(default_profile_spec(), services).framework


class _NoObjects:
    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        return None

    def list(self, kind: str, namespace: str | None = None) -> Iterable[Mapping[str, Any]]:
        return ()


def sampled(on: bool) -> CycleState:
    state = CycleState()
    state.record_plugin_metrics = on
    return state


def wrapper_calls(run: Callable[[], object]) -> int:
    """How many calls into :mod:`kubesched.framework.instrumented` ``run`` makes."""
    calls = 0
    here = instrumented.__file__

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal calls
        code: CodeType = frame.f_code
        if event == "call" and code.co_filename == here:
            calls += 1

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(previous)
    return calls


def test_unsampled_cycles_record_nothing_and_sampled_ones_each_plugin_call() -> None:
    records: list[Record] = []
    fwk = compiled(records)
    pod = make_pod("web").req(cpu="1").pod()
    fwk.run_pre_filter(sampled(False), pod, nodes("n1"))
    assert records == []

    fwk.run_pre_filter(sampled(True), pod, nodes("n1"))
    points = {(name, point) for name, point, _, _ in records}
    assert ("NodeResourcesFit", "PreFilter") in points
    assert all(sec >= 0 for *_, sec in records)


def test_a_clone_of_a_sampled_state_stays_sampled() -> None:
    assert sampled(True).clone().record_plugin_metrics
    assert not CycleState().clone().record_plugin_metrics


def test_sampled_cycles_run_the_wrapped_plugins_and_others_the_plain_ones() -> None:
    fwk = compiled([])
    plain, timed = fwk.chain_for(sampled(False)), fwk.chain_for(sampled(True))
    assert plain is fwk.chain
    fit = next(p for p in plain.filter if p.name == "NodeResourcesFit")
    assert type(fit) is NodeResourcesFit
    wrapped = next(p for p in timed.filter if p.name == "NodeResourcesFit")
    assert type(wrapped) is InstrumentedPlugin  # type: ignore[comparison-overlap]
    assert isinstance(wrapped, NodeResourcesFit)
    # One wrapper per plugin, whichever points it serves.
    assert any(p is wrapped for p in timed.pre_filter)
    assert [p.name for p in timed.filter] == [p.name for p in plain.filter]


def test_without_a_recorder_plugins_are_not_wrapped() -> None:
    fwk = compile_profile(default_profile_spec()).framework
    assert fwk.chain_for(sampled(True)) is fwk.chain
    fit = next(p for p in fwk.chain.filter if p.name == "NodeResourcesFit")
    assert type(fit) is NodeResourcesFit


def _preempt(fwk: Framework, state: CycleState, pod: Pod, snap: Snapshot) -> PostFilterResult:
    """One failed cycle of ``pod``: PreFilter, Filter on every node, then PostFilter
    (DefaultPreemption's dry run)."""
    _, s, _ = fwk.run_pre_filter(state, pod, snap.node_infos)
    assert s is None
    statuses: dict[str, Status] = {}
    for ni in snap.node_infos:
        st = fwk.run_filter(state, pod, ni)
        assert st is not None
        statuses[ni.name] = st
    res, s = fwk.run_post_filter(state, pod, statuses)
    assert s is not None and s.code == Code.SUCCESS, s
    assert res is not None
    return res


def test_preemption_dry_run_is_timed_only_in_a_sampled_cycle() -> None:
    def low(name: str, node: str) -> Pod:
        return make_pod(name).req(cpu="2").priority(0).node(node).pod()

    snap = Snapshot(
        [
            make_node(n).alloc(cpu="2", memory="8Gi").info(low(f"low-{n}", n))
            for n in ("n1", "n2", "n3")
        ]
    )
    records: list[Record] = []
    fwk = compiled(records, snap)
    urgent = make_pod("urgent").req(cpu="2").priority(100).pod()

    results: list[PostFilterResult] = []
    assert wrapper_calls(lambda: results.append(_preempt(fwk, sampled(False), urgent, snap))) == 0
    assert records == []
    assert results[0].nominated_node_name in ("n1", "n2", "n3")

    assert wrapper_calls(lambda: results.append(_preempt(fwk, sampled(True), urgent, snap))) > 0
    assert results[1] == results[0]
    filters = [r for r in records if r[:2] == ("NodeResourcesFit", "Filter")]
    # The cycle's own Filter on 3 nodes, then the dry run's on each candidate node.
    assert len(filters) > 3
    assert ("DefaultPreemption", "PostFilter") in {r[:2] for r in records}
