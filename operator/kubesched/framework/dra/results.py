"""The node selector of an allocation result (structured allocator, incubating)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubesched.framework.dra.types import Device, DeviceResult, ResourceSlice

__all__ = ["NodeSelectorError", "local_to_node", "node_selector_for"]


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
