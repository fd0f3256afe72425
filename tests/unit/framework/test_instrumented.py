"""Plugins are instrumented once, when their profile is compiled; only sampled cycles
(``CycleState.record_plugin_metrics``) time their calls."""

from __future__ import annotations

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.instrumented import InstrumentedPlugin
from kubesched.framework.runtime import Framework, FrameworkServices
from kubesched.framework.status import Status
from kubesched.plugins.node_resources_fit import NodeResourcesFit
from kubesched.profiles import compile_profile, default_profile_spec
from tests.builders import make_pod
from tests.unit.framework.test_runtime import nodes

Record = tuple[str, str, Status | None, float]


def compiled(records: list[Record]) -> Framework:
    services = FrameworkServices(record_plugin=lambda *r: records.append(r))
    return compile_profile(default_profile_spec(), services).framework


def test_unsampled_cycles_record_nothing_and_sampled_ones_each_plugin_call() -> None:
    records: list[Record] = []
    fwk = compiled(records)
    pod = make_pod("web").req(cpu="1").pod()
    state = CycleState()
    fwk.run_pre_filter(state, pod, nodes("n1"))
    assert records == []

    sampled = CycleState()
    sampled.record_plugin_metrics = True
    fwk.run_pre_filter(sampled, pod, nodes("n1"))
    points = {(name, point) for name, point, _, _ in records}
    assert ("NodeResourcesFit", "PreFilter") in points
    assert all(sec >= 0 for *_, sec in records)


def test_a_clone_of_a_sampled_state_stays_sampled() -> None:
    state = CycleState()
    state.record_plugin_metrics = True
    assert state.clone().record_plugin_metrics
    assert not CycleState().clone().record_plugin_metrics


def test_instrumented_plugins_are_built_once_and_still_look_like_themselves() -> None:
    fwk = compiled([])
    chain = fwk.chain
    fit = next(p for p in chain.filter if p.name == "NodeResourcesFit")
    assert type(fit) is InstrumentedPlugin  # type: ignore[comparison-overlap]
    assert isinstance(fit, NodeResourcesFit)
    # One wrapper per plugin, whichever points it serves.
    assert any(p is fit for p in chain.pre_filter)


def test_without_a_recorder_plugins_are_not_wrapped() -> None:
    fwk = compile_profile(default_profile_spec()).framework
    fit = next(p for p in fwk.chain.filter if p.name == "NodeResourcesFit")
    assert type(fit) is NodeResourcesFit
