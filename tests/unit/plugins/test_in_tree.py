"""The in-tree registry and kube-scheduler's default plugin list."""

from __future__ import annotations

from types import ModuleType

import pytest

from kubesched.framework.interface import (
    BindPlugin,
    EnqueueExtensions,
    FilterPlugin,
    PermitPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
    VectorFilterPlugin,
    VectorScorePlugin,
)
from kubesched.framework.registry import DuplicatePluginError
from kubesched.plugins import (
    DEFAULT_PLUGINS,
    IN_TREE_MODULES,
    KUBE_DEFAULT_PLUGINS,
    in_tree_registry,
    node_name,
)
from tests.unit.plugins.fakes import FakeHandle


def test_registry_holds_every_in_tree_plugin() -> None:
    assert in_tree_registry().names() == sorted(
        [
            "Coscheduling",
            "DefaultBinder",
            "DefaultPreemption",
            "DynamicResources",
            "ImageLocality",
            "InterPodAffinity",
            "NodeAffinity",
            "NodeDeclaredFeatures",
            "NodeName",
            "NodePorts",
            "NodeResourcesBalancedAllocation",
            "NodeResourcesFit",
            "NodeUnschedulable",
            "NodeVolumeLimits",
            "PodTopologySpread",
            "PrioritySort",
            "SchedulingGates",
            "TaintToleration",
            "VolumeBinding",
            "VolumeRestrictions",
            "VolumeZone",
        ]
    )


def test_registry_refuses_duplicates() -> None:
    registry = in_tree_registry()
    with pytest.raises(DuplicatePluginError, match="NodeName"):
        registry.register_module(node_name)


def test_default_plugins_follow_kube_scheduler_order_and_weights() -> None:
    # kube-scheduler's list, PrioritySort replaced by Coscheduling's QueueSort, then
    # kubesched's own defaults.
    assert DEFAULT_PLUGINS == (
        ("SchedulingGates", None),
        ("NodeName", None),
        ("NodeUnschedulable", None),
        ("TaintToleration", 3),
        ("NodeAffinity", 2),
        ("NodePorts", None),
        ("NodeResourcesFit", 1),
        ("VolumeRestrictions", None),
        ("NodeVolumeLimits", None),
        ("VolumeBinding", None),
        ("VolumeZone", None),
        ("PodTopologySpread", 2),
        ("InterPodAffinity", 2),
        ("DynamicResources", 2),
        ("DefaultPreemption", None),
        ("NodeResourcesBalancedAllocation", 1),
        ("ImageLocality", 1),
        ("DefaultBinder", None),
        ("NodeDeclaredFeatures", None),
        ("Coscheduling", None),
    )
    kube_order = [n for n, _ in KUBE_DEFAULT_PLUGINS]
    assert kube_order.index("DynamicResources") == kube_order.index("DefaultPreemption") - 1
    assert len(kube_order) == 20
    assert kube_order[-1] == "NodeDeclaredFeatures"


EXPECTED_POINTS: dict[str, set[type]] = {
    "PrioritySort": {QueueSortPlugin},
    "Coscheduling": {
        QueueSortPlugin,
        PreEnqueuePlugin,
        PreFilterPlugin,
        PostFilterPlugin,
        ReservePlugin,
        PermitPlugin,
        EnqueueExtensions,
    },
    "NodeUnschedulable": {PreFilterPlugin, FilterPlugin, VectorFilterPlugin, EnqueueExtensions},
    "NodeName": {PreFilterPlugin, FilterPlugin, VectorFilterPlugin, EnqueueExtensions},
    "NodeDeclaredFeatures": {PreFilterPlugin, FilterPlugin, EnqueueExtensions},
    "TaintToleration": {
        PreFilterPlugin,
        FilterPlugin,
        VectorFilterPlugin,
        PreScorePlugin,
        ScorePlugin,
        VectorScorePlugin,
        EnqueueExtensions,
    },
    "NodeResourcesFit": {
        PreFilterPlugin,
        FilterPlugin,
        VectorFilterPlugin,
        PreScorePlugin,
        ScorePlugin,
        VectorScorePlugin,
        EnqueueExtensions,
    },
    "NodeResourcesBalancedAllocation": {PreScorePlugin, ScorePlugin, VectorScorePlugin},
    "DefaultBinder": {BindPlugin},
    "SchedulingGates": {PreEnqueuePlugin, EnqueueExtensions},
    "NodeAffinity": {
        PreFilterPlugin,
        FilterPlugin,
        VectorFilterPlugin,
        PreScorePlugin,
        ScorePlugin,
        VectorScorePlugin,
        EnqueueExtensions,
    },
    "NodePorts": {PreFilterPlugin, FilterPlugin, VectorFilterPlugin, EnqueueExtensions},
    "ImageLocality": {ScorePlugin, VectorScorePlugin},
    "PodTopologySpread": {
        PreFilterPlugin,
        FilterPlugin,
        VectorFilterPlugin,
        PreScorePlugin,
        ScorePlugin,
        VectorScorePlugin,
        EnqueueExtensions,
    },
    "DefaultPreemption": {PreEnqueuePlugin, PostFilterPlugin, EnqueueExtensions},
    "InterPodAffinity": {
        PreFilterPlugin,
        FilterPlugin,
        VectorFilterPlugin,
        PreScorePlugin,
        ScorePlugin,
        VectorScorePlugin,
        EnqueueExtensions,
    },
    "VolumeRestrictions": {PreFilterPlugin, FilterPlugin, EnqueueExtensions},
    "VolumeZone": {PreFilterPlugin, FilterPlugin, EnqueueExtensions},
    "NodeVolumeLimits": {PreFilterPlugin, FilterPlugin, EnqueueExtensions},
    "DynamicResources": {
        PreEnqueuePlugin,
        PreFilterPlugin,
        FilterPlugin,
        PostFilterPlugin,
        ScorePlugin,
        VectorScorePlugin,
        ReservePlugin,
        PreBindPlugin,
        EnqueueExtensions,
    },
    "VolumeBinding": {
        PreFilterPlugin,
        FilterPlugin,
        PreScorePlugin,
        ScorePlugin,
        ReservePlugin,
        PreBindPlugin,
        EnqueueExtensions,
    },
}
ALL_POINTS: set[type] = set().union(*EXPECTED_POINTS.values())


@pytest.mark.parametrize("module", IN_TREE_MODULES, ids=lambda m: m.NAME)
def test_plugins_implement_their_extension_points(module: ModuleType) -> None:
    name: str = module.NAME
    spec = in_tree_registry().get(name)
    assert spec is not None
    plugin = spec.factory(spec.parse_args(None), FakeHandle())
    assert plugin.name == name
    implemented = {p for p in ALL_POINTS if isinstance(plugin, p)}
    assert implemented == EXPECTED_POINTS[name]
