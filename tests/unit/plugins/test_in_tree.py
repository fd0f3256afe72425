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
    VectorDiagnosePlugin,
    VectorFilterPlugin,
    VectorScorePlugin,
)
from kubesched.framework.registry import DuplicatePluginError
from kubesched.framework.signature import SignPlugin
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
        VectorDiagnosePlugin,
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


def _own_methods(cls: type) -> set[str]:
    """Methods ``cls`` defines itself or inherits from a class that is not a Protocol."""
    return {m for c in cls.__mro__ if c not in PROTOCOLS for m in vars(c)}


PROTOCOLS: tuple[type, ...] = (*ALL_POINTS, VectorFilterPlugin, VectorScorePlugin, SignPlugin)


@pytest.mark.parametrize("module", IN_TREE_MODULES, ids=lambda m: m.NAME)
def test_plugins_declare_every_protocol_they_implement(module: ModuleType) -> None:
    """mypy checks a plugin's methods against the Protocols it lists as bases (a missing
    method cannot be instantiated, a wrong signature is an incompatible override). So a
    plugin must list every Protocol whose methods it has: otherwise the profile compiler
    (which reads a plugin's methods) could put it at a point mypy never checked."""
    spec = in_tree_registry().get(module.NAME)
    assert spec is not None
    cls = type(spec.factory(spec.parse_args(None), FakeHandle()))
    declared = {p.__name__ for p in PROTOCOLS if p in cls.__mro__}
    implemented = {
        p.__name__
        for p in PROTOCOLS
        if {m for m, v in vars(p).items() if callable(v) and not m.startswith("_")}
        <= _own_methods(cls)
    }
    assert declared == implemented
