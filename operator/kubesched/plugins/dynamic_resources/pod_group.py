"""PodGroup-level ResourceClaims (``scheduling.k8s.io/v1beta1`` PodGroup
``spec.resourceClaims``, Kubernetes 1.37's DRAWorkloadResourceClaims), as
k8s.io/dynamic-resource-allocation's ``resourceclaim`` package decides them.

A member pod whose ``spec.resourceClaims`` entry matches one of its PodGroup's claims
exactly (same name, same ``resourceClaimName`` or ``resourceClaimTemplateName``) uses
the PodGroup's claim: the resourceclaim controller names that claim in the pod's
``status.resourceClaimStatuses`` (the claim it generated for the PodGroup, recorded in
the PodGroup's ``status.resourceClaimStatuses``), and the scheduler reserves it for the
PodGroup, not the pod: ``status.reservedFor`` holds one entry
``{apiGroup: scheduling.k8s.io, resource: podgroups, name, uid}`` shared by all members.

The API server drops ``spec.resourceClaims`` unless the gate is on, so a PodGroup that
has the field is taken as the gate being on (:func:`group_claims_enabled`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kubesched.framework.types import Pod

if TYPE_CHECKING:  # the DRA machinery is imported on first use (see .machinery)
    from kubesched.framework.dra import AllocationResult
    from kubesched.plugins.dynamic_resources.tracker import Pending

__all__ = [
    "GROUP",
    "bind_to",
    "group_claims_enabled",
    "group_of",
    "is_own_pod_group_change",
    "is_pod_group_ref",
    "matching_claim",
    "pod_group_name",
    "shared_allocation",
]

GROUP = "scheduling.k8s.io"
Obj = Mapping[str, Any]


def pod_group_name(pod: Pod) -> str | None:
    """``spec.schedulingGroup.podGroupName``, the pod's upstream PodGroup."""
    group = pod.spec.get("schedulingGroup")
    if isinstance(group, Mapping) and group.get("podGroupName"):
        return str(group["podGroupName"])
    return None


def group_claims_enabled(pod_group: Obj | None) -> bool:
    return bool(pod_group is not None and (pod_group.get("spec") or {}).get("resourceClaims"))


def is_pod_group_ref(ref: Obj, pod: Pod) -> bool:
    """Whether a ``reservedFor`` entry (or owner reference) names the pod's PodGroup; pods
    do not know their PodGroup's uid, so the group and name decide (as kube's)."""
    name = pod_group_name(pod)
    if name is None:
        return False
    group = str(ref.get("apiGroup") or str(ref.get("apiVersion") or "").partition("/")[0])
    kind_ok = ref.get("resource") == "podgroups" or ref.get("kind") == "PodGroup"
    return group == GROUP and kind_ok and ref.get("name") == name


def matching_claim(pod_group: Obj | None, pod_claim: Obj) -> Obj | None:
    """The PodGroup's ``spec.resourceClaims`` entry that ``pod_claim`` (an entry of the
    pod's ``spec.resourceClaims``) matches exactly, if any."""
    if pod_group is None:
        return None
    for entry in (pod_group.get("spec") or {}).get("resourceClaims") or ():
        if (
            isinstance(entry, Mapping)
            and entry.get("name") == pod_claim.get("name")
            and entry.get("resourceClaimName") == pod_claim.get("resourceClaimName")
            and entry.get("resourceClaimTemplateName") == pod_claim.get("resourceClaimTemplateName")
        ):
            return entry
    return None


def bind_to(pod: Pod, pod_group: Obj | None, pod_claim: Obj) -> dict[str, Any]:
    """kube's ``resourceclaim.BindTo``: the consumer a claim is reserved for. The PodGroup
    when ``pod_claim`` matches one of its claims exactly, else the pod."""
    if pod_group is not None and matching_claim(pod_group, pod_claim) is not None:
        meta = pod_group.get("metadata") or {}
        return {
            "apiGroup": GROUP,
            "resource": "podgroups",
            "name": str(meta.get("name") or ""),
            "uid": str(meta.get("uid") or ""),
        }
    return {"resource": "pods", "name": pod.name, "uid": pod.uid}


def group_of(binding: Mapping[str, Any]) -> str:
    """The PodGroup a claim is reserved for (``name/uid``), "" when it is the pod."""
    if binding.get("resource") != "podgroups":
        return ""
    return f"{binding.get('name')}/{binding.get('uid')}"


def shared_allocation(
    pending: Pending | None, binding: Mapping[str, Any]
) -> AllocationResult | None:
    """A sibling's in-flight allocation of the same PodGroup claim (kube reuses it within
    the PodGroup's cycle rather than wait for it to be written)."""
    group = group_of(binding)
    if pending is None or not group or pending.group != group:
        return None
    return pending.allocation


def is_own_pod_group_change(pod: Pod, old: object, new: object) -> bool:
    """Queueing hint: the pod's ``scheduling.k8s.io`` PodGroup appeared or its claims
    changed. kube-scheduler starts scheduling only once its PodGroup informer synced;
    here a member may be tried before the PodGroup is known (its claim, owned by the
    PodGroup, then looks like another pod's), so the PodGroup's arrival retries it."""
    name = pod_group_name(pod)
    if name is None or not isinstance(new, Mapping):
        return False
    # (listed objects carry no apiVersion: only the upstream PodGroup has resourceClaims)
    meta = new.get("metadata") or {}
    if (meta.get("namespace") or "default", meta.get("name")) != (pod.namespace, name):
        return False
    if not group_claims_enabled(new):
        return False
    if not isinstance(old, Mapping):
        return True
    claims = ((o.get("spec") or {}).get("resourceClaims") for o in (old, new))
    statuses = ((o.get("status") or {}).get("resourceClaimStatuses") for o in (old, new))
    return next(claims) != next(claims) or next(statuses) != next(statuses)
