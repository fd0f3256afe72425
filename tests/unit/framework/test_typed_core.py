"""The framework core's types, checked by mypy (``mypy operator/kubesched tests``).

The ``TYPE_CHECKING`` block is never run: each line there is a mistake mypy must refuse,
marked with the error it gives. mypy runs with ``warn_unused_ignores`` (``strict``), so
if one of these mistakes stopped being an error, its ``type: ignore`` would be unused
and mypy would fail. The tests check the same types at run time on a compiled profile.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, assert_type

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import (
    FilterPlugin,
    Plugin,
    QueueingHintFn,
    QueueSortPlugin,
    ScorePlugin,
)
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.registry import NoArgs, Registry
from kubesched.framework.resources import Resource
from kubesched.framework.runtime import PluginChain
from kubesched.framework.types import Pod
from kubesched.plugins import node_resources_fit, priority_sort, taint_toleration
from kubesched.profiles import compile_profile, default_profile_spec
from tests.builders import make_pod
from tests.unit.plugins.fakes import FakeHandle

if TYPE_CHECKING:

    class _MissingFilter(FilterPlugin):
        """Declares Filter without a ``filter`` method."""

        name = "MissingFilter"

    _MissingFilter()  # type: ignore[abstract]

    class _WrongFilter(FilterPlugin):
        name = "WrongFilter"

        def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> bool:  # type: ignore[override]
            return True

    # A QueueSort plugin is not a Filter plugin.
    PluginChain(filter=[priority_sort.PrioritySort()])  # type: ignore[list-item]
    # NodeResourcesFit's factory takes its own Args, not NoArgs.
    Registry().register("Fit", node_resources_fit.new)  # type: ignore[arg-type]
    Registry().register("Fit", node_resources_fit.new, NoArgs)  # type: ignore[arg-type]
    # A state key reads back the type written under it.
    CycleState().write(node_resources_fit.PRE_FILTER_STATE_KEY, [1])  # type: ignore[misc]


def test_a_compiled_chain_holds_each_point_s_protocol() -> None:
    chain = compile_profile(default_profile_spec()).framework.chain
    assert_type(chain.queue_sort, QueueSortPlugin | None)
    assert_type(chain.filter, list[FilterPlugin])
    assert_type(chain.score, list[tuple[ScorePlugin, int]])
    assert isinstance(chain.queue_sort, QueueSortPlugin)
    assert chain.filter and all(isinstance(p, FilterPlugin) for p in chain.filter)
    assert chain.score and all(isinstance(p, ScorePlugin) for p, _ in chain.score)


def test_the_registry_pairs_a_factory_with_its_args() -> None:
    registry = Registry()
    registry.register("Fit", node_resources_fit.new, node_resources_fit.Args)
    registry.register("Taints", taint_toleration.new)
    spec = registry.get("Fit")
    assert spec is not None
    plugin = spec.factory(spec.parse_args({"ignoredResources": ["example.com/foo"]}), FakeHandle())
    assert_type(plugin, Plugin)
    assert plugin.name == "NodeResourcesFit"
    taints = registry.get("Taints")
    assert taints is not None and taints.args is NoArgs
    # At run time the wrapped factory refuses another plugin's args, by name.
    try:
        taints.factory(spec.parse_args(None), FakeHandle())
    except TypeError as e:
        assert str(e) == "plugin 'Taints' takes NoArgs, not Args"
    else:
        raise AssertionError("a factory accepted another plugin's args")


def test_state_keys_and_hints_are_typed() -> None:
    state = CycleState()
    state.write(node_resources_fit.PRE_FILTER_STATE_KEY, Resource(milli_cpu=250))
    assert_type(state.read(node_resources_fit.PRE_FILTER_STATE_KEY), Resource)
    assert state.read(node_resources_fit.PRE_FILTER_STATE_KEY).milli_cpu == 250
    assert state.get(node_resources_fit.PRE_SCORE_STATE_KEY) is None
    hints = [
        r.hint
        for r in taint_toleration.new(NoArgs(), FakeHandle()).events_to_register()
        if r.hint is not None
    ]
    assert hints
    hint: QueueingHintFn = hints[0]
    assert isinstance(hint(make_pod("p").pod(), None, None), bool)
