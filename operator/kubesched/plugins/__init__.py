"""The in-tree plugins: one module each, registered by :func:`in_tree_registry`.

:data:`DEFAULT_PLUGINS` is kube-scheduler's default ``multiPoint`` plugin list
(``getDefaultPlugins`` in pkg/scheduler/apis/config/v1/default_plugins.go, v1.37.2,
with its default feature gates: DynamicResourceAllocation and NodeDeclaredFeatures are
GA and locked on, GenericWorkload, TopologyAwareWorkloadScheduling and
InPlacePodVerticalScalingSchedulerPreemption are off), restricted to the plugins that
exist here, in kube-scheduler's order, with its score weights:

    SchedulingGates
    PrioritySort
    NodeName
    NodeUnschedulable
    TaintToleration                  weight 3
    NodeAffinity                     weight 2
    NodePorts
    NodeResourcesFit                 weight 1
    VolumeRestrictions
    NodeVolumeLimits
    VolumeBinding
    VolumeZone
    PodTopologySpread                weight 2
    InterPodAffinity                 weight 2
    DynamicResources                 weight 2
    DefaultPreemption
    NodeResourcesBalancedAllocation  weight 1
    ImageLocality                    weight 1
    DefaultBinder
    NodeDeclaredFeatures

Plugins without a weight get weight 1 where they score (kube-scheduler's default).

kubesched's own defaults (:data:`KUBESCHED_DEFAULT_PLUGINS`) follow kube's list:

    Coscheduling                     gangs (PodGroups) all-or-nothing

Coscheduling's QueueSort replaces PrioritySort (a profile has exactly one QueueSort):
it orders pods outside gangs exactly as PrioritySort does and keeps a gang's members
together. :data:`DEFAULT_PLUGINS` is kube's list without PrioritySort, then kubesched's.
A profile that disables Coscheduling gets PrioritySort back (see ``kubesched.profiles``).
"""

from __future__ import annotations

from types import ModuleType

from kubesched.framework.registry import Registry
from kubesched.plugins import (
    coscheduling,
    default_binder,
    default_preemption,
    dynamic_resources,
    image_locality,
    inter_pod_affinity,
    node_affinity,
    node_declared_features,
    node_name,
    node_ports,
    node_resources_balanced_allocation,
    node_resources_fit,
    node_unschedulable,
    node_volume_limits,
    pod_topology_spread,
    priority_sort,
    scheduling_gates,
    taint_toleration,
    volume_binding,
    volume_restrictions,
    volume_zone,
)

__all__ = [
    "DEFAULT_PLUGINS",
    "IN_TREE_MODULES",
    "KUBESCHED_DEFAULT_PLUGINS",
    "KUBE_DEFAULT_PLUGINS",
    "REPLACED_BY_KUBESCHED",
    "in_tree_registry",
]

IN_TREE_MODULES: tuple[ModuleType, ...] = (
    scheduling_gates,
    priority_sort,
    node_name,
    node_unschedulable,
    taint_toleration,
    node_affinity,
    node_ports,
    node_resources_fit,
    volume_restrictions,
    node_volume_limits,
    volume_binding,
    volume_zone,
    pod_topology_spread,
    inter_pod_affinity,
    dynamic_resources,
    default_preemption,
    node_resources_balanced_allocation,
    image_locality,
    default_binder,
    node_declared_features,
    coscheduling,
)

KUBE_DEFAULT_PLUGINS: tuple[tuple[str, int | None], ...] = (
    ("SchedulingGates", None),
    ("PrioritySort", None),
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
)
"""kube-scheduler v1.37.2's default multiPoint list: (name, weight or None if unset).
NodeDeclaredFeatures is appended by ``applyFeatureGates`` before DynamicResources is
inserted ahead of DefaultPreemption, hence its place at the end."""


def in_tree_registry() -> Registry:
    """A fresh registry holding every in-tree plugin."""
    registry = Registry()
    for module in IN_TREE_MODULES:
        registry.register_module(module)
    return registry


KUBESCHED_DEFAULT_PLUGINS: tuple[tuple[str, int | None], ...] = (("Coscheduling", None),)
"""kubesched's additions to the default profile, after kube-scheduler's."""

REPLACED_BY_KUBESCHED: dict[str, str] = {"PrioritySort": "Coscheduling"}
"""Kube defaults left out because a kubesched default takes their place (QueueSort)."""


def _default_plugins() -> tuple[tuple[str, int | None], ...]:
    registry = in_tree_registry()
    kube = tuple(
        (name, weight)
        for name, weight in KUBE_DEFAULT_PLUGINS
        if name in registry and name not in REPLACED_BY_KUBESCHED
    )
    return kube + tuple((n, w) for n, w in KUBESCHED_DEFAULT_PLUGINS if n in registry)


DEFAULT_PLUGINS: tuple[tuple[str, int | None], ...] = _default_plugins()
""":data:`KUBE_DEFAULT_PLUGINS` restricted to the registered in-tree plugins, in order,
without those in :data:`REPLACED_BY_KUBESCHED`; then :data:`KUBESCHED_DEFAULT_PLUGINS`."""
