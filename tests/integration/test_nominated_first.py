"""A pod's nominated node is tried first with Filter alone, as kube-scheduler 1.37's
evaluateNominatedNode does: whatever nodes PreFilter narrowed the cycle to."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from kubesched.api.profile import PluginRef, Plugins, PluginSet, ProfileSpec
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import PreFilterResult
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.status import Status
from kubesched.framework.types import Pod
from kubesched.plugins import in_tree_registry
from tests.builders import make_node, make_pod
from tests.integration.harness import Harness, running

pytestmark = pytest.mark.looptime


class OnlyN2:
    """A PreFilter that narrows every cycle to node n2, with no Filter of its own."""

    name = "OnlyN2"

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        return PreFilterResult({"n2"}), None

    def pre_filter_extensions(self) -> None:
        return None


def harness() -> Harness:
    registry = in_tree_registry()
    registry.register(OnlyN2.name, lambda args, handle: OnlyN2())
    spec = ProfileSpec(plugins=Plugins(pre_filter=PluginSet(enabled=[PluginRef(name=OnlyN2.name)])))
    h = Harness(profiles=[spec], registry=registry)
    h.apply(make_node("n1").obj(), make_node("n2").obj())
    return h


async def test_a_nominated_node_that_fits_is_taken_even_outside_pre_filters_nodes() -> None:
    h = harness()
    h.apply(make_pod("nominated").nominated("n1").obj(), make_pod("plain").obj())
    async with running(h):
        await h.wait_for(
            lambda: None not in (h.node_of("default/nominated"), h.node_of("default/plain"))
        )
    assert h.node_of("default/nominated") == "n1"
    assert h.node_of("default/plain") == "n2"  # PreFilter's narrowing holds for the rest


async def test_a_nominated_node_that_no_longer_fits_leaves_pre_filters_nodes() -> None:
    h = harness()
    h.apply(make_pod("nominated").nominated("n1").req(cpu="100").obj())
    h.apply(make_node("n2").alloc(cpu="200", memory="4Gi").obj())
    async with running(h):
        await h.wait_for(lambda: h.node_of("default/nominated") is not None)
    assert h.node_of("default/nominated") == "n2"
