"""What kube-controller-manager's resourceclaim controller (and the garbage collector) do
for the memory cluster, as pure functions over its dicts.

- A pod naming a ResourceClaimTemplate gets a claim generated from it, owned by the
  pod (controller reference, ``resource.kubernetes.io/pod-claim-name`` annotation), and
  ``status.resourceClaimStatuses`` names it. kube names it ``<pod>-<claim>-`` plus five
  random characters; here the suffix is derived from the pod's uid, so runs repeat.
  While the template is missing, no claim is made (the scheduler keeps the pod waiting:
  ``ResourceClaim not created yet``).
- When a pod is gone, it is removed from every claim's ``reservedFor``; a claim left
  reserved for nobody is deleted when the pod owned it (garbage collection) and
  otherwise deallocated (its ``status.allocation`` and finalizer removed).
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "POD_CLAIM_NAME_ANNOTATION",
    "claims_for_pod",
    "released_claims",
]

POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
FINALIZER = "resource.kubernetes.io/delete-protection"
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery's rand.String alphabet

Obj = Mapping[str, Any]


def _suffix(seed: str) -> str:
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:5])


def claims_for_pod(pod: dict[str, Any], templates: Mapping[str, Obj]) -> list[dict[str, Any]]:
    """Claims to create for ``pod`` (``templates``: by ``namespace/name``); records them
    in the pod's ``status.resourceClaimStatuses`` in place. Entries already recorded and
    templates that do not exist are left alone."""
    meta = pod.get("metadata") or {}
    ns = str(meta.get("namespace") or "default")
    pod_name, uid = str(meta.get("name") or ""), str(meta.get("uid") or "")
    status = pod.setdefault("status", {})
    statuses: list[dict[str, Any]] = list(status.get("resourceClaimStatuses") or [])
    known = {str(s.get("name")) for s in statuses if isinstance(s, Mapping)}
    created: list[dict[str, Any]] = []
    for entry in (pod.get("spec") or {}).get("resourceClaims") or ():
        if not isinstance(entry, Mapping) or not entry.get("resourceClaimTemplateName"):
            continue
        claim_name = str(entry.get("name") or "")
        if claim_name in known:
            continue
        template = templates.get(f"{ns}/{entry['resourceClaimTemplateName']}")
        if template is None:
            continue
        tspec = (template.get("spec") or {}) if isinstance(template, Mapping) else {}
        tmeta = tspec.get("metadata") or {}
        name = f"{pod_name}-{claim_name}-{_suffix(f'{uid}/{claim_name}')}"
        created.append(
            {
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
                            "apiVersion": "v1",
                            "kind": "Pod",
                            "name": pod_name,
                            "uid": uid,
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                },
                "spec": copy.deepcopy(dict(tspec.get("spec") or {})),
            }
        )
        statuses.append({"name": claim_name, "resourceClaimName": name})
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
