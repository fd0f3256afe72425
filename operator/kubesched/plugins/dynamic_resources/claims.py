"""A pod's ResourceClaims as kube-scheduler finds them, and allocations as the API writes them.

- :func:`pod_claim_names`: ``spec.resourceClaims`` resolved to claim names (a template's
  claim through ``status.resourceClaimStatuses``, written by the resourceclaim
  controller), with the errors of k8s.io/dynamic-resource-allocation's ``resourceclaim``
  package, byte for byte.
- :func:`allocation_dict`: an :class:`AllocationResult` as ``status.allocation``.
- :func:`claim_id`: the key of a claim's in-flight allocation; :func:`claim_key`: a
  claim object's ``namespace/name``, as messages and logs name it.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from kubesched.framework.types import Pod
from kubesched.plugins.dynamic_resources.pod_group import is_pod_group_ref, pod_group_name

if TYPE_CHECKING:  # the DRA machinery is imported on first use (see .machinery)
    from kubesched.framework.dra import AllocationResult, ResourceClaim

__all__ = [
    "ClaimNameError",
    "allocation_dict",
    "claim_id",
    "claim_key",
    "is_for_pod",
    "is_reserved_for",
    "names_claim",
    "pod_claim_names",
]

Obj = Mapping[str, Any]


class ClaimNameError(Exception):
    """A pod claim that cannot be resolved to a ResourceClaim (yet)."""


def pod_claim_names(pod: Pod) -> list[tuple[str, str, bool]]:
    """``(pod claim name, ResourceClaim name, must check owner)`` per entry of
    ``spec.resourceClaims``; entries whose claim was intentionally not created (a
    status entry without a name) are left out. Raises :class:`ClaimNameError`."""
    out: list[tuple[str, str, bool]] = []
    for entry in pod.spec.get("resourceClaims") or ():
        if not isinstance(entry, Mapping):
            raise ClaimNameError(f'pod "{pod.key}": spec.resourceClaims: expected an object')
        name = str(entry.get("name") or "")
        if entry.get("resourceClaimName"):
            out.append((name, str(entry["resourceClaimName"]), False))
            continue
        if entry.get("resourceClaimTemplateName"):
            statuses = (pod.raw.get("status") or {}).get("resourceClaimStatuses") or ()
            for st in statuses:
                if isinstance(st, Mapping) and st.get("name") == name:
                    if st.get("resourceClaimName"):
                        out.append((name, str(st["resourceClaimName"]), True))
                    break
            else:
                raise ClaimNameError(f'pod "{pod.key}": ResourceClaim not created yet')
            continue
        raise ClaimNameError(
            f'pod "{pod.key}", spec.resourceClaim "{name}": none of the supported fields are set'
        )
    return out


def names_claim(pod: Pod, meta: Mapping[str, Any]) -> bool:
    """Whether the pod names the claim of this ``metadata`` (False when some claim of
    the pod has no name yet: then the pod waits for that one, not for this)."""
    if meta.get("namespace") != pod.namespace:
        return False
    try:
        return any(name == meta.get("name") for _, name, _ in pod_claim_names(pod))
    except ClaimNameError:
        return False


def is_for_pod(pod: Pod, claim: Obj, accept_pod_group: bool = False) -> str | None:
    """None when the pod controls the claim (or, with ``accept_pod_group``, the pod's
    PodGroup does), else kube's error (IsForPod)."""
    meta = claim.get("metadata") or {}
    ns, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
    if ns != pod.namespace:
        return (
            f"ResourceClaim {ns}/{name} is not in the same namespace as Pod {pod.namespace}/"
            f"{pod.name}"
        )
    refs = [r for r in meta.get("ownerReferences") or () if isinstance(r, Mapping)]
    for ref in refs:
        if ref.get("controller") and ref.get("uid") == pod.uid:
            return None
    group = pod_group_name(pod) if accept_pod_group else None
    if group is not None:
        if any(ref.get("controller") and is_pod_group_ref(ref, pod) for ref in refs):
            return None
        return (
            f"ResourceClaim {ns}/{name} was not created for Pod {pod.namespace}/{pod.name} "
            f"(neither Pod nor PodGroup {group} is the owner)"
        )
    return f"ResourceClaim {ns}/{name} was not created for Pod {pod.namespace}/{pod.name} (Pod is not owner)"


def is_reserved_for(pod: Pod, claim: Obj, accept_pod_group: bool = False) -> bool:
    """kube's IsReservedForPod: the pod, or with ``accept_pod_group`` its PodGroup, is in
    ``status.reservedFor``."""
    reserved = (claim.get("status") or {}).get("reservedFor") or ()
    return any(
        isinstance(r, Mapping)
        and (r.get("uid") == pod.uid or (accept_pod_group and is_pod_group_ref(r, pod)))
        for r in reserved
    )


def _quantity(q: Fraction) -> str:
    if q.denominator == 1:
        return str(q.numerator)
    milli = q * 1000
    if milli.denominator == 1:
        return f"{milli.numerator}m"
    return str(float(q))


def allocation_dict(a: AllocationResult) -> dict[str, Any]:
    """``status.allocation`` for an allocation (empty fields omitted, as the API does)."""
    results: list[dict[str, Any]] = []
    for r in a.devices:
        d: dict[str, Any] = {
            "request": r.request,
            "driver": r.driver,
            "pool": r.pool,
            "device": r.device,
        }
        if r.admin_access is not None:
            d["adminAccess"] = r.admin_access
        if r.tolerations:
            d["tolerations"] = [
                {
                    k: v
                    for k, v in (
                        ("key", t.key),
                        ("operator", t.operator),
                        ("value", t.value),
                        ("effect", t.effect),
                    )
                    if v
                }
                for t in r.tolerations
            ]
        if r.binding_conditions:
            d["bindingConditions"] = list(r.binding_conditions)
        if r.binding_failure_conditions:
            d["bindingFailureConditions"] = list(r.binding_failure_conditions)
        if r.share_id is not None:
            d["shareID"] = r.share_id
        if r.consumed_capacity:
            d["consumedCapacity"] = {k: _quantity(v) for k, v in r.consumed_capacity.items()}
        results.append(d)
    devices: dict[str, Any] = {"results": results}
    if a.config:
        devices["config"] = [dict(c) for c in a.config]
    out: dict[str, Any] = {"devices": devices}
    if a.node_selector is not None:
        out["nodeSelector"] = a.node_selector
    return out


def claim_id(claim: ResourceClaim) -> str:
    """In-flight allocations are keyed by uid (by ``namespace/name`` for a claim without)."""
    return claim.uid or claim.key


def claim_key(raw: Obj) -> str:
    meta = raw.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
