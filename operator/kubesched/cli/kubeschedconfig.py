"""A KubeSchedulerConfiguration's profiles as SchedulingProfiles.

A SchedulingProfile's spec has the fields of a KubeSchedulerConfiguration profile under
the same names (``schedulerName``, ``plugins``, ``pluginConfig``,
``percentageOfNodesToScore``), so a profile carries over as is, with these changes:
the configuration's top-level ``percentageOfNodesToScore`` fills a profile's unset one
(as kube-scheduler inherits it); ``podInitialBackoffSeconds`` and
``podMaxBackoffSeconds`` become ``spec.backoff``; the ``apiVersion``/``kind`` inside
plugin args are dropped (a SchedulingProfile's args are plain objects). The profile is
named after its schedulerName. What has no counterpart (extenders) is dropped with a
warning; the process settings (leader election, client connection, bind addresses,
parallelism) belong to ``kubesched run``'s flags and are ignored.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["KSC_API_VERSIONS", "KSC_KIND", "scheduling_profiles"]

KSC_KIND = "KubeSchedulerConfiguration"
KSC_API_VERSIONS = ("kubescheduler.config.k8s.io/v1",)
PROFILE_FIELDS = ("schedulerName", "plugins", "pluginConfig", "percentageOfNodesToScore")


def _name(scheduler_name: str) -> str:
    name = re.sub(r"[^a-z0-9.-]+", "-", scheduler_name.lower()).strip("-.")
    return name[:253] or "profile"


def scheduling_profiles(
    config: Mapping[str, Any],
) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """(SchedulingProfiles, errors, warnings); errors name the configuration's field."""
    errors: list[str] = []
    warnings: list[str] = []
    api_version = config.get("apiVersion")
    if api_version not in KSC_API_VERSIONS:
        errors.append(f"apiVersion: expected {' or '.join(KSC_API_VERSIONS)}, got {api_version!r}")
        return [], errors, warnings
    raw_profiles = config.get("profiles")
    if raw_profiles is None:
        # kube-scheduler then runs one profile, default-scheduler, with the defaults
        raw_profiles = [{}]
    if not isinstance(raw_profiles, list):
        errors.append("profiles: expected a list")
        return [], errors, warnings
    if config.get("extenders"):
        warnings.append("extenders: kubesched calls no scheduler extenders; dropped")
    backoff: dict[str, Any] = {}
    if "podInitialBackoffSeconds" in config:
        backoff["initialSeconds"] = config["podInitialBackoffSeconds"]
    if "podMaxBackoffSeconds" in config:
        backoff["maxSeconds"] = config["podMaxBackoffSeconds"]
    out: list[dict[str, Any]] = []
    for i, profile in enumerate(raw_profiles):
        if not isinstance(profile, Mapping):
            errors.append(f"profiles[{i}]: expected an object")
            continue
        unknown = sorted(set(profile) - set(PROFILE_FIELDS))
        if unknown:
            errors.append(f"profiles[{i}]: unknown field(s) {', '.join(unknown)}")
            continue
        spec: dict[str, Any] = {
            "schedulerName": profile.get("schedulerName") or "default-scheduler"
        }
        for key in ("plugins", "pluginConfig", "percentageOfNodesToScore"):
            if key in profile:
                spec[key] = profile[key]
        if "percentageOfNodesToScore" not in spec and "percentageOfNodesToScore" in config:
            spec["percentageOfNodesToScore"] = config["percentageOfNodesToScore"]
        if isinstance(spec.get("pluginConfig"), list):
            spec["pluginConfig"] = [_plain_args(pc) for pc in spec["pluginConfig"]]
        if backoff:
            spec["backoff"] = dict(backoff)
        out.append(
            {
                "apiVersion": "kubesched.dev/v1alpha1",
                "kind": "SchedulingProfile",
                "metadata": {"name": _name(str(spec["schedulerName"]))},
                "spec": spec,
            }
        )
    return out, errors, warnings


def _plain_args(pc: Any) -> Any:
    if not isinstance(pc, Mapping) or not isinstance(pc.get("args"), Mapping):
        return pc
    args = {k: v for k, v in pc["args"].items() if k not in ("apiVersion", "kind")}
    return {**pc, "args": args}
