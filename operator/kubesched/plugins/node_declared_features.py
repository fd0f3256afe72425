"""NodeDeclaredFeatures: a pod that needs a node feature goes only to nodes declaring it.

Kubelets publish the features they support in ``status.declaredFeatures`` (a sorted
list of names, validated by the API server). kube-scheduler v1.37 infers from a pod's
spec which of the features it knows the pod needs (``k8s.io/component-helpers``'s
``nodedeclaredfeatures`` registry) and keeps only nodes that declare all of them. The
gate ``NodeDeclaredFeatures`` is GA and locked on in v1.37, so the plugin is in the
default profile.

The registry of v1.37.2 knows :data:`KNOWN_FEATURES`; three of them can be required
by a pod being scheduled (none has a maximum version, so all apply to v1.37):

``RestartAllContainersOnContainerExits``
    a container or init container has a ``restartPolicyRules`` entry whose action is
    ``RestartAllContainers``;
``UserNamespacesHostNetworkSupport``
    ``spec.hostNetwork`` is true and ``spec.hostUsers`` is explicitly false;
``VolumeBindMountOptions``
    a volume mount of a container, init container or ephemeral container has
    ``bindMountOptions``.

The others (in-place resize variants, DRA node operations, websockets to kubelet) are
required only by pod updates, never by scheduling. Names a node declares that the
registry does not know are ignored, as kube-scheduler's ``TryMap`` does.

PreFilter returns Skip for a pod that needs no feature (almost every pod), so Filter
runs only for the others; it rejects with ``UnschedulableAndUnresolvable`` (removing
pods cannot add a feature to a node).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kubesched.framework.cycle_state import CycleState, StateKey
from kubesched.framework.interface import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EnqueueExtensions,
    EventResource,
    FilterPlugin,
    Handle,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
)
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.registry import NoArgs
from kubesched.framework.status import Status
from kubesched.framework.types import Node, Pod

__all__ = [
    "ERR_REASON",
    "KNOWN_FEATURES",
    "NAME",
    "NodeDeclaredFeatures",
    "new",
    "node_features",
    "required_features",
]

NAME = "NodeDeclaredFeatures"

PRE_FILTER_STATE_KEY: StateKey[frozenset[str]] = StateKey("PreFilter" + NAME)

ERR_REASON = "node(s) didn't match Pod's required features"

RESTART_ALL_CONTAINERS = "RestartAllContainersOnContainerExits"
USER_NAMESPACES_HOST_NETWORK = "UserNamespacesHostNetworkSupport"
VOLUME_BIND_MOUNT_OPTIONS = "VolumeBindMountOptions"

KNOWN_FEATURES: frozenset[str] = frozenset(
    {
        "DRANodeAllocatableResources",
        "DRAOptionalNodeOperations",
        "ExtendWebSocketsToKubelet",
        "InPlacePodLevelResourcesVerticalScaling",
        "InPlacePodVerticalScalingInitContainers",
        "InPlacePodVerticalScalingMemoryBackedVolumes",
        RESTART_ALL_CONTAINERS,
        USER_NAMESPACES_HOST_NETWORK,
        VOLUME_BIND_MOUNT_OPTIONS,
    }
)
"""Every feature of component-helpers v0.37.2's registry (``features.AllFeatures``)."""


def _items(obj: Any) -> Iterable[Mapping[str, Any]]:
    """The object items of a list field; anything malformed counts as absent."""
    if not isinstance(obj, list):
        return ()
    return (x for x in obj if isinstance(x, Mapping))


def _restarts_all_containers(spec: Mapping[str, Any]) -> bool:
    for kind in ("containers", "initContainers"):
        for c in _items(spec.get(kind)):
            for rule in _items(c.get("restartPolicyRules")):
                if rule.get("action") == "RestartAllContainers":
                    return True
    return False


def _user_namespace_with_host_network(spec: Mapping[str, Any]) -> bool:
    return spec.get("hostNetwork") is True and spec.get("hostUsers") is False


def _uses_bind_mount_options(spec: Mapping[str, Any]) -> bool:
    for kind in ("containers", "initContainers", "ephemeralContainers"):
        for c in _items(spec.get(kind)):
            for mount in _items(c.get("volumeMounts")):
                if mount.get("bindMountOptions"):
                    return True
    return False


def required_features(spec: Mapping[str, Any]) -> frozenset[str]:
    """The declared features a pod with this spec needs on its node (sorted names in
    kube's FeatureSet; a set here)."""
    needed: set[str] = set()
    if _restarts_all_containers(spec):
        needed.add(RESTART_ALL_CONTAINERS)
    if _user_namespace_with_host_network(spec):
        needed.add(USER_NAMESPACES_HOST_NETWORK)
    if _uses_bind_mount_options(spec):
        needed.add(VOLUME_BIND_MOUNT_OPTIONS)
    return frozenset(needed)


def _declared(raw: Mapping[str, Any]) -> list[Any]:
    status = raw.get("status")
    declared = status.get("declaredFeatures") if isinstance(status, Mapping) else None
    return declared if isinstance(declared, list) else []


def node_features(node: Node) -> frozenset[str]:
    """The known features a node declares (unknown names dropped)."""
    return KNOWN_FEATURES.intersection(f for f in _declared(node.raw) if isinstance(f, str))


class NodeDeclaredFeatures(PreFilterPlugin, FilterPlugin, EnqueueExtensions):
    name = NAME

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_DECLARED_FEATURE
                ),
                _after_node_change,
            ),
            # kube registers the pod's own update (TargetPod); the hint ignores others.
            ClusterEventWithHint(
                ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE),
                _after_target_pod_update,
            ),
        ]

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        needed = required_features(pod.spec)
        if not needed:
            return None, Status.skip()
        state.write(PRE_FILTER_STATE_KEY, needed)
        return None, None

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        needed: frozenset[str] | None = state.get(PRE_FILTER_STATE_KEY)
        if needed is None:
            needed = required_features(pod.spec)
        if not needed:
            return None
        node = node_info.node
        if node is None:
            return Status.as_error("node not found", plugin=NAME)
        if needed <= node_features(node):
            return None
        return Status.unresolvable(ERR_REASON, plugin=NAME)


def _after_node_change(pod: Pod, old: object, new: object) -> bool:
    """Queueing hint: a new node, or a node whose declared features changed."""
    if not isinstance(new, Node) or not isinstance(old, Node):
        return True
    return _declared(old.raw) != _declared(new.raw)


def _after_target_pod_update(pod: Pod, old: object, new: object) -> bool:
    """Queueing hint: the pod's own update, when it changes what the pod needs."""
    if not isinstance(old, Pod) or not isinstance(new, Pod):
        return True
    if new.uid != pod.uid:
        return False
    return required_features(old.spec) != required_features(new.spec)


def new(args: NoArgs, handle: Handle) -> NodeDeclaredFeatures:
    return NodeDeclaredFeatures()
