"""The kinds a scenario may hold and how each is checked (:data:`SUPPORTED_KINDS`).

Each :class:`KindSpec` names the apiVersions a kind is served as, whether it is
namespaced, and a validator that raises :class:`~kubesched.framework.types.ObjectError`
with the field path; :mod:`kubesched.simulator.scenario` adds file and document."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pydantic

from kubesched.api import gangs, podgroup
from kubesched.framework.types import Node, ObjectError, Pod
from kubesched.profile_status import validate_spec
from kubesched.profiles import ProfileError
from kubesched.simulator import (
    dra_kinds,
    limit_ranges,
    pod_checks,
    runtime_classes,
    storage_kinds,
)

__all__ = [
    "BUILTIN_PRIORITY_CLASSES",
    "HIGHEST_USER_DEFINABLE_PRIORITY",
    "PREEMPTION_POLICIES",
    "SUPPORTED_KINDS",
    "KindSpec",
    "validate_priority_class",
]

#: The largest priority a user-defined PriorityClass may have (kube's HighestUserDefinablePriority).
HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000

#: PriorityClasses every cluster has; pods may name them without defining them.
BUILTIN_PRIORITY_CLASSES: dict[str, int] = {
    "system-cluster-critical": 2_000_000_000,
    "system-node-critical": 2_000_001_000,
}

PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")

_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_PERCENT = re.compile(r"^[0-9]+%$")


@dataclass(frozen=True, slots=True)
class KindSpec:
    """How a supported kind is checked. ``validate`` raises ``ObjectError("field: why")``."""

    api_versions: tuple[str, ...]
    namespaced: bool
    validate: Callable[[dict[str, Any]], None]


# --- per-kind validation ---------------------------------------------------------------


def _validate_namespace(obj: dict[str, Any]) -> None:
    name = obj["metadata"]["name"]
    if len(name) > 63 or not _LABEL.match(name):
        raise ObjectError(
            f"metadata.name: invalid namespace name {name!r}: a lowercase RFC 1123 label "
            "(at most 63 characters: a-z, 0-9, '-')"
        )


def _validate_node(obj: dict[str, Any]) -> None:
    Node(obj)


def _validate_pod(obj: dict[str, Any]) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        raise ObjectError("spec: required")
    dra_kinds.check_pod_claims(spec)
    pod_checks.check_pod_spec(spec)
    Pod(obj)


def validate_priority_class(obj: dict[str, Any]) -> None:
    v = obj.get("value")
    if not isinstance(v, int) or isinstance(v, bool):
        raise ObjectError(f"value: required, an integer (got {v!r})")
    name = obj["metadata"]["name"]
    builtin = BUILTIN_PRIORITY_CLASSES.get(name)
    if builtin is not None:
        if v != builtin:
            raise ObjectError(f"value: the built-in class {name} has value {builtin}, got {v}")
    elif name.startswith("system-"):
        raise ObjectError("metadata.name: the prefix 'system-' is reserved")
    elif v > HIGHEST_USER_DEFINABLE_PRIORITY:
        raise ObjectError(
            f"value: at most {HIGHEST_USER_DEFINABLE_PRIORITY} for user-defined classes, got {v}"
        )
    gd = obj.get("globalDefault", False)
    if not isinstance(gd, bool):
        raise ObjectError(f"globalDefault: must be true or false, got {gd!r}")
    policy = obj.get("preemptionPolicy", "PreemptLowerPriority")
    if policy not in PREEMPTION_POLICIES:
        raise ObjectError(f"preemptionPolicy: must be one of {', '.join(PREEMPTION_POLICIES)}")


def _int_or_percent(v: Any, field: str) -> None:
    if isinstance(v, bool) or not (
        (isinstance(v, int) and v >= 0) or (isinstance(v, str) and _PERCENT.match(v))
    ):
        raise ObjectError(f"{field}: must be a non-negative integer or a percentage, got {v!r}")


def _validate_pdb(obj: dict[str, Any]) -> None:
    spec = obj.get("spec")
    if spec is None:
        spec = obj["spec"] = {}
    if not isinstance(spec, Mapping):
        raise ObjectError("spec: expected an object")
    if "minAvailable" in spec and "maxUnavailable" in spec:
        raise ObjectError("spec: minAvailable and maxUnavailable cannot both be set")
    for field in ("minAvailable", "maxUnavailable"):
        if field in spec:
            _int_or_percent(spec[field], f"spec.{field}")
    pod_checks.check_label_selector(spec.get("selector"), "spec.selector")


def _validate_map_selector(obj: dict[str, Any]) -> None:
    sel = (obj.get("spec") or {}).get("selector")
    if sel is not None and (
        not isinstance(sel, Mapping)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in sel.items())
    ):
        raise ObjectError("spec.selector: keys and values must be strings")


def _validate_workload(obj: dict[str, Any]) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        raise ObjectError("spec: required")
    pod_checks.check_label_selector(spec.get("selector"), "spec.selector")


def _validate_pod_group(obj: dict[str, Any]) -> None:
    """Any of the three PodGroup APIs (kubesched.api.gangs)."""
    if obj.get("apiVersion") == podgroup.API_VERSION:
        try:
            podgroup.PodGroup.model_validate(obj)
        except pydantic.ValidationError as e:
            raise ObjectError(podgroup.validation_message(e)) from None
        return
    try:
        gangs.validate(gangs.store_kind(str(obj["apiVersion"]), "PodGroup"), obj)
    except gangs.InvalidGang as e:
        raise ObjectError(str(e)) from None


def _validate_gang_workload(obj: dict[str, Any]) -> None:
    try:
        gangs.validate_workload(obj)
    except gangs.InvalidGang as e:
        raise ObjectError(str(e)) from None


def _validate_scheduling_profile(obj: dict[str, Any]) -> None:
    """Compiled as the operator would (``kubesched validate`` says the same)."""
    try:
        validate_spec(obj.get("spec"))
    except ProfileError as e:
        raise ObjectError(f"spec.{e.message}") from None


#: The kinds a scenario may contain.
SUPPORTED_KINDS: dict[str, KindSpec] = {
    "Namespace": KindSpec(("v1",), namespaced=False, validate=_validate_namespace),
    "Node": KindSpec(("v1",), namespaced=False, validate=_validate_node),
    "Pod": KindSpec(("v1",), namespaced=True, validate=_validate_pod),
    "PriorityClass": KindSpec(
        ("scheduling.k8s.io/v1",), namespaced=False, validate=validate_priority_class
    ),
    "PodDisruptionBudget": KindSpec(("policy/v1",), namespaced=True, validate=_validate_pdb),
    # Read by PodTopologySpread's default constraints (the selector of a pod's Services
    # and controller); the scheduler never schedules their pods itself.
    "Service": KindSpec(("v1",), namespaced=True, validate=_validate_map_selector),
    "ReplicationController": KindSpec(("v1",), namespaced=True, validate=_validate_map_selector),
    # ... and create their pods (kubesched.simulator.controllers), as on a cluster.
    "ReplicaSet": KindSpec(("apps/v1",), namespaced=True, validate=_validate_workload),
    "StatefulSet": KindSpec(("apps/v1",), namespaced=True, validate=_validate_workload),
    "Deployment": KindSpec(("apps/v1",), namespaced=True, validate=_validate_workload),
    "Job": KindSpec(("batch/v1",), namespaced=True, validate=_validate_workload),
    "DaemonSet": KindSpec(("apps/v1",), namespaced=True, validate=_validate_workload),
    # Read by the volume plugins (see kubesched.simulator.storage_kinds).
    "PersistentVolumeClaim": KindSpec(
        ("v1",), namespaced=True, validate=storage_kinds.validate_pvc
    ),
    "PersistentVolume": KindSpec(("v1",), namespaced=False, validate=storage_kinds.validate_pv),
    "StorageClass": KindSpec(
        ("storage.k8s.io/v1",), namespaced=False, validate=storage_kinds.validate_storage_class
    ),
    "CSINode": KindSpec(
        ("storage.k8s.io/v1",), namespaced=False, validate=storage_kinds.validate_csi_node
    ),
    "CSIDriver": KindSpec(
        ("storage.k8s.io/v1",), namespaced=False, validate=storage_kinds.validate_csi_driver
    ),
    "CSIStorageCapacity": KindSpec(
        ("storage.k8s.io/v1",),
        namespaced=True,
        validate=storage_kinds.validate_csi_storage_capacity,
    ),
    # Devices for DynamicResources (see kubesched.simulator.dra_kinds).
    "DeviceClass": KindSpec(
        (dra_kinds.API_VERSION,), namespaced=False, validate=dra_kinds.validate_device_class
    ),
    "ResourceSlice": KindSpec(
        (dra_kinds.API_VERSION,), namespaced=False, validate=dra_kinds.validate_slice
    ),
    "ResourceClaim": KindSpec(
        (dra_kinds.API_VERSION,), namespaced=True, validate=dra_kinds.validate_claim
    ),
    "ResourceClaimTemplate": KindSpec(
        (dra_kinds.API_VERSION,), namespaced=True, validate=dra_kinds.validate_claim_template
    ),
    "DeviceTaintRule": KindSpec(
        (dra_kinds.API_VERSION,), namespaced=False, validate=dra_kinds.validate_taint_rule
    ),
    # What LimitRanger admission writes into and checks of a pod in its namespace:
    # kubesched.simulator.limit_ranges.
    "LimitRange": KindSpec(("v1",), namespaced=True, validate=limit_ranges.validate_limit_range),
    # What RuntimeClass admission writes into a pod naming one (overhead, node selector,
    # tolerations): kubesched.simulator.runtime_classes.
    "RuntimeClass": KindSpec(
        (runtime_classes.API_VERSION,),
        namespaced=False,
        validate=runtime_classes.validate_runtime_class,
    ),
    # Profiles serve their spec.schedulerName; one named kubesched replaces the default.
    "SchedulingProfile": KindSpec(
        ("kubesched.dev/v1alpha1",), namespaced=False, validate=_validate_scheduling_profile
    ),
    # Gangs for Coscheduling: kubesched's PodGroup, Kubernetes' (with its Workload) and
    # scheduler-plugins' (kubesched.api.gangs maps the three onto one model).
    "PodGroup": KindSpec(
        tuple(a.value for a in gangs.GangAPI), namespaced=True, validate=_validate_pod_group
    ),
    "Workload": KindSpec(
        (gangs.GangAPI.UPSTREAM.value,), namespaced=True, validate=_validate_gang_workload
    ),
}
