"""PodTopologySpreadArgs: kube-scheduler's field names, defaults and validation."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from kubesched.api import field_docstrings
from kubesched.plugins.pod_topology_spread.constraints import (
    DO_NOT_SCHEDULE,
    HOSTNAME,
    SCHEDULE_ANYWAY,
    ZONE,
)

__all__ = ["SYSTEM_DEFAULT_CONSTRAINTS", "Args", "DefaultConstraint", "DefaultingType"]

_MODEL_CONFIG = ConfigDict(
    extra="forbid",
    populate_by_name=True,
    use_attribute_docstrings=field_docstrings(),
    defer_build=True,
)

_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)


def _label_name_error(v: str) -> str | None:
    """apimachinery's qualified-name check for label keys; the error, or None."""
    prefix, _, name = v.rpartition("/")
    if "/" in name or v.count("/") > 1:
        return "a qualified name must consist of an optional DNS subdomain prefix and a name"
    if "/" in v and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
        return "prefix part must be a lowercase RFC 1123 subdomain"
    if not name or len(name) > 63 or not _NAME.match(name):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must "
            "start and end with an alphanumeric character (at most 63 characters)"
        )
    return None


class DefaultingType(StrEnum):
    SYSTEM = "System"
    LIST = "List"


class DefaultConstraint(BaseModel):
    """A v1.TopologySpreadConstraint without a selector (it is deduced per pod)."""

    model_config = _MODEL_CONFIG

    max_skew: int = Field(default=0, alias="maxSkew", validate_default=True)
    """Greater than zero."""
    topology_key: str = Field(default="", alias="topologyKey", validate_default=True)
    """A node label key."""
    when_unsatisfiable: str = Field(default="", alias="whenUnsatisfiable", validate_default=True)
    """DoNotSchedule (Filter) or ScheduleAnyway (Score)."""
    label_selector: dict[str, Any] | None = Field(default=None, alias="labelSelector")
    """Forbidden: the selector comes from the pod's Services and controller."""
    min_domains: int | None = Field(default=None, alias="minDomains")
    node_affinity_policy: str | None = Field(default=None, alias="nodeAffinityPolicy")
    node_taints_policy: str | None = Field(default=None, alias="nodeTaintsPolicy")
    match_label_keys: list[str] | None = Field(default=None, alias="matchLabelKeys")

    @field_validator("max_skew")
    @classmethod
    def _positive(cls, v: int) -> int:
        if v <= 0:
            raise ValueError(f"Invalid value: {v}: not in valid range (0, inf)")
        return v

    @field_validator("topology_key")
    @classmethod
    def _key(cls, v: str) -> str:
        if not v:
            raise ValueError("Required value: can not be empty")
        err = _label_name_error(v)
        if err is not None:
            raise ValueError(f"Invalid value: {v!r}: {err}")
        return v

    @field_validator("when_unsatisfiable")
    @classmethod
    def _action(cls, v: str) -> str:
        if not v:
            raise ValueError("Required value: can not be empty")
        if v not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            raise ValueError(
                f'Unsupported value: "{v}": supported values: "{DO_NOT_SCHEDULE}", "{SCHEDULE_ANYWAY}"'
            )
        return v

    @field_validator("label_selector")
    @classmethod
    def _no_selector(cls, v: dict[str, Any] | None) -> None:
        if v is not None:
            raise ValueError(
                "Forbidden: constraint must not define a selector, as they deduced for each pod"
            )
        return None

    def as_raw(self) -> dict[str, Any]:
        """The constraint as it would appear in a pod spec."""
        return self.model_dump(by_alias=True, exclude_none=True)


SYSTEM_DEFAULT_CONSTRAINTS: tuple[dict[str, Any], ...] = (
    {"maxSkew": 3, "topologyKey": HOSTNAME, "whenUnsatisfiable": SCHEDULE_ANYWAY},
    {"maxSkew": 5, "topologyKey": ZONE, "whenUnsatisfiable": SCHEDULE_ANYWAY},
)
"""kube-scheduler's system defaults: soft spreading over hostnames and zones."""


class Args(BaseModel):
    """PodTopologySpreadArgs."""

    model_config = _MODEL_CONFIG

    default_constraints: list[DefaultConstraint] = Field(
        default_factory=list, alias="defaultConstraints"
    )
    """Constraints for pods that declare none and are selected by a Service or owned by a
    ReplicationController, ReplicaSet or StatefulSet; only with defaultingType List."""
    defaulting_type: DefaultingType = Field(default=DefaultingType.SYSTEM, alias="defaultingType")
    """System (the default): kube's built-in constraints (hostname maxSkew 3 and zone
    maxSkew 5, both ScheduleAnyway); List: ``defaultConstraints``."""

    @model_validator(mode="after")
    def _consistent(self) -> Args:
        if self.defaulting_type is DefaultingType.SYSTEM and self.default_constraints:
            raise ValueError(
                'defaultingType: Invalid value: "System": when .defaultConstraints are not empty'
            )
        seen: set[tuple[str, str]] = set()
        for i, c in enumerate(self.default_constraints):
            k = (c.topology_key, c.when_unsatisfiable)
            if k in seen:
                raise ValueError(
                    f"defaultConstraints[{i}]: Duplicate value: "
                    f'"{{{c.topology_key}, {c.when_unsatisfiable}}}"'
                )
            seen.add(k)
        return self

    def constraints(self) -> tuple[list[dict[str, Any]], bool]:
        """(default constraints as raw dicts, whether they are the system defaults)."""
        if self.defaulting_type is DefaultingType.SYSTEM:
            return [dict(c) for c in SYSTEM_DEFAULT_CONSTRAINTS], True
        return [c.as_raw() for c in self.default_constraints], False
