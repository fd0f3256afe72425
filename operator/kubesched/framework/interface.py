"""The extension points: one small Protocol each, as in kube-scheduler's framework.

A plugin is any object with a ``name`` and the methods of the extension points it
implements. The profile compiler checks membership by these protocols, so a plugin
configured at a point it does not implement is refused with a clear message.

Filter and Score plugins that are pure functions of node resources or labels may also
implement the *vector* variants (:class:`VectorFilterPlugin`, :class:`VectorScorePlugin`,
and :class:`VectorDiagnosePlugin` for the reasons of a failed cycle): they compute the
same answer for every node at once over the snapshot's arrays. The scalar method stays
the source of truth for messages and per-node checks (preemption, nominated pods);
tests pin the two to agree.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.nodeinfo import NodeInfo, QueuedPodInfo
from kubesched.framework.status import Status
from kubesched.framework.types import Pod

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from kubesched.framework.cluster_port import ClusterPort, ObjectStore
    from kubesched.framework.snapshot import Snapshot

__all__ = [
    "MAX_NODE_SCORE",
    "ActionType",
    "BindPlugin",
    "ClusterEvent",
    "EnqueueExtensions",
    "EventResource",
    "FilterAsIf",
    "FilterAsIfPlugin",
    "FilterPlugin",
    "Handle",
    "PermitPlugin",
    "Plugin",
    "PostBindPlugin",
    "PostFilterPlugin",
    "PostFilterResult",
    "PreBindPlugin",
    "PreEnqueuePlugin",
    "PreFilterExtensions",
    "PreFilterPlugin",
    "PreFilterResult",
    "PreScorePlugin",
    "QueueSortPlugin",
    "QueueingHintFn",
    "ReservePlugin",
    "ScorePlugin",
    "SortKey",
    "VectorDiagnosePlugin",
    "VectorFilterPlugin",
    "VectorScorePlugin",
    "WaitingPod",
]

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0


# -- cluster events (what requeues unschedulable pods) -------------------------------------
class EventResource(enum.StrEnum):
    POD = "Pod"
    """A pod, assigned or not (kube-scheduler narrows with AssignedPod/UnscheduledPod)."""
    ASSIGNED_POD = "AssignedPod"
    UNSCHEDULED_POD = "UnscheduledPod"
    NODE = "Node"
    PVC = "PersistentVolumeClaim"
    PV = "PersistentVolume"
    STORAGE_CLASS = "StorageClass"
    CSI_NODE = "CSINode"
    CSI_DRIVER = "CSIDriver"
    CSI_STORAGE_CAPACITY = "CSIStorageCapacity"
    VOLUME_ATTACHMENT = "VolumeAttachment"
    POD_GROUP = "PodGroup"
    RESOURCE_CLAIM = "ResourceClaim"
    RESOURCE_SLICE = "ResourceSlice"
    DEVICE_CLASS = "DeviceClass"
    WILDCARD = "*"


class ActionType(enum.IntFlag):
    ADD = 1
    DELETE = 2
    UPDATE_NODE_ALLOCATABLE = 4
    UPDATE_NODE_LABEL = 8
    UPDATE_NODE_TAINT = 16
    UPDATE_NODE_CONDITION = 32
    UPDATE_NODE_ANNOTATION = 64
    UPDATE_POD_LABEL = 128
    UPDATE_POD_SCALE_DOWN = 256
    UPDATE_POD_TOLERATIONS = 512
    UPDATE_POD_SCHEDULING_GATES_ELIMINATED = 1024
    UPDATE_POD_GENERATED_RESOURCE_CLAIM = 2048
    UPDATE_OTHER = 4096
    """Any other update (objects without finer update kinds)."""
    UPDATE_NODE_DECLARED_FEATURE = 8192
    """A node's ``status.declaredFeatures`` changed (kube-scheduler v1.35+)."""

    UPDATE = (
        UPDATE_NODE_ALLOCATABLE
        | UPDATE_NODE_LABEL
        | UPDATE_NODE_TAINT
        | UPDATE_NODE_CONDITION
        | UPDATE_NODE_ANNOTATION
        | UPDATE_POD_LABEL
        | UPDATE_POD_SCALE_DOWN
        | UPDATE_POD_TOLERATIONS
        | UPDATE_POD_SCHEDULING_GATES_ELIMINATED
        | UPDATE_POD_GENERATED_RESOURCE_CLAIM
        | UPDATE_OTHER
        | UPDATE_NODE_DECLARED_FEATURE
    )
    ALL = ADD | DELETE | UPDATE


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    resource: EventResource
    action: ActionType
    label: str = ""

    def matches(self, registered: ClusterEvent) -> bool:
        """Whether an incoming event (self) is covered by a registered interest."""
        r = registered.resource
        # A registration for Pod covers assigned and unscheduled pods alike.
        covered = (
            r is EventResource.WILDCARD
            or r == self.resource
            or (
                r is EventResource.POD
                and self.resource in (EventResource.ASSIGNED_POD, EventResource.UNSCHEDULED_POD)
            )
        )
        return covered and bool(self.action & registered.action)


class QueueingHintFn(Protocol):
    """A queueing hint: whether a cluster event may make ``pod`` schedulable (True: requeue
    it). ``old``/``new`` are the object before and after (None on add/delete): a
    :class:`Pod`, a :class:`Node`, or the raw mapping of other kinds. A hint narrows them
    itself; one that raises counts as True."""

    def __call__(self, pod: Pod, old: object, new: object, /) -> bool: ...


@dataclass(frozen=True, slots=True)
class ClusterEventWithHint:
    event: ClusterEvent
    hint: QueueingHintFn | None = None
    ungates: bool = True
    """Whether the event may let a pod this plugin holds at PreEnqueue pass. False: it
    matters only to pods the plugin rejected in a cycle (e.g. a node added may give a
    gang room, but never makes its missing members exist), and the queue does not walk
    the pods the plugin gates on it."""


# -- results ----------------------------------------------------------------------------------
@dataclass(slots=True)
class PreFilterResult:
    """Narrows the nodes Filter considers; ``None`` node_names means all nodes."""

    node_names: set[str] | None = None

    def merge(self, other: PreFilterResult | None) -> PreFilterResult:
        if other is None or other.node_names is None:
            return self
        if self.node_names is None:
            return PreFilterResult(set(other.node_names))
        return PreFilterResult(self.node_names & other.node_names)


@dataclass(slots=True)
class PostFilterResult:
    nominated_node_name: str = ""
    """Where the pod should go once victims are gone (empty: nothing nominated)."""


# -- waiting pods (Permit) ------------------------------------------------------------------
class WaitingPod(Protocol):
    @property
    def pod(self) -> Pod: ...

    @property
    def node_name(self) -> str: ...

    def pending_plugins(self) -> list[str]: ...

    def allow(self, plugin: str) -> None: ...

    def reject(self, plugin: str, message: str) -> None: ...

    def preempt(self, plugin: str, message: str) -> None:
        """Stop waiting because preemption evicts the pod (kube's ``Preempt``): not a
        rejection but an error, so the pod is tried again without being marked
        unschedulable."""
        ...


class PreBinding(Protocol):
    """A pod in PreBind (kube's PodInPreBind)."""

    def cancel(self, message: str) -> bool:
        """Cancel its binding in memory (True), unless PreBind is over."""
        ...


# -- the handle given to plugin factories -----------------------------------------------------
class Handle(Protocol):
    """What a plugin may use of the scheduler around it."""

    @property
    def snapshot(self) -> Snapshot:
        """The snapshot of the current scheduling cycle."""
        ...

    @property
    def cluster(self) -> ClusterPort:
        """Writes to the cluster (bind, events, status, deletes)."""
        ...

    @property
    def store(self) -> ObjectStore:
        """Read-only access to watched objects other than pods and nodes."""
        ...

    @property
    def profile_name(self) -> str: ...

    def now(self) -> float:
        """The event loop's clock (virtual in tests)."""
        ...

    def get_waiting_pod(self, uid: str) -> WaitingPod | None: ...

    def iterate_waiting_pods(self) -> Iterable[WaitingPod]: ...

    def reject_waiting_pod(self, uid: str, plugin: str, message: str) -> bool: ...

    def get_pod_in_pre_bind(self, uid: str) -> PreBinding | None: ...

    def activate(self, pods: Iterable[Pod]) -> None:
        """Move these pods (if queued and not gated) to activeQ now."""
        ...

    def nominated_pods_for_node(self, node_name: str) -> list[Pod]: ...

    def get_pod(self, uid: str) -> Pod | None:
        """The latest version of a pod the scheduler knows (unscheduled, assumed or
        bound); None once it is deleted."""
        ...

    def observe_preemption_victims(self, count: int) -> None:
        """A PostFilter chose this many victims for one preemptor (kube-scheduler's
        ``scheduler_preemption_victims`` histogram)."""
        ...

    def run_pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None, list[str]]:
        """The profile's PreFilter plugins for ``pod`` (a what-if: e.g. a gang's dry run)."""
        ...

    def run_filter_plugins_with_nominated_pods(
        self, state: CycleState, pod: Pod, node_info: NodeInfo
    ) -> Status | None: ...

    def add_nominated_pods(
        self, state: CycleState, pod: Pod, node_info: NodeInfo
    ) -> tuple[bool, CycleState, NodeInfo, Status | None]:
        """Clones with the pods nominated to the node at ``pod``'s priority or above added
        (True), or the originals (False: none, or an AddPod failed, and its failure is
        the Error in the last place): the first of kube-scheduler's two Filter passes."""
        ...

    def run_filter(
        self,
        state: CycleState,
        pod: Pod,
        node_info: NodeInfo,
        skip: Collection[str] | None = None,
    ) -> Status | None:
        """The Filter plugins alone on one node (no nominated pods added): for callers that
        keep their own view with the nominated pods, like preemption's dry run. ``skip``:
        the plugins not to run (default: those PreFilter said to skip)."""
        ...

    def filter_rejects_as_if(
        self, state: CycleState, pod: Pod, node_info: NodeInfo, removed: Sequence[Pod]
    ) -> bool:
        """True when Filter on ``node_info`` with ``removed`` (pods on it) taken off and the
        pods nominated there at ``pod``'s priority or above put on rejects ``pod`` for
        certain (a Filter plugin's :meth:`FilterAsIfPlugin.filter_as_if`); False
        when no plugin can tell. Costs no copy of the node: preemption asks it before
        its dry run."""
        ...

    def skip_with_node_filters(self, state: CycleState) -> frozenset[str]:
        """PreFilter's skip set and the ``filter_reads_node_only`` Filter plugins: once the
        whole Filter passed on a node, ``skip`` of :meth:`run_filter` on that node whatever
        pods are added to or removed from it (a plugin that passed is never the first to
        fail, and these answer alike whatever the node holds)."""
        ...

    def run_pre_filter_extension_add_pod(
        self, state: CycleState, pod: Pod, pod_to_add: Pod, node_info: NodeInfo
    ) -> Status | None: ...

    def run_pre_filter_extension_remove_pod(
        self, state: CycleState, pod: Pod, pod_to_remove: Pod, node_info: NodeInfo
    ) -> Status | None: ...


# -- extension points -------------------------------------------------------------------------
class Plugin(Protocol):
    """What every plugin has; a plugin factory returns one."""

    name: str


SortKey = tuple[float | str, ...]
"""A QueueSort key: numbers and strings compared in order (smaller first)."""


@runtime_checkable
class PreEnqueuePlugin(Protocol):
    name: str

    def pre_enqueue(self, pod: Pod) -> Status | None: ...


@runtime_checkable
class QueueSortPlugin(Protocol):
    name: str

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool: ...

    def sort_key(self, qpi: QueuedPodInfo) -> SortKey:
        """A key ordering like ``less`` (smaller first); a fast path for the heap."""
        ...


@runtime_checkable
class EnqueueExtensions(Protocol):
    def events_to_register(self) -> list[ClusterEventWithHint]: ...


@runtime_checkable
class PreFilterExtensions(Protocol):
    def add_pod(
        self, state: CycleState, pod: Pod, pod_to_add: Pod, node_info: NodeInfo
    ) -> Status | None: ...

    def remove_pod(
        self, state: CycleState, pod: Pod, pod_to_remove: Pod, node_info: NodeInfo
    ) -> Status | None: ...


@runtime_checkable
class PreFilterPlugin(Protocol):
    name: str

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]: ...

    def pre_filter_extensions(self) -> PreFilterExtensions | None: ...


@runtime_checkable
class FilterPlugin(Protocol):
    """A plugin whose ``filter`` reads only the Node object, the pod and what its own
    PreFilter wrote (not the node's pods, requests, ports or volumes, nor what PreFilter
    extensions change) may say so with a class attribute ``filter_reads_node_only =
    True``: a preemption dry run then stops asking it on a node, after each victim it
    removes or gives back, once it passed there (:meth:`Handle.skip_with_node_filters`)."""

    name: str

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None: ...


FilterAsIf = Callable[[CycleState, Pod, NodeInfo, Sequence[Pod], Sequence[Pod]], "Status | None"]
"""``filter_as_if(state, pod, node_info, removed, added)`` of a :class:`FilterAsIfPlugin`."""


@runtime_checkable
class FilterAsIfPlugin(Protocol):
    """A Filter plugin that can say, from a node's figures alone, what its ``filter``
    returns on a copy of the node with some of its pods taken off and others put on
    (every PreFilter extension's RemovePod/AddPod run on the copy too): that Status when
    it rejects the pod, None when it passes or cannot tell without the copy. Preemption
    skips the dry run of a node it rejects (no copy, no Filter calls) while other nodes
    give it candidates; Filter's first pass on a node with nominated pods takes its
    answer when it is the first plugin to run there."""

    name: str

    def filter_as_if(
        self,
        state: CycleState,
        pod: Pod,
        node_info: NodeInfo,
        removed: Sequence[Pod],
        added: Sequence[Pod],
    ) -> Status | None: ...


@runtime_checkable
class VectorFilterPlugin(Protocol):
    name: str

    def filter_mask(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> npt.NDArray[np.bool_] | None:
        """True where ``filter`` would pass, for every node of the snapshot in order.
        ``None``: the plugin cannot say for this pod; the framework calls ``filter``."""
        ...


@runtime_checkable
class VectorDiagnosePlugin(Protocol):
    name: str

    def filter_statuses(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: npt.NDArray[np.intp]
    ) -> Sequence[Status | None] | None:
        """What ``filter`` returns on each of the snapshot rows ``rows`` (None where the
        node passes), equal to calling it node by node; nodes with the same reasons may
        share one Status. Called when no node fits, to say why each failed (the
        diagnosis of every node a failed cycle examined); ``None``: the framework calls
        ``filter`` on each row."""
        ...


@runtime_checkable
class PostFilterPlugin(Protocol):
    name: str

    def post_filter(
        self, state: CycleState, pod: Pod, statuses: dict[str, Status]
    ) -> tuple[PostFilterResult | None, Status | None]: ...


@runtime_checkable
class PreScorePlugin(Protocol):
    name: str

    def pre_score(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> Status | None: ...


@runtime_checkable
class ScorePlugin(Protocol):
    name: str

    def score(
        self, state: CycleState, pod: Pod, node_info: NodeInfo
    ) -> tuple[int, Status | None]: ...

    def normalize_score(
        self, state: CycleState, pod: Pod, scores: npt.NDArray[np.int64]
    ) -> Status | None:
        """Rescale ``scores`` (one per feasible node, in place) to 0..100.
        Plugins whose raw scores are already 0..100 return None without change."""
        ...


@runtime_checkable
class VectorScorePlugin(Protocol):
    name: str

    def score_vector(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.int64] | None:
        """Scores for the snapshot rows ``rows``, equal to ``score`` on each node.
        ``None``: fall back to ``score``."""
        ...


@runtime_checkable
class ReservePlugin(Protocol):
    name: str

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None: ...

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None: ...


@runtime_checkable
class PermitPlugin(Protocol):
    name: str

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status | None, float]:
        """Success (None), Wait with a timeout in seconds, or a rejection."""
        ...


@runtime_checkable
class PreBindPlugin(Protocol):
    name: str

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None: ...


@runtime_checkable
class PreBindPreFlightPlugin(Protocol):
    """kube's PreBindPreFlight: before the binding cycle waits at Permit, whether this
    plugin's PreBind will do something for the pod (None), nothing (Skip), or an Error.
    A PreBind plugin without it is taken to have work."""

    name: str

    def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str) -> Status | None: ...


@runtime_checkable
class BindPlugin(Protocol):
    name: str

    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None: ...


@runtime_checkable
class PostBindPlugin(Protocol):
    name: str

    def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None: ...


EXTENSION_POINTS: dict[str, type] = {
    "preEnqueue": PreEnqueuePlugin,
    "queueSort": QueueSortPlugin,
    "preFilter": PreFilterPlugin,
    "filter": FilterPlugin,
    "postFilter": PostFilterPlugin,
    "preScore": PreScorePlugin,
    "score": ScorePlugin,
    "reserve": ReservePlugin,
    "permit": PermitPlugin,
    "preBind": PreBindPlugin,
    "bind": BindPlugin,
    "postBind": PostBindPlugin,
}
"""Extension point names as in KubeSchedulerConfiguration, with their protocols."""


@dataclass(slots=True)
class Diagnosis:
    """Why a pod found no node: per-node statuses and the plugins that rejected it."""

    node_to_status: dict[str, Status] = field(default_factory=dict)
    unschedulable_plugins: set[str] = field(default_factory=set)
    pending_plugins: set[str] = field(default_factory=set)
    pre_filter_msg: str = ""
    post_filter_msg: str = ""
