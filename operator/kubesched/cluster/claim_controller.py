"""What kube-controller-manager's resourceclaim controller (and the garbage collector) do
for the memory cluster, as pure functions over its dicts.

- A pod naming a ResourceClaimTemplate gets a claim generated from it, owned by the
  pod (controller reference, ``resource.kubernetes.io/pod-claim-name`` annotation), and
  ``status.resourceClaimStatuses`` names it. kube names it ``<pod>-<claim>-`` plus five
  random characters; here the suffix is derived from the pod's uid, so runs repeat.
  While the template is missing, no claim is made (the scheduler keeps the pod waiting:
  ``ResourceClaim not created yet``).
- A ``scheduling.k8s.io`` PodGroup's ``spec.resourceClaims`` naming a template get one
  claim each, owned by the PodGroup and named in its ``status.resourceClaimStatuses``;
  a member pod whose claim matches the PodGroup's gets that claim's name in its own
  status instead of a claim of its own (DRAWorkloadResourceClaims).
- When a pod (or PodGroup) is gone, it is removed from every claim's ``reservedFor``; a
  claim left reserved for nobody is deleted when it owned it (garbage collection) and
  otherwise deallocated (its ``status.allocation`` and finalizer removed).
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from kubesched.plugins.dynamic_resources.pod_group import matching_claim

__all__ = [
    "POD_CLAIM_NAME_ANNOTATION",
    "claims_for_pod",
    "claims_for_pod_group",
    "generated_suffix",
    "released_claims",
]

POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
FINALIZER = "resource.kubernetes.io/delete-protection"
POD_GROUP_API = "scheduling.k8s.io/v1beta1"
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery's rand.String alphabet

Obj = Mapping[str, Any]


def generated_suffix(seed: str) -> str:
    """Five characters of kube's random-name alphabet, derived from ``seed``."""
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:5])


def _generated_claim(
    owner: Obj, owner_api: str, owner_kind: str, claim_name: str, template: Obj
) -> dict[str, Any]:
    """The claim the controller makes from ``template`` for ``owner`` (a pod or a
    PodGroup): ``<owner>-<claim>-<suffix>``, controlled by the owner."""
    meta = owner.get("metadata") or {}
    ns = str(meta.get("namespace") or "default")
    owner_name, uid = str(meta.get("name") or ""), str(meta.get("uid") or "")
    tspec = (template.get("spec") or {}) if isinstance(template, Mapping) else {}
    tmeta = tspec.get("metadata") or {}
    name = f"{owner_name}-{claim_name}-{generated_suffix(f'{uid}/{claim_name}')}"
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": f"{uid}-{claim_name}" if uid else name,
            "labels": dict(tmeta.get("labels") or {}),
            "annotations": {
                **(tmeta.get("annotations") or {}),
                POD_CLAIM_NAME_ANNOTATION: claim_name,
            },
            "ownerReferences": [
                {
                    "apiVersion": owner_api,
                    "kind": owner_kind,
                    "name": owner_name,
                    "uid": uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": copy.deepcopy(dict(tspec.get("spec") or {})),
    }


def _recorded(obj: Obj) -> dict[str, str | None]:
    """``status.resourceClaimStatuses`` as ``{claim: generated name or None}``."""
    out: dict[str, str | None] = {}
    for st in (obj.get("status") or {}).get("resourceClaimStatuses") or ():
        if isinstance(st, Mapping):
            got = st.get("resourceClaimName")
            out[str(st.get("name"))] = str(got) if got else None
    return out


def claims_for_pod(
    pod: dict[str, Any], templates: Mapping[str, Obj], pod_group: Obj | None = None
) -> list[dict[str, Any]]:
    """Claims to create for ``pod`` (``templates``: by ``namespace/name``); records them
    in the pod's ``status.resourceClaimStatuses`` in place. Entries already recorded and
    templates that do not exist are left alone. An entry matching a claim of the pod's
    PodGroup (``pod_group``, when its ``spec.resourceClaims`` is set) gets no claim of
    its own: the pod's status names the PodGroup's generated claim once
    :func:`claims_for_pod_group` made it (until then the pod waits)."""
    ns = str((pod.get("metadata") or {}).get("namespace") or "default")
    status = pod.setdefault("status", {})
    statuses: list[dict[str, Any]] = list(status.get("resourceClaimStatuses") or [])
    known = set(_recorded(pod))
    group_claims = {} if pod_group is None else _recorded(pod_group)
    created: list[dict[str, Any]] = []
    recorded = False
    for entry in (pod.get("spec") or {}).get("resourceClaims") or ():
        if not isinstance(entry, Mapping) or not entry.get("resourceClaimTemplateName"):
            continue
        claim_name = str(entry.get("name") or "")
        if claim_name in known:
            continue
        if matching_claim(pod_group, entry) is not None:
            shared = group_claims.get(claim_name)
            if shared:
                statuses.append({"name": claim_name, "resourceClaimName": shared})
                recorded = True
            continue
        template = templates.get(f"{ns}/{entry['resourceClaimTemplateName']}")
        if template is None:
            continue
        claim = _generated_claim(pod, "v1", "Pod", claim_name, template)
        created.append(claim)
        statuses.append({"name": claim_name, "resourceClaimName": claim["metadata"]["name"]})
        recorded = True
    if recorded:
        status["resourceClaimStatuses"] = statuses
    return created


def claims_for_pod_group(
    pod_group: dict[str, Any], templates: Mapping[str, Obj]
) -> list[dict[str, Any]]:
    """Claims to create for a ``scheduling.k8s.io`` PodGroup's ``spec.resourceClaims``
    naming a template (owned by the PodGroup, ``<podgroup>-<claim>-<suffix>``), recorded
    in its ``status.resourceClaimStatuses`` in place; as :func:`claims_for_pod`."""
    ns = str((pod_group.get("metadata") or {}).get("namespace") or "default")
    status = pod_group.setdefault("status", {})
    statuses: list[dict[str, Any]] = list(status.get("resourceClaimStatuses") or [])
    known = set(_recorded(pod_group))
    created: list[dict[str, Any]] = []
    for entry in (pod_group.get("spec") or {}).get("resourceClaims") or ():
        if not isinstance(entry, Mapping) or not entry.get("resourceClaimTemplateName"):
            continue
        claim_name = str(entry.get("name") or "")
        template = templates.get(f"{ns}/{entry['resourceClaimTemplateName']}")
        if claim_name in known or template is None:
            continue
        claim = _generated_claim(pod_group, POD_GROUP_API, "PodGroup", claim_name, template)
        created.append(claim)
        statuses.append({"name": claim_name, "resourceClaimName": claim["metadata"]["name"]})
    if created:
        status["resourceClaimStatuses"] = statuses
    return created


def released_claims(pod_uid: str, claims: Iterable[Obj]) -> list[tuple[str, dict[str, Any] | None]]:
    """What becomes of the claims once the pod ``pod_uid`` is gone: ``(key, new claim)``
    for each changed claim, ``new`` None when the claim is deleted."""
    out: list[tuple[str, dict[str, Any] | None]] = []
    for claim in claims:
        meta = claim.get("metadata") or {}
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
        owned = any(
            isinstance(r, Mapping) and r.get("controller") and r.get("uid") == pod_uid
            for r in meta.get("ownerReferences") or ()
        )
        status = claim.get("status") or {}
        reserved = [r for r in status.get("reservedFor") or () if isinstance(r, Mapping)]
        kept = [r for r in reserved if r.get("uid") != pod_uid]
        if owned and not kept:
            out.append((key, None))
            continue
        if len(kept) == len(reserved):
            continue
        new = copy.deepcopy(dict(claim))
        new_status = new.setdefault("status", {})
        if kept:
            new_status["reservedFor"] = kept
        else:
            new_status.pop("reservedFor", None)
            new_status.pop("allocation", None)
            new_status.pop("devices", None)
            fins = [f for f in new["metadata"].get("finalizers") or () if f != FINALIZER]
            if fins:
                new["metadata"]["finalizers"] = fins
            else:
                new["metadata"].pop("finalizers", None)
        out.append((key, new))
    return out
