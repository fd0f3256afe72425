"""Scenario checks of the resource.k8s.io/v1 kinds (DynamicResources), as kube-apiserver
refuses them: the shapes the allocator reads (``kubesched.framework.dra.types``), CEL
selectors that do not compile, a device name twice in one slice, and pod claim entries
that name neither or both of a claim and a template.

The resourceclaim controller (claims from templates) is played by the memory cluster
(``kubesched.cluster.claim_controller``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubesched.framework.dra import DeviceClass, ResourceClaim, ResourceSlice
from kubesched.framework.dra.cel import CelCache
from kubesched.framework.dra.taint_rules import DeviceTaintRule
from kubesched.framework.types import ObjectError

__all__ = [
    "API_VERSION",
    "check_pod_claims",
    "validate_claim",
    "validate_claim_template",
    "validate_device_class",
    "validate_slice",
    "validate_taint_rule",
]

API_VERSION = "resource.k8s.io/v1"

_CEL = CelCache()


def _compile(expressions: Any, field: str) -> None:
    for i, expr in enumerate(expressions):
        err = _CEL.get(expr).error
        if err is not None:
            raise ObjectError(f"{field}[{i}].cel.expression: {err}")


def validate_device_class(obj: dict[str, Any]) -> None:
    cls = DeviceClass.from_dict(obj)
    _compile(cls.selectors, "spec.selectors")


def validate_slice(obj: dict[str, Any]) -> None:
    s = ResourceSlice.from_dict(obj)
    seen: set[str] = set()
    for i, d in enumerate(s.devices):
        if d.name in seen:
            raise ObjectError(f'spec.devices[{i}].name: Duplicate value: "{d.name}"')
        seen.add(d.name)


def validate_taint_rule(obj: dict[str, Any]) -> None:
    DeviceTaintRule.from_dict(obj)


def _check_claim(claim: ResourceClaim, prefix: str) -> None:
    for i, r in enumerate(claim.requests):
        f = f"{prefix}spec.devices.requests[{i}]"
        if r.exactly is not None:
            _compile(r.exactly.selectors, f"{f}.exactly.selectors")
        for j, sub in enumerate(r.first_available):
            _compile(sub.selectors, f"{f}.firstAvailable[{j}].selectors")


def validate_claim(obj: dict[str, Any]) -> None:
    _check_claim(ResourceClaim.from_dict(obj), "")


def validate_claim_template(obj: dict[str, Any]) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        raise ObjectError("spec: required")
    inner = spec.get("spec")
    if not isinstance(inner, Mapping):
        raise ObjectError("spec.spec: required")
    try:
        claim = ResourceClaim.from_dict({"metadata": obj.get("metadata"), "spec": inner})
    except ObjectError as e:
        raise ObjectError(f"spec.{e}") from None
    _check_claim(claim, "spec.")


def check_pod_claims(spec: Mapping[str, Any]) -> None:
    """``spec.resourceClaims``: each names a claim or a template (one of the two)."""
    entries = spec.get("resourceClaims") or []
    if not isinstance(entries, list):
        raise ObjectError("spec.resourceClaims: must be a list")
    names: set[str] = set()
    for i, e in enumerate(entries):
        f = f"spec.resourceClaims[{i}]"
        if not isinstance(e, Mapping):
            raise ObjectError(f"{f}: expected an object")
        name = e.get("name")
        if not isinstance(name, str) or not name:
            raise ObjectError(f"{f}.name: Required value")
        if name in names:
            raise ObjectError(f'{f}.name: Duplicate value: "{name}"')
        names.add(name)
        if bool(e.get("resourceClaimName")) == bool(e.get("resourceClaimTemplateName")):
            raise ObjectError(
                f"{f}: Invalid value: must specify one of: `resourceClaimName`, "
                "`resourceClaimTemplateName`"
            )
