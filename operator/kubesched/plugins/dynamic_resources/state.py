"""What DynamicResources keeps in a pod's CycleState from PreFilter to PreBind, and the
key it keeps it under (the plugin's :data:`NAME`, here so that :mod:`.plugin` and
:mod:`.writes` both read it)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubesched.framework.cycle_state import StateKey
from kubesched.framework.labels import NodeSelector

if TYPE_CHECKING:  # the DRA machinery is imported on first use (see .machinery)
    from kubesched.framework.dra import AllocationResult, Allocator, ResourceClaim
    from kubesched.plugins.dynamic_resources.extended import ExtendedClaim
    from kubesched.plugins.dynamic_resources.tracker import Obj

__all__ = ["NAME", "STATE_KEY", "ClaimInfo", "StateData"]

NAME = "DynamicResources"


@dataclass(slots=True)
class ClaimInfo:
    raw: Obj
    claim: ResourceClaim
    available_on: NodeSelector | None = None
    binding: dict[str, Any] = field(default_factory=dict)
    """Who ``status.reservedFor`` names for this pod: the pod, or its PodGroup."""
    shared: AllocationResult | None = None
    """A sibling's in-flight allocation of this PodGroup claim, reused as is."""


@dataclass(slots=True)
class StateData:
    claims: list[ClaimInfo] = field(default_factory=list)
    to_allocate: list[int] = field(default_factory=list)
    """Indexes of the claims without an allocation."""
    allocator: Allocator | None = None
    allocating: list[ResourceClaim] = field(default_factory=list)
    """The claims at ``to_allocate``, as Filter hands them to the allocator."""
    available_on: list[tuple[int, NodeSelector]] = field(default_factory=list)
    """The allocated claims (by index) and the nodes their allocation is available on."""
    by_node: dict[str, Callable[[], list[AllocationResult]]] = field(default_factory=dict)
    """Per feasible node, how to build its allocation results (built for one or two
    nodes: Score's with firstAvailable requests, Reserve's)."""
    built: dict[str, list[AllocationResult]] = field(default_factory=dict)

    def prepare_filter(self) -> None:
        """What Filter reads on every node, worked out once (PreFilter's end)."""
        self.available_on = [
            (i, info.available_on)
            for i, info in enumerate(self.claims)
            if info.available_on is not None
        ]
        self.allocating = [self.claims[i].claim for i in self.to_allocate]

    def results_for(self, node: str) -> list[AllocationResult] | None:
        got = self.built.get(node)
        if got is None:
            make = self.by_node.get(node)
            if make is None:
                return None
            got = self.built[node] = make()
        return got

    extended: ExtendedClaim | None = None
    """The implicit claim of the pod's extended resources backed by DRA (:mod:`.extended`)."""
    unavailable: set[int] = field(default_factory=set)
    reserved: dict[int, AllocationResult] = field(default_factory=dict)
    """The allocations Reserve made in-flight, by claim index."""


STATE_KEY: StateKey[StateData] = StateKey(NAME)
