"""NodeInfo: a node with the aggregates of the pods on it (requested resources, host
ports, pods with affinity, images), the PodJournal of a snapshot's pod placements, and
QueuedPodInfo, a pod's bookkeeping in the queue.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kubesched.framework.resources import Resource
from kubesched.framework.types import Node, Pod

__all__ = ["ImageState", "JournalEntry", "NodeInfo", "PodJournal", "QueuedPodInfo"]


def _swap_remove(pods: list[Pod], uid: str) -> Pod | None:
    """Remove the pod ``uid`` by moving the last pod into its place; the removed pod."""
    for i, p in enumerate(pods):
        if p.uid == uid:
            pods[i] = pods[-1]
            pods.pop()
            return p
    return None


JournalEntry = tuple["NodeInfo", Pod, int]
"""(node info, pod, +1 added / -1 removed)."""


class PodJournal:
    """Every pod added to or removed from the NodeInfos of one snapshot, in order.

    Plugins that keep per-topology-domain counts across cycles (InterPodAffinity) read
    the entries since their last cursor instead of rescanning every node. Positions are
    absolute: the oldest entries are dropped beyond :attr:`CAP`, and a reader whose
    cursor is older than :attr:`base` must recount from the nodes.
    """

    __slots__ = ("base", "entries")

    CAP = 4096
    """Entries kept: readers catch up every cycle (a few entries), and the entries hold
    deleted pods alive until dropped; a burst beyond this costs a reader one recount."""

    def __init__(self) -> None:
        self.base = 0
        self.entries: list[JournalEntry] = []

    @property
    def end(self) -> int:
        """The position after the last entry (a reader's cursor once caught up)."""
        return self.base + len(self.entries)

    def append(self, ni: NodeInfo, pod: Pod, sign: int) -> None:
        e = self.entries
        e.append((ni, pod, sign))
        if len(e) > self.CAP:
            drop = len(e) // 2
            del e[:drop]
            self.base += drop

    def since(self, cursor: int) -> list[JournalEntry] | None:
        """The entries from ``cursor`` on; None when some of them were dropped."""
        if cursor < self.base:
            return None
        return self.entries[cursor - self.base :]


@dataclass(slots=True)
class ImageState:
    size: int
    num_nodes: int


class NodeInfo:
    """A node and the pods assigned (or assumed) to it.

    ``generation`` grows on every change; the snapshot uses it to refresh only what
    changed since the last cycle. ``journal`` is the PodJournal of the snapshot whose row
    this is (a clone has none): pods added and removed are recorded there.
    """

    __slots__ = (
        "generation",
        "image_states",
        "index",
        "journal",
        "name",
        "node",
        "non_zero_requested",
        "pods",
        "pods_with_affinity",
        "pods_with_required_anti_affinity",
        "pvc_ref_counts",
        "requested",
        "used_ports",
    )

    def __init__(self, node: Node | None = None, name: str = "") -> None:
        self.node = node
        self.name = node.name if node is not None else name
        self.pods: list[Pod] = []
        self.pods_with_affinity: list[Pod] = []
        self.pods_with_required_anti_affinity: list[Pod] = []
        self.requested = Resource()
        self.non_zero_requested = Resource()
        self.used_ports: dict[tuple[str, str, int], int] = {}
        self.pvc_ref_counts: dict[str, int] = {}
        self.image_states: dict[str, ImageState] = {}
        self.generation = 0
        self.index = -1
        self.journal: PodJournal | None = None

    @property
    def allocatable(self) -> Resource:
        return self.node.allocatable if self.node is not None else Resource()

    def add_pod(self, pod: Pod) -> None:
        self.pods.append(pod)
        if pod.has_affinity():
            self.pods_with_affinity.append(pod)
        if pod.has_required_anti_affinity():
            self.pods_with_required_anti_affinity.append(pod)
        self._account(pod, 1)
        if self.journal is not None:
            self.journal.append(self, pod, 1)

    def remove_pod(self, pod: Pod) -> bool:
        # As kube's NodeInfo, the last pod takes the removed one's place: the order of
        # pods on a node decides which of equally important preemption victims goes.
        p = _swap_remove(self.pods, pod.uid)
        if p is None:
            return False
        _swap_remove(self.pods_with_affinity, pod.uid)
        _swap_remove(self.pods_with_required_anti_affinity, pod.uid)
        # Use the pod as it was added (same uid): its requests are what was counted.
        self._account(p, -1)
        if self.journal is not None:
            self.journal.append(self, p, -1)
        return True

    def _account(self, pod: Pod, sign: int) -> None:
        self.requested.add(pod.requests, sign)
        self.requested.allowed_pods += sign
        self.non_zero_requested.milli_cpu += sign * pod.non_zero_cpu
        self.non_zero_requested.memory += sign * pod.non_zero_memory
        for port in pod.host_ports:
            n = self.used_ports.get(port, 0) + sign
            if n > 0:
                self.used_ports[port] = n
            else:
                self.used_ports.pop(port, None)
        for vol in pod.spec.get("volumes") or ():
            claim = (vol.get("persistentVolumeClaim") or {}).get("claimName")
            if claim:
                k = f"{pod.namespace}/{claim}"
                n = self.pvc_ref_counts.get(k, 0) + sign
                if n > 0:
                    self.pvc_ref_counts[k] = n
                else:
                    self.pvc_ref_counts.pop(k, None)
        self.generation += 1

    def clone(self) -> NodeInfo:
        """A copy whose pod list and aggregates can change without touching this one."""
        c = NodeInfo(self.node, self.name)
        c.pods = list(self.pods)
        c.pods_with_affinity = list(self.pods_with_affinity)
        c.pods_with_required_anti_affinity = list(self.pods_with_required_anti_affinity)
        c.requested = self.requested.copy()
        c.non_zero_requested = self.non_zero_requested.copy()
        c.used_ports = dict(self.used_ports)
        c.pvc_ref_counts = dict(self.pvc_ref_counts)
        c.image_states = self.image_states
        c.generation = self.generation
        c.index = self.index
        return c

    def __repr__(self) -> str:
        return f"<NodeInfo {self.name} pods={len(self.pods)} requested={self.requested}>"


@dataclass(slots=True, eq=False)
class QueuedPodInfo:
    """A pod in the scheduling queue and what the queue knows about its attempts."""

    pod: Pod
    timestamp: float
    """When the pod was (last) added to the queue; PrioritySort's FIFO tie-break."""
    seq: int = 0
    """Arrival order, a stable tie-break where timestamps are equal."""
    attempts: int = 0
    unschedulable_count: int = 0
    """Failed attempts that plugins rejected (kube's ``UnschedulableCount``)."""
    consecutive_errors: int = 0
    """Failed attempts in a row that ended in an error, none rejected since (kube's
    ``ConsecutiveErrorsCount``). The backoff doubles with this count while it is not
    zero, else with :attr:`unschedulable_count`."""
    group_size: int = 1
    """Pods of its gang that failed with it in a whole-group cycle (1: it failed alone).
    kube-scheduler 1.37 backs a pod group off as one entity of that many pods, its
    maximum backoff multiplied by the square root of their number."""
    initial_attempt_timestamp: float | None = None
    unschedulable_plugins: set[str] = field(default_factory=set)
    """Plugins that rejected the pod in its last attempt: their events requeue it."""
    pending_plugins: set[str] = field(default_factory=set)
    gated: bool = False
    """Held by a PreEnqueue plugin (``gating_plugin``)."""
    gating_plugin: str = ""
    last_failure: float = 0.0
    flushed_at: float = float("-inf")
    """When the unschedulable pool's flush last moved it on (kube's ``FlushTimestamp``):
    a pod gated again then waits the whole limit before the next flush."""
    flushed: bool = False
    """That flush, not an event, moved it on since its last failure (kube's
    ``WasFlushedFromUnschedulable``: ``scheduler_pod_scheduled_after_flush_total``)."""
    message: str = ""
    """The last failure message (what ``simulate`` and ``explain`` show)."""

    def carry_over(self, earlier: QueuedPodInfo) -> None:
        """Take ``earlier``'s attempt history (a profile's queue replaced by a new one):
        the attempts, the backoff's two counts and the first attempt's time."""
        self.attempts = earlier.attempts
        self.unschedulable_count = earlier.unschedulable_count
        self.consecutive_errors = earlier.consecutive_errors
        self.initial_attempt_timestamp = earlier.initial_attempt_timestamp
