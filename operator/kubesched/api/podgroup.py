"""PodGroup (``kubesched.dev/v1alpha1``, namespaced): a gang of pods bound all-or-nothing.

Pods join a group with the label ``kubesched.dev/pod-group: <name>`` (or, for migration
from scheduler-plugins, ``scheduling.x-k8s.io/pod-group``) in the group's namespace.
These models are the single source of truth for the CRD schema
(``python -m kubesched.api.crdgen``) and for validating PodGroups in scenarios.

The status the operator writes (:func:`kubesched.operator.gang_status.podgroup_status`)
has the shape of :class:`PodGroupStatus`: a phase readable at a glance, member counts, a
KEP-1623 ``PodGroupScheduled`` condition and a message naming what blocks the gang.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator

from kubesched.api.meta import Condition, Model
from kubesched.framework.quantity import QuantityError, parse_quantity

__all__ = [
    "API_VERSION",
    "CONDITION_SCHEDULED",
    "GROUP",
    "KIND",
    "POD_GROUP_LABEL",
    "SCHEDULER_PLUGINS_POD_GROUP_LABEL",
    "Condition",
    "MemberCounts",
    "Phase",
    "PodGroup",
    "PodGroupSpec",
    "PodGroupStatus",
    "ScheduledReason",
    "SchedulingConstraints",
    "TopologyConstraint",
    "parse_spec",
    "pod_group_name",
    "validation_message",
]

GROUP = "kubesched.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "PodGroup"

POD_GROUP_LABEL = "kubesched.dev/pod-group"
"""The label that makes a pod a member of the PodGroup it names (same namespace)."""
SCHEDULER_PLUGINS_POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
"""scheduler-plugins' label, honoured for migration; ours wins when both are set."""

CONDITION_SCHEDULED = "PodGroupScheduled"


def pod_group_name(labels: Mapping[str, str]) -> str | None:
    """The PodGroup a pod's labels name (ours first, then scheduler-plugins'), or None."""
    name = labels.get(POD_GROUP_LABEL) or labels.get(SCHEDULER_PLUGINS_POD_GROUP_LABEL)
    return name or None


class Phase(enum.StrEnum):
    PENDING = "Pending"
    """Fewer than minMember member pods exist, or the gang has not been tried yet."""
    SCHEDULING = "Scheduling"
    """Some members hold nodes, fewer than minMember (reserved, or left after a member of
    a placed gang was deleted)."""
    SCHEDULED = "Scheduled"
    """At least minMember members are bound to nodes."""
    RUNNING = "Running"
    """At least minMember members run (or have finished)."""
    SUCCEEDED = "Succeeded"
    """At least minMember members succeeded and none is left running or pending."""
    FAILED = "Failed"
    """A member failed, so the gang can no longer complete with minMember members."""


class ScheduledReason(enum.StrEnum):
    SCHEDULED = "Scheduled"
    UNSCHEDULABLE = "Unschedulable"
    TIMEOUT = "Timeout"
    WAITING = "WaitingForMembers"
    BELOW_MINIMUM = "BelowMinimum"
    """Once placed, fewer than minMember members are left on nodes (deleted, evicted):
    the replacements are gathered and scheduled as a group again."""


def _is_quantity(text: str) -> bool:
    try:
        parse_quantity(text)
    except QuantityError:
        return False
    return True


def _check_quantities(v: dict[str, int | str] | None) -> dict[str, int | str] | None:
    for name, q in (v or {}).items():
        if isinstance(q, bool) or (isinstance(q, str) and not _is_quantity(q)):
            raise ValueError(f"{name}: not a quantity: {q!r}")
        if isinstance(q, int) and q < 0:
            raise ValueError(f"{name}: must not be negative: {q}")
    return v


class TopologyConstraint(Model):
    key: str = Field(min_length=1, max_length=316)
    """A node label (zone, rack, block, ...): the gang's members in one domain of it."""
    mode: Literal["Required", "Preferred"] = "Required"
    """Required: all members in one domain, or none placed. Preferred: one domain if
    any holds the gang, else spread over as few as possible."""


class SchedulingConstraints(Model):
    topology: list[TopologyConstraint] = Field(default_factory=list, max_length=1)
    """At most one constraint (as Kubernetes' scheduling.k8s.io/v1beta1 PodGroup)."""


class PodGroupSpec(Model):
    min_member: int = Field(default=1, ge=1, alias="minMember")
    """How many member pods must be placed together; none is bound before they all fit."""
    min_resources: dict[str, int | str] | None = Field(default=None, alias="minResources")
    """Resources the gang needs in total (informational: shown in status, not enforced;
    the scheduler places the members' own requests, all together, instead)."""
    schedule_timeout_seconds: int | None = Field(default=None, gt=0, alias="scheduleTimeoutSeconds")
    """Accepted (scheduler-plugins has it), unused: members are placed together in one
    cycle, so none waits at Permit for its siblings."""

    scheduling_constraints: SchedulingConstraints | None = Field(
        default=None, alias="schedulingConstraints"
    )
    """The gang's topology, shaped as Kubernetes' PodGroup ``schedulingConstraints``
    (``topology[].key``) plus ``mode``: every member in one domain of that node label,
    chosen by score (Required: or none placed; Preferred: else as few domains as possible)."""

    _quantities = field_validator("min_resources")(_check_quantities)


class MemberCounts(Model):
    """Member pods by state (a pod counts once, in its most advanced state)."""

    pending: int = Field(default=0, ge=0)
    """Not bound and not waiting at Permit."""
    waiting: int = Field(default=0, ge=0)
    """Reserved on a node, waiting at Permit for the rest of the gang."""
    bound: int = Field(default=0, ge=0)
    """Bound to a node, not running yet."""
    running: int = Field(default=0, ge=0)
    succeeded: int = Field(default=0, ge=0)
    failed: int = Field(default=0, ge=0)


class PodGroupStatus(Model):
    phase: Phase = Phase.PENDING
    """Pending, Scheduling, Scheduled, Running, Succeeded or Failed."""
    conditions: list[Condition] = Field(
        default_factory=list,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    """KEP-1623 conditions, one per type: PodGroupScheduled."""
    observed_generation: int | None = Field(default=None, ge=0, alias="observedGeneration")
    counts: MemberCounts = Field(default_factory=MemberCounts)
    schedule_start_time: str | None = Field(
        default=None, alias="scheduleStartTime", json_schema_extra={"format": "date-time"}
    )
    """When the scheduler first tried a member of this gang."""
    message: str = ""
    """What blocks the gang, e.g. "3/8 members fit; 5 pods: Insufficient nvidia.com/gpu"."""


class PodGroup(Model):
    """A gang of pods scheduled all-or-nothing."""

    api_version: Literal["kubesched.dev/v1alpha1"] = Field(alias="apiVersion")
    kind: Literal["PodGroup"]
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: PodGroupSpec = Field(default_factory=PodGroupSpec)
    status: PodGroupStatus | None = None


def validation_message(err: ValidationError, prefix: str = "") -> str:
    """The first error as ``field.path: message`` (aliases, list indices as ``[i]``)."""
    e = err.errors()[0]
    path = prefix
    for part in e["loc"]:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    msg = str(e["msg"]).removeprefix("Value error, ")
    return f"{path}: {msg}" if path else msg


def parse_spec(obj: Mapping[str, Any]) -> PodGroupSpec:
    """The spec of a PodGroup dict (raises ``pydantic.ValidationError``)."""
    return PodGroupSpec.model_validate(obj.get("spec") or {})
