"""What each in-tree plugin reads from a pod, for signatures (KEP-5598).

kube-scheduler gives each plugin a ``SignPod`` method; kubesched keeps the in-tree ones
in this one table, keyed by plugin name, beside the batching that is their only user
(plugins stay free of it). A plugin with its own ``sign_pod`` method (out-of-tree ones)
is asked directly and takes precedence.

Where kubesched is stricter than kube-scheduler v1.37.2 (a pod it batches we might not):
claims (PVC, ephemeral) make a pod unbatchable (VolumeBinding's Reserve binds the claim,
so the next pod with the same claim fits elsewhere than before); InterPodAffinity always
signs the pod's labels and namespace (existing pods' required anti-affinity reads both,
also under ``ignorePreferredTermsOfExistingPods``). Where it is more permissive:
PodTopologySpread refuses only a pod that its default constraints actually constrain
(kube-scheduler refuses every pod of a profile with default constraints, which
``defaultingType: System`` always has, so the default profile never batches there).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubesched.api.podgroup import pod_group_name
from kubesched.framework.signature import (
    LABELS,
    NODE_NAME,
    SignFragment,
    host_ports_fragment,
    image_names_fragment,
    node_affinity_fragments,
    resources_fragment,
    tolerations_fragment,
    unsignable,
    volumes_fragment,
)
from kubesched.framework.status import Status
from kubesched.framework.types import ObjectError, Pod
from kubesched.plugins.pod_topology_spread.constraints import (
    DO_NOT_SCHEDULE,
    SCHEDULE_ANYWAY,
    default_selector,
)

__all__ = ["IN_TREE_SIGNERS", "plugin_signer"]

Signed = tuple[list[SignFragment], Status | None]
Signer = Callable[[Any, Pod], Signed]


def _ok(*fragments: SignFragment) -> Signed:
    return list(fragments), None


def _volumes(plugin: Any, pod: Pod) -> Signed:
    frag = volumes_fragment(pod)
    if frag is None:
        return unsignable("pods with volume claims are not signable")
    return _ok(frag)


def _inter_pod_affinity(plugin: Any, pod: Pod) -> Signed:
    if pod.has_affinity():
        return unsignable("pods with InterPodAffinity are not signable")
    return _ok((LABELS, (pod.namespace, pod.labels)))


def _topology_spread(plugin: Any, pod: Pod) -> Signed:
    if pod.spec.get("topologySpreadConstraints"):
        return unsignable("pods with topology constraints are not signable")
    if not plugin.default_constraints:
        return _ok()
    try:
        store = plugin.handle.store
    except RuntimeError:  # no object store: no Service or controller selects the pod
        store = None
    try:
        constrained = default_selector(pod, store) is not None and (
            plugin.constraints(pod, DO_NOT_SCHEDULE) or plugin.constraints(pod, SCHEDULE_ANYWAY)
        )
    except ObjectError as e:
        return [], Status.as_error(str(e))
    if constrained:
        return unsignable("pods with default topology constraints are not signable")
    return _ok()


def _coscheduling(plugin: Any, pod: Pod) -> Signed:
    if pod_group_name(pod.labels):
        return unsignable("pods of a PodGroup are not signable")
    return _ok()


def _declared_features(plugin: Any, pod: Pod) -> Signed:
    from kubesched.plugins.node_declared_features import required_features

    return _ok(("v1.Pod.Spec.RequiredFeatures()", sorted(required_features(pod.spec))))


def _resources_fit(plugin: Any, pod: Pod) -> Signed:
    backed = getattr(plugin, "dra_backed", None)
    if callable(backed) and backed(pod):
        return unsignable("signature disabled when dra extended resources are used in the cluster")
    return _ok(resources_fragment(pod))


def _tolerations(plugin: Any, pod: Pod) -> Signed:
    return _ok(tolerations_fragment(pod))


IN_TREE_SIGNERS: dict[str, Signer] = {
    "NodeName": lambda p, pod: _ok((NODE_NAME, pod.node_name)),
    "NodeUnschedulable": _tolerations,
    "TaintToleration": _tolerations,
    "NodeAffinity": lambda p, pod: _ok(*node_affinity_fragments(pod)),
    "NodePorts": lambda p, pod: _ok(host_ports_fragment(pod)),
    "NodeResourcesFit": _resources_fit,
    "NodeResourcesBalancedAllocation": lambda p, pod: _ok(resources_fragment(pod)),
    "ImageLocality": lambda p, pod: _ok(image_names_fragment(pod)),
    "VolumeRestrictions": _volumes,
    "NodeVolumeLimits": _volumes,
    "VolumeBinding": _volumes,
    "VolumeZone": _volumes,
    "InterPodAffinity": _inter_pod_affinity,
    "PodTopologySpread": _topology_spread,
    "Coscheduling": _coscheduling,
    "NodeDeclaredFeatures": _declared_features,
}
"""Plugin name -> signer. DynamicResources signs through its own ``sign_pod`` (pods with
``spec.resourceClaims`` are unbatchable, as in kube-scheduler)."""


def _of_pod(entry: Signer) -> Callable[[Pod], Signed]:
    return lambda pod: entry(None, pod)


_POD_ONLY: dict[Signer, Callable[[Pod], Signed]] = {
    entry: _of_pod(entry) for entry in (_tolerations, _volumes)
}
"""The table's signers that read the pod alone, each as one function whatever plugin it
signs for: a signer made of several plugins sharing one calls it once
(:class:`~kubesched.framework.signature.PodSigner`)."""


def plugin_signer(plugin: Any) -> Callable[[Pod], Signed] | None:
    """How to sign pods for ``plugin``: its own ``sign_pod``, else the table's entry."""
    own = getattr(plugin, "sign_pod", None)
    if callable(own):
        return own  # type: ignore[no-any-return]
    entry = IN_TREE_SIGNERS.get(plugin.name)
    if entry is None:
        return None
    shared = _POD_ONLY.get(entry)
    if shared is not None:
        return shared
    return lambda pod: entry(plugin, pod)
