"""Coscheduling: gangs declared by PodGroups are bound all-or-nothing.

A pod is a member of the PodGroup its ``spec.schedulingGroup.podGroupName`` names
(Kubernetes' ``scheduling.k8s.io`` PodGroup), else its ``kubesched.dev/pod-group`` label
(ours), else scheduler-plugins' ``scheduling.x-k8s.io/pod-group`` label, in its namespace
(:mod:`kubesched.api.gangs`: precedence, keys, the one gang model of the three APIs). The
group is read from the object store. Pods naming no gang pass every extension point at
the cost of three dict lookups.

- **QueueSort** orders by priority, then *the gang's time* (when the scheduler first
  saw the gang, or its last failure), then the gang's key, then the pod's name, so
  members of one gang come out of activeQ together. Pods outside gangs get exactly
  PrioritySort's order (priority, then queue time, then arrival). A profile has one
  QueueSort: kubesched's default profile enables this one instead of PrioritySort.
- **PreEnqueue** holds a member until ``minMember`` members exist (the member that
  completes the gang activates the others), and a pod whose PodGroup does not exist
  (with a ``FailedScheduling`` event saying so, once per pod).
- **The whole-group cycle** (:mod:`kubesched.scheduler.gang_cycle`) places the members
  of a gang below its minimum, all together, through the profile's full chain: it asks
  :meth:`Coscheduling.group_view` for the gang and marks each member's CycleState with a
  :class:`GroupMark`, so PreFilter passes (narrowed to the topology domain being tried)
  and Permit allows at once: no member waits at Permit holding a node while its
  siblings are placed. Outside such a cycle, PreFilter passes spare members of a gang
  that holds its minimum (narrowed to the gang's Required topology domain) and rejects
  the others.
- **Permit** allows a group-cycle member, and a spare member of a gang that holds
  ``minMember`` with it; it never holds a member (nothing waits at Permit for its
  siblings, so ``scheduleTimeoutSeconds`` and the plugin's timeouts no longer apply).
- **PodGroup deleted** (:meth:`Coscheduling.pod_group_deleted`, from the scheduler's
  event handlers): the parsed spec is forgotten and PreEnqueue holds the members until
  the group is created again (no member holds a node meanwhile).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from kubesched.api import field_docstrings
from kubesched.api.gangs import (
    GANG_STORE_KINDS,
    WORKLOAD_STORE_KIND,
    GangAPI,
    GangSpec,
    api_of,
    gang_key,
    parse_key,
    store_kind,
)
from kubesched.framework.cycle_state import CycleState, StateKey
from kubesched.framework.interface import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EnqueueExtensions,
    EventResource,
    Handle,
    PermitPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    QueueSortPlugin,
    ReservePlugin,
)
from kubesched.framework.nodeinfo import NodeInfo, QueuedPodInfo
from kubesched.framework.status import Code, OutsideFrameworkError, Status
from kubesched.framework.types import Node, Pod
from kubesched.plugins.coscheduling.consistency import group_mismatch
from kubesched.plugins.coscheduling.gangs import AssignedIndex, Gang, GangKeys

__all__ = [
    "GROUP_CYCLE_KEY",
    "NAME",
    "Args",
    "Coscheduling",
    "GangReport",
    "GroupMark",
    "GroupView",
    "members_message",
    "new",
]

NAME = "Coscheduling"

GROUP_CYCLE_KEY: StateKey[GroupMark] = StateKey("Coscheduling/group-cycle")
"""Written by the whole-group cycle in each member's CycleState (a :class:`GroupMark`)."""

log = logging.getLogger(__name__)


class Args(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        use_attribute_docstrings=field_docstrings(),
        defer_build=True,
    )

    permit_waiting_time_seconds: float = Field(default=60.0, gt=0, alias="permitWaitingTimeSeconds")
    """Accepted for scheduler-plugins' configurations, unused: members are placed
    together by the whole-group cycle and never wait at Permit for their siblings."""
    pod_group_backoff_seconds: float = Field(default=10.0, ge=0, alias="podGroupBackoffSeconds")
    """Accepted for scheduler-plugins' configurations, unused: a gang that does not fit
    backs off as a group with the profile's pod backoff (1 s doubling to 10 s)."""


@dataclass(frozen=True, slots=True)
class GroupMark:
    """A member is being placed by a whole-group cycle: PreFilter passes (narrowed to
    ``nodes``, the topology domain being tried, when set) and Permit allows."""

    nodes: frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class GroupView:
    """A gang below its minimum, as a whole-group cycle needs it."""

    key: str
    spec: GangSpec
    placed: frozenset[str]
    """Uids of members bound or assumed."""
    others: tuple[Pod, ...]
    """The other members that exist and are not placed (latest versions, by name)."""


@dataclass(frozen=True, slots=True)
class GangReport:
    """What the scheduler knows about a gang that the API server does not (for status)."""

    waiting_uids: frozenset[str]
    blocked: str
    timed_out: bool
    schedule_start: float | None
    error: bool = False
    """``blocked`` is a scheduler error (a Kubernetes PodGroup whose pods disagree:
    :mod:`.consistency`), not "does not fit": kube's reason ``SchedulerError``."""


class Coscheduling(
    PreEnqueuePlugin,
    QueueSortPlugin,
    PreFilterPlugin,
    PostFilterPlugin,
    ReservePlugin,
    PermitPlugin,
    EnqueueExtensions,
):
    name = NAME

    def __init__(self, args: Args, handle: Handle) -> None:
        self.args = args
        self._handle = handle
        self._gangs: dict[str, Gang] = {}
        self._keys = GangKeys(lambda: handle.store)
        self._key = self._keys.key
        self._index = AssignedIndex(self._keys)
        self._tasks: set[asyncio.Task[None]] = set()

    # -- gang state --------------------------------------------------------------------------
    def _now(self) -> float:
        try:
            return self._handle.now()
        except RuntimeError:  # no running loop (unit tests of pure parts)
            return 0.0

    def _gang(self, key: str, now: float | None = None) -> Gang:
        g = self._gangs.get(key)
        if g is None:
            g = self._gangs[key] = Gang(key, self._now() if now is None else now)
        return g

    def _spec(self, key: str) -> GangSpec | str | None:
        """The gang's spec, an error message if invalid, None if absent or being deleted."""
        return self._keys.spec(key)

    def _members(self, g: Gang) -> list[Pod]:
        """The gang's member pods that still exist (latest versions), by name."""
        out = []
        get = self._handle.get_pod
        for uid in list(g.candidates):
            p = get(uid)
            if p is None or self._key(p) != g.key:
                del g.candidates[uid]
                continue
            out.append(p)
        out.sort(key=lambda p: p.name)
        return out

    def _progress(self, g: Gang) -> set[str]:
        """Uids of members bound or assumed."""
        return set(self._index.members(self._handle.snapshot, g.key))

    def gang_key(self, pod: Pod) -> str | None:
        """The key of the pod's gang (``kubesched.api.gangs``), or None."""
        return self._key(pod)

    def report(
        self, namespace: str, name: str, api: GangAPI = GangAPI.KUBESCHED
    ) -> GangReport | None:
        """What the operator's status handler needs beyond the API server's view."""
        g = self._gangs.get(gang_key(api, namespace, name))
        if g is None:
            return None
        return GangReport(frozenset(), g.blocked, False, g.schedule_start, g.error)

    # -- QueueSort --------------------------------------------------------------------------
    def sort_key(self, qpi: QueuedPodInfo) -> tuple[int, float, str, str, int]:
        pod = qpi.pod
        key = self._key(pod)
        if key is None:
            return (-pod.priority, qpi.timestamp, "", "", qpi.seq)
        g = self._gangs.get(key)
        t = g.sort_time if g is not None else self._gang(key, qpi.timestamp).sort_time
        return (-pod.priority, t, key, pod.name, qpi.seq)

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return self.sort_key(a) < self.sort_key(b)

    # -- PreEnqueue -------------------------------------------------------------------------
    def pre_enqueue(self, pod: Pod) -> Status | None:
        key = self._key(pod)
        if key is None:
            return None
        g = self._gang(key)
        g.candidates[pod.uid] = None
        spec = self._spec(key)
        if spec is None:
            msg = f'pod group "{key}" does not exist; waiting for it to be created'
            self._report_missing(g, pod, msg)
            return Status.unresolvable(msg, plugin=NAME)
        if isinstance(spec, str):
            # Held back like a missing group; the member says why, once (an event).
            self._report_missing(g, pod, spec)
            return Status.unresolvable(spec, plugin=NAME)
        need = spec.min_member
        assigned = self._index.members(self._handle.snapshot, key)
        if len(g.candidates) + len(assigned) < need:
            g.released = False
            return Status.unresolvable(_gated_message(key, need), plugin=NAME)
        if g.released:
            # Counted when the gang was released; its members are being activated now
            # (re-counting for each would cost O(members^2)). The group cycle re-counts.
            return None
        members = self._members(g)
        exist = len({p.uid for p in members} | assigned)
        if exist < need:
            g.released = False
            return Status.unresolvable(_gated_message(key, need), plugin=NAME)
        # This member completes the gang: let the ones held back go too.
        g.released = True
        others = [p for p in members if p.uid != pod.uid]
        # Not from inside PreEnqueue: the queue may be iterating its gated pool.
        try:
            asyncio.get_running_loop().call_soon(self._handle.activate, others)
        except RuntimeError:
            self._handle.activate(others)
        return None

    def _report_missing(self, g: Gang, pod: Pod, msg: str) -> None:
        mark = f"{pod.uid}\n{msg}"  # once per member and message (missing, then invalid)
        if mark in g.not_found_reported:
            return
        g.not_found_reported.add(mark)
        self._spawn(self._event(pod, msg))

    async def _event(self, pod: Pod, msg: str) -> None:
        with contextlib.suppress(Exception):
            await self._handle.cluster.record_event(
                pod,
                event_type="Warning",
                reason="FailedScheduling",
                action="Scheduling",
                message=msg,
                reporting_controller=self._handle.profile_name,
            )

    def _spawn(self, coro: Any) -> None:
        try:
            task = asyncio.get_running_loop().create_task(coro)
        except RuntimeError:
            coro.close()
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- the whole-group cycle ---------------------------------------------------------
    def group_view(self, pod: Pod) -> GroupView | None:
        """The gang ``pod`` belongs to, for a whole-group scheduling cycle
        (:mod:`kubesched.scheduler.gang_cycle`): its spec, the members bound or assumed,
        and the other members that exist and are not placed. None when the pod is in no
        gang, its PodGroup is missing or invalid (PreFilter says why), or the gang
        already holds its minimum (a spare member, scheduled alone)."""
        key = self._key(pod)
        if key is None:
            return None
        spec = self._spec(key)
        if not isinstance(spec, GangSpec):
            return None
        g = self._gang(key)
        g.candidates[pod.uid] = None
        if g.schedule_start is None:
            g.schedule_start = self._now()
        placed = frozenset(self._index.members(self._handle.snapshot, key))
        if len(placed) >= spec.min_member:
            return None
        others = tuple(p for p in self._members(g) if p.uid not in placed and p.uid != pod.uid)
        return GroupView(key, spec, placed, others)

    def group_scheduled(self, key: str) -> None:
        """A group cycle placed the gang's minimum: nothing blocks it any more."""
        g = self._gang(key)
        g.blocked, g.error = "", False
        g.released = False  # members arriving later are counted again by PreEnqueue

    def group_failed(self, key: str, message: str, *, error: bool = False) -> None:
        """A group cycle could not place the gang (``error``: could not try it): say why
        (status, messages), and let the gang queue behind the pods that arrived since
        (QueueSort)."""
        self._gang(key).fail(self._now(), message, error=error)

    # -- PreFilter ---------------------------------------------------------------------------
    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        key = self._key(pod)
        if key is None:
            return None, None
        mark = state.get(GROUP_CYCLE_KEY)
        if isinstance(mark, GroupMark):
            # Placed by a whole-group cycle: restricted to the domain it is trying.
            return (None if mark.nodes is None else PreFilterResult(set(mark.nodes))), None
        spec = self._spec(key)
        if spec is None:
            return None, Status(
                Code.PENDING, f'pod group "{key}" does not exist; waiting for it to be created'
            )
        if isinstance(spec, str):
            return None, Status.unresolvable(spec)
        g = self._gang(key)
        g.candidates[pod.uid] = None
        progress = self._progress(g)
        if len(progress) >= spec.min_member:
            # The gang holds minMember: a spare member, in its gang's Required domain.
            if spec.api is GangAPI.UPSTREAM and (mismatch := self._mismatch(spec, pod, progress)):
                # kube-scheduler's validatePodGroup, not a plugin's error: its own words
                return None, Status.as_error(OutsideFrameworkError(mismatch))
            return self._held_domain(spec, progress), None
        # Members of a gang below its minimum are placed by the whole-group cycle only.
        return None, Status.unschedulable(_below_message(key, len(progress), spec.min_member))

    def _mismatch(self, spec: GangSpec, pod: Pod, placed: set[str]) -> str:
        """kube-scheduler's check of a Kubernetes PodGroup (:mod:`.consistency`) for a
        member scheduled alone: the pod, then one member on a node (those were checked
        together when the gang's minimum was placed, so one stands for all)."""
        on_node = self._handle.get_pod(min(placed))
        return group_mismatch(spec.priority, [pod], [] if on_node is None else [on_node])

    def _held_domain(self, spec: GangSpec, placed: set[str]) -> PreFilterResult | None:
        """The nodes of the Required topology domain(s) the placed members are in."""
        if not spec.topology or spec.topology[0].mode != "Required":
            return None
        label = spec.topology[0].key
        snap = self._handle.snapshot
        held: set[str] = set()
        for uid in placed:
            pod = self._handle.get_pod(uid)
            ni = None if pod is None or not pod.node_name else snap.get(pod.node_name)
            if ni is not None and ni.node is not None and label in ni.node.labels:
                held.add(ni.node.labels[label])
        return PreFilterResult(
            {
                ni.name
                for ni in snap.node_infos
                if ni.node is not None and ni.node.labels.get(label) in held
            }
        )

    def pre_filter_extensions(self) -> None:
        return None

    # -- PostFilter --------------------------------------------------------------------------
    def post_filter(
        self, state: CycleState, pod: Pod, statuses: dict[str, Status]
    ) -> tuple[PostFilterResult | None, Status | None]:
        # Nothing to release: no member ever waits at Permit for its siblings.
        return None, Status.unschedulable()

    def pod_group_deleted(self, namespace: str, name: str, kind: str = "PodGroup") -> int:
        """The PodGroup (of store kind ``kind``) is gone (called by the scheduler's event
        handlers): its parsed spec is forgotten, PreEnqueue holds its members until the
        group exists again, and gangs with nothing left are forgotten. No member holds a
        node meanwhile (none waits at Permit), so none is rejected: returns 0."""
        api = api_of(kind)
        if api is None:
            return 0
        key = gang_key(api, namespace, name)
        self._keys.forget(key)
        g = self._gangs.get(key)
        if g is not None:
            g.released = False
        self._prune()
        return 0

    def _prune(self) -> None:
        """Forget the gangs whose PodGroup is gone and whose member pods are all gone
        too: a long-running scheduler sees many short-lived gangs. A gang with pods left
        (pending, held by PreEnqueue until the group is back, or bound) keeps its state;
        it goes at a later PodGroup deletion once they are gone."""
        for key, g in list(self._gangs.items()):
            if self._spec(key) is not None or self._members(g):
                continue
            del self._gangs[key]
            self._keys.forget(key)

    # -- Reserve / Permit ---------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        return None

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status | None, float]:
        key = self._key(pod)
        if key is None:
            return None, 0.0
        spec = self._spec(key)
        if not isinstance(spec, GangSpec):
            # Gone (or made invalid) since PreFilter: never bind a member alone
            # (scheduler-plugins' Permit denies a pod whose PodGroup is not found).
            msg = f'pod group "{key}" does not exist' if spec is None else spec
            return Status.unschedulable(msg, plugin=NAME), 0.0
        if state.get(GROUP_CYCLE_KEY) is not None:
            return None, 0.0  # a whole-group cycle reserved the gang's minimum already
        progress = self._progress(self._gang(key))
        progress.add(pod.uid)
        if len(progress) >= spec.min_member:
            return None, 0.0  # a spare member of a gang that holds its minimum
        # Never held at Permit: members below the minimum are placed by the group cycle.
        return Status.unschedulable(
            _below_message(key, len(progress), spec.min_member), plugin=NAME
        ), 0.0

    # -- events ------------------------------------------------------------------------------
    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(EventResource.POD, ActionType.ADD), self._same_gang_pod
            ),
            ClusterEventWithHint(ClusterEvent(EventResource.POD, ActionType.DELETE)),
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.NODE,
                    ActionType.ADD
                    | ActionType.UPDATE_NODE_ALLOCATABLE
                    | ActionType.UPDATE_NODE_LABEL
                    | ActionType.UPDATE_NODE_TAINT,
                ),
                _is_node,
                # room for a gang the group cycle rejected; a gang held at PreEnqueue waits
                # for its group or its members, which no node brings (with thousands of
                # held members, every node of a start-up listing walked all of them)
                ungates=False,
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.POD_GROUP, ActionType.ADD | ActionType.UPDATE),
                self._own_pod_group,
            ),
        ]

    def _same_gang_pod(self, pod: Pod, old: object, new: object) -> bool:
        return isinstance(new, Pod) and self._key(new) == self._key(pod)

    def _own_pod_group(self, pod: Pod, old: object, new: object) -> bool:
        if not isinstance(new, Mapping):
            return True
        if isinstance(old, Mapping) and old.get("spec") == new.get("spec"):
            return False  # status or metadata only (e.g. the operator's status writes)
        kind = store_kind(str(new.get("apiVersion") or ""), str(new.get("kind") or ""))
        key = self._key(pod)
        if key is None:
            return False
        if kind == WORKLOAD_STORE_KIND:
            return parse_key(key)[0] is GangAPI.UPSTREAM
        if kind not in GANG_STORE_KINDS:
            return True
        meta = new.get("metadata") or {}
        ns, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
        # Same namespace and name in any API: a PodGroup appearing may re-resolve
        # scheduler-plugins' label (ours <-> theirs).
        return parse_key(key)[1:] == (ns, name)


def _gated_message(key: str, need: int) -> str:
    # No count: the message of a held pod is not refreshed as siblings arrive.
    pods = "1 member pod" if need == 1 else f"{need} member pods"
    return f'pod group "{key}" needs {pods}; waiting for the rest to be created'


def _below_message(key: str, placed: int, need: int) -> str:
    return (
        f'pod group "{key}": {placed}/{need} members placed; '
        "the others are scheduled together, as a group"
    )


def members_message(key: str, exist: int, need: int) -> str:
    return f'pod group "{key}": {exist}/{need} member pods exist; waiting for more'


def _is_node(pod: Pod, old: object, new: object) -> bool:
    return isinstance(new, Node) or new is None


def new(args: Args, handle: Handle) -> Coscheduling:
    return Coscheduling(args, handle)
