"""What kubesched's API models share: their pydantic base, metav1.Condition, and the
wire formats of metav1.Time and metav1.MicroTime."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from kubesched.api import field_docstrings

__all__ = ["FINALIZER", "Condition", "Model", "micro_time", "rfc3339"]

FINALIZER = "kubesched.dev/finalizer"
"""Kopf's persistence finalizer (``operator/kopf_runner.py``), on every SchedulingProfile;
on kubesched.dev PodGroups too before 2026-11, when a Kopf timer wrote their status (the
leader takes it off those now: ``operator/podgroup_handlers.py``)."""


class Model(BaseModel):
    """The base of kubesched's own API models: unknown fields are refused (the CRDs are
    structural, so the API server prunes them; a scenario file with a typo is an error),
    fields are read by their JSON name or their Python name, and a field's docstring is its
    description in the CRD schema."""

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        use_attribute_docstrings=field_docstrings(),
        defer_build=True,
    )


class Condition(Model):
    """A KEP-1623 condition (metav1.Condition)."""

    type: str = Field(
        min_length=1,
        max_length=316,
        pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
    )
    status: Literal["True", "False", "Unknown"]
    observed_generation: int | None = Field(
        default=None, ge=0, le=2**53, alias="observedGeneration"
    )
    last_transition_time: str = Field(
        max_length=64, alias="lastTransitionTime", json_schema_extra={"format": "date-time"}
    )
    reason: str = Field(
        min_length=1, max_length=1024, pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
    )
    message: str = Field(max_length=32768)


def rfc3339(t: datetime) -> str:
    """A ``metav1.Time``: RFC 3339 in UTC, whole seconds (``2025-01-02T03:04:05Z``)."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(t: datetime) -> str:
    """A ``metav1.MicroTime``: RFC 3339 in UTC with exactly six fractional digits (the API
    server refuses fewer, which ``datetime.isoformat`` writes when they are zero)."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
