"""An allocation result's configuration and node selector (structured allocator,
incubating)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubesched.framework.dra.types import (
    AllocationResult,
    Device,
    DeviceClass,
    DeviceResult,
    ResourceClaim,
    ResourceSlice,
)

__all__ = ["NodeSelectorError", "allocation_result", "local_to_node", "node_selector_for"]


class NodeSelectorError(Exception):
    pass


def local_to_node(s: ResourceSlice, dev: Device) -> bool:
    """Whether the device is on the node itself (or binds to it): the allocation's node
    selector is then that node, whatever else the claim got."""
    return bool(
        (dev.node_name if s.per_device_node_selection else s.node_name) or dev.binds_to_node
    )


def node_selector_for(
    picked: Sequence[tuple[DeviceResult, ResourceSlice, Device]], node_name: str, claim_name: str
) -> dict[str, Any] | None:
    """The allocation's node selector: the node itself if a device is local to it or
    binds to it, else the slices' selector requirements merged into one term, else None."""
    exprs: list[Any] = []
    fields: list[Any] = []
    for _, s, dev in picked:
        sel = dev.node_selector_raw if s.per_device_node_selection else s.node_selector_raw
        if local_to_node(s, dev):
            return {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {
                                "key": "metadata.name",
                                "operator": "In",
                                "values": [node_name],
                            }
                        ]
                    }
                ]
            }
        terms = list((sel or {}).get("nodeSelectorTerms") or [])
        if len(terms) > 1:
            raise NodeSelectorError(
                f"create NodeSelector for claim {claim_name}: "
                f"unsupported ResourceSlice.NodeSelector with {len(terms)} terms"
            )
        if terms:
            for src, dst in (
                (terms[0].get("matchFields"), fields),
                (terms[0].get("matchExpressions"), exprs),
            ):
                for req in src or []:
                    if not any(_same_requirement(req, x) for x in dst):
                        dst.append(req)
    if not fields and not exprs:
        return None
    term: dict[str, Any] = {}
    if exprs:
        term["matchExpressions"] = exprs
    if fields:
        term["matchFields"] = fields
    return {"nodeSelectorTerms": [term]}


def _same_requirement(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return (
        a.get("key") == b.get("key")
        and a.get("operator") == b.get("operator")
        and set(a.get("values") or ()) == set(b.get("values") or ())
    )


def allocation_result(
    claim: ResourceClaim,
    chosen: Sequence[tuple[DeviceClass, str]],
    devices: list[DeviceResult],
    node_selector: dict[str, Any] | None,
) -> AllocationResult:
    """The claim's result: its devices, the configuration of the classes used (one entry
    per class, naming the requests served by it) and of the claim (entries naming a
    request or subrequest that was chosen), ``requests`` dropped from an entry that names
    every request. ``chosen[i]``: request ``i``'s class and full name (``req/sub`` for the
    ``firstAvailable`` subrequest picked)."""
    config: list[dict[str, Any]] = []
    class_ranges: dict[str, tuple[int, int]] = {}
    for cls, full_name in chosen:
        rng = class_ranges.get(cls.name)
        if rng is not None:
            for i in range(*rng):
                config[i]["requests"].append(full_name)
            continue
        n0 = len(config)
        for c in cls.config:
            config.append({"source": "FromClass", "requests": [full_name], **_device_config(c)})
        class_ranges[cls.name] = (n0, len(config))
    names = {r.name for r in claim.requests} | {full for _, full in chosen}
    for c in claim.config:
        wanted = list(c.get("requests") or [])
        if not wanted or names & set(wanted):
            config.append({"source": "FromClaim", "requests": wanted, **_device_config(c)})
    for c in config:
        if c["requests"] and all(
            r.name in c["requests"] or (r.exactly is None and full in c["requests"])
            for r, (_, full) in zip(claim.requests, chosen, strict=True)
        ):
            c["requests"] = []
    for c in config:
        if not c["requests"]:
            del c["requests"]
    return AllocationResult(devices, config, node_selector)


def _device_config(c: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in c.items() if k != "requests"}
