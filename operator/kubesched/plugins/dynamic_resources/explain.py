"""Why DynamicResources rejected a node, claim by claim and request by request, for
``kubesched explain`` (kube-scheduler says only ``cannot allocate all claims``).

For each claim to allocate: alone on the node it may fit (then the claims only fail
together); otherwise each request is tried alone and, for one that fails, the node's
devices are counted by what excludes them: in use, not selected by the class or the
request's selectors, a taint not tolerated (each such taint named, with the
DeviceTaintRule that put it there if one did). A request that fits alone points to the
claim's constraints. This reads the allocator's inputs; it changes nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from kubesched.framework.dra import AllocationError, Allocator, NodeAllocationError
from kubesched.framework.dra.cel import CelRuntimeError
from kubesched.framework.dra.pools import NodeLike, node_matches
from kubesched.framework.dra.state import taint_prevents
from kubesched.framework.dra.types import DeviceTaint, ExactRequest, ResourceClaim

__all__ = ["explain_node"]


def _fails(allocator: Allocator, node: NodeLike, claims: Sequence[ResourceClaim]) -> bool:
    try:
        return allocator.allocate(node, claims) is None
    except (AllocationError, NodeAllocationError):
        return True


def _request_detail(
    allocator: Allocator, node: NodeLike, claim: ResourceClaim, req: ExactRequest, label: str
) -> str:
    cls = allocator.classes.get(req.device_class_name)
    if cls is None:
        return f"claim {claim.key}, request {label}: device class {req.device_class_name} not found"
    total = in_use = unselected = tainted = 0
    untolerated: dict[str, None] = {}
    for s in allocator.all_slices:
        if not (
            s.per_device_node_selection
            or node_matches(node, s.node_name, s.all_nodes, s.node_selector)
        ):
            continue
        for dev in s.devices:
            if s.per_device_node_selection and not node_matches(
                node, dev.node_name, dev.all_nodes, dev.node_selector
            ):
                continue
            total += 1
            try:
                selected = all(
                    allocator.cel.get(e).error is None
                    and allocator.cel.get(e).matches(dev, s.driver)
                    for e in (*cls.selectors, *req.selectors)
                )
            except CelRuntimeError:
                selected = False
            if not selected:
                unselected += 1
            elif allocator.state.is_allocated((s.driver, s.pool, dev.name)):
                in_use += 1
            elif taint_prevents(dev, req):
                tainted += 1
                for t in dev.taints:
                    if t.effect in ("NoSchedule", "NoExecute") and not any(
                        tl.tolerates(t) for tl in req.tolerations
                    ):
                        untolerated[_describe(t)] = None
    free = total - in_use - unselected - tainted
    want = "all" if req.allocation_mode == "All" else str(req.count)
    taints = f" ({', '.join(untolerated)})" if untolerated else ""
    return (
        f"claim {claim.key}, request {label}: wants {want} of class {cls.name}; the node has "
        f"{total} device(s): {unselected} not selected, {in_use} in use, {tainted} with a "
        f"taint not tolerated{taints}, {free} free"
    )


def _describe(t: DeviceTaint) -> str:
    """``key=value:Effect`` as kubectl writes taints, and the rule that added it."""
    text = f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"
    return f"{text} from DeviceTaintRule {t.rule}" if t.rule else text


def explain_node(
    allocator: Allocator, node: NodeLike, claims: Sequence[ResourceClaim]
) -> list[str]:
    """Lines saying which claim or request this node cannot satisfy, and why."""
    lines: list[str] = []
    for claim in claims:
        if not _fails(allocator, node, [claim]):
            continue
        found = False
        for r in claim.requests:
            subs = (
                [(r.name, r.exactly)]
                if r.exactly is not None
                else [(f"{r.name}/{s.name}", s) for s in r.first_available]
            )
            alone = dataclasses.replace(claim, requests=(r,), constraints=())
            if _fails(allocator, node, [alone]):
                found = True
                lines.extend(
                    _request_detail(allocator, node, claim, ex, label) for label, ex in subs
                )
        if not found:
            lines.append(
                f"claim {claim.key}: its requests fit one by one but not together "
                "(constraints or too few devices for all of them)"
            )
    if not lines and len(claims) > 1:
        lines.append("each claim fits alone, but the node has too few devices for all of them")
    return lines
