"""DeviceTaintRules (resource.k8s.io/v1, GA and on by default in Kubernetes 1.37).

A rule puts one taint on every device its selector picks: ``driver``, ``pool`` and
``device`` are each optional and must all match (an empty selector picks every device,
a rule without ``deviceSelector`` picks none). kube-scheduler never allocates from the
ResourceSlices as stored: its slice tracker hands the allocator copies with each
matching rule's taint appended to the device's own taints, in the rules' listing
order. The allocator then treats both alike (``NoSchedule`` and ``NoExecute`` keep a
device from every request that does not tolerate them; ``None`` is informational).

``patch_slices`` does the same for our allocator. A patched slice is a new
``ResourceSlice`` whose untouched devices are the original objects and whose tainted
ones are copies sharing the original's CEL outcomes (a selector does not read taints),
so a rule costs nothing on the pods that follow it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubesched.framework.dra.types import (
    DeviceTaint,
    ResourceSlice,
    _map,
    _str,
    parse_taint,
)
from kubesched.framework.types import ObjectError

__all__ = ["EFFECTS", "DeviceTaintRule", "patch_slice", "patch_slices", "rule_taints_devices"]

EFFECTS = ("None", "NoSchedule", "NoExecute")


@dataclass(frozen=True, slots=True)
class DeviceTaintRule:
    name: str
    taint: DeviceTaint
    selects: bool = True
    """False when the rule has no ``deviceSelector`` (it then taints nothing)."""
    driver: str | None = None
    pool: str | None = None
    device: str | None = None

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> DeviceTaintRule:
        meta = _map(raw.get("metadata"), "metadata")
        name = _str(meta.get("name"), "metadata.name", required=True)
        spec = _map(raw.get("spec"), "spec")
        if spec.get("taint") is None:
            raise ObjectError("spec.taint: required")
        taint = parse_taint(spec.get("taint"), "spec.taint", rule=name)
        if taint.effect not in EFFECTS:
            raise ObjectError(
                f'spec.taint.effect: Unsupported value: "{taint.effect}": supported values: '
                + ", ".join(f'"{e}"' for e in EFFECTS)
            )
        sel = spec.get("deviceSelector")
        if sel is None:
            return cls(name, taint, selects=False)
        sm = _map(sel, "spec.deviceSelector")
        return cls(
            name,
            taint,
            driver=_opt(sm.get("driver"), "spec.deviceSelector.driver"),
            pool=_opt(sm.get("pool"), "spec.deviceSelector.pool"),
            device=_opt(sm.get("device"), "spec.deviceSelector.device"),
        )

    def applies_to_slice(self, s: ResourceSlice) -> bool:
        return (
            self.selects
            and (self.driver is None or self.driver == s.driver)
            and (self.pool is None or self.pool == s.pool)
        )

    def taints_any(self, raw_slices: Iterable[Mapping[str, Any]]) -> bool:
        """Whether the rule taints at least one device of these stored ResourceSlices
        (read as stored: malformed parts simply do not match)."""
        if not self.selects:
            return False
        for raw in raw_slices:
            spec = raw.get("spec")
            if not isinstance(spec, Mapping):
                continue
            pool = spec.get("pool")
            pool_name = pool.get("name") if isinstance(pool, Mapping) else None
            if self.driver is not None and spec.get("driver") != self.driver:
                continue
            if self.pool is not None and pool_name != self.pool:
                continue
            devices = spec.get("devices")
            if not isinstance(devices, list):
                continue
            if any(
                isinstance(d, Mapping) and (self.device is None or d.get("name") == self.device)
                for d in devices
            ):
                return True
        return False


def rule_taints_devices(
    raw_slices: Iterable[Mapping[str, Any]], *raw_rules: Mapping[str, Any] | None
) -> bool:
    """Whether any of these stored rules (malformed ones ignored) taints a device of
    ``raw_slices``: kube-scheduler's slice tracker reports a ResourceSlice update (which
    requeues pods DynamicResources rejected) only for slices whose devices a rule's
    addition, change or removal re-taints."""
    slices = list(raw_slices)
    for raw in raw_rules:
        if raw is None:
            continue
        try:
            rule = DeviceTaintRule.from_dict(raw)
        except ObjectError:
            continue
        if rule.taints_any(slices):
            return True
    return False


def _opt(d: object, f: str) -> str | None:
    if d is None:
        return None
    if not isinstance(d, str):
        raise ObjectError(f"{f}: expected a string")
    return d


def patch_slice(s: ResourceSlice, rules: Sequence[DeviceTaintRule]) -> ResourceSlice:
    """``s`` with the taints of ``rules`` (all applying to it) on their devices."""
    devices = list(s.devices)
    changed = False
    for i, dev in enumerate(devices):
        extra = tuple(r.taint for r in rules if r.device is None or r.device == dev.name)
        if extra:
            devices[i] = dataclasses.replace(dev, taints=(*dev.taints, *extra))
            changed = True
    return dataclasses.replace(s, devices=devices) if changed else s


def patch_slices(
    slices: Sequence[ResourceSlice], rules: Sequence[DeviceTaintRule]
) -> list[ResourceSlice]:
    """The slices as the allocator sees them: every matching rule's taint added."""
    if not rules:
        return list(slices)
    out = []
    for s in slices:
        mine = [r for r in rules if r.applies_to_slice(s)]
        out.append(patch_slice(s, mine) if mine else s)
    return out
