"""What Coscheduling remembers about each gang, and which members are already placed.

:class:`Gang` is the per-PodGroup state (queue time, backoff, why it last failed,
the members seen by PreEnqueue and those waiting at Permit). :class:`AssignedIndex`
answers "which members of this gang are bound or assumed?" from the snapshot, refreshing
only the nodes whose ``NodeInfo.generation`` moved (a node added or removed too: only
its pods are read), so gang pods cost O(nodes) integer compares per cycle and pods
outside gangs cost nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kubesched.api.gangs import (
    STORE_KINDS,
    WORKLOAD_STORE_KIND,
    GangRef,
    GangSpec,
    InvalidGang,
    parse_gang,
    parse_key,
    pod_ref,
    refs_for,
    resolve,
)
from kubesched.framework.cluster_port import ObjectStore
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.types import Pod

__all__ = ["AssignedIndex", "Gang", "GangKeys", "pod_gang_ref"]


def pod_gang_ref(pod: Pod) -> GangRef | None:
    """How the pod names its gang (``kubesched.api.gangs.pod_ref``), derived once per
    view (PreEnqueue, QueueSort and the gang index each ask for every pod)."""
    ref = pod.gang_ref
    if ref is None or ref:
        return ref
    found = pod.gang_ref = pod_ref(pod.namespace, pod.labels, pod.spec)
    return found


class GangKeys:
    """Pod -> gang key, and gang key -> spec, from the object store (which PodGroups
    exist, of which API; an upstream PodGroup's Workload)."""

    def __init__(self, store: Callable[[], ObjectStore]) -> None:
        self._store = store
        """The store, looked up on use (a framework gets its store after its plugins)."""
        self._specs: dict[str, tuple[tuple[str, str], GangSpec | str]] = {}
        """Parsed specs by key, valid for (PodGroup, Workload) resourceVersions."""

    def spec(self, key: str) -> GangSpec | str | None:
        """The gang's spec (whichever API declares it), an error message if it is
        invalid, None if its PodGroup is absent or being deleted."""
        api, ns, name = parse_key(key)
        kind = STORE_KINDS[api]
        store = self._store()
        obj = store.get(kind, ns, name)
        if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp"):
            return None  # absent, or being deleted (our finalizer holds it a moment)
        rv = str((obj.get("metadata") or {}).get("resourceVersion") or id(obj))
        wl_rv = ""
        ref = (obj.get("spec") or {}).get("workloadRef") if kind != "PodGroup" else None
        if isinstance(ref, Mapping):
            wl = store.get(WORKLOAD_STORE_KIND, ns, str(ref.get("workloadName") or ""))
            wl_rv = "-" if wl is None else str((wl.get("metadata") or {}).get("resourceVersion"))
        cached = self._specs.get(key)
        if cached is not None and cached[0] == (rv, wl_rv):
            return cached[1]
        try:
            spec: GangSpec | str = parse_gang(
                kind, obj, lambda n, w: store.get(WORKLOAD_STORE_KIND, n, w)
            )
        except InvalidGang as e:
            spec = f"PodGroup {key} is invalid: {e}"
        self._specs[key] = ((rv, wl_rv), spec)
        return spec

    def forget(self, key: str) -> None:
        self._specs.pop(key, None)

    def exists(self, kind: str, namespace: str, name: str) -> bool:
        return self._store().get(kind, namespace, name) is not None

    def key(self, pod: Pod) -> str | None:
        ref = pod_gang_ref(pod)
        return None if ref is None else resolve(ref, self.exists)


@dataclass(slots=True)
class Gang:
    key: str
    sort_time: float
    """QueueSort's time: when the gang was first seen, or its last failure."""
    candidates: dict[str, None] = field(default_factory=dict)
    """Uids of member pods seen by PreEnqueue (checked against the scheduler on use)."""
    released: bool = False
    """PreEnqueue saw minMember members and activated the gated ones."""
    blocked: str = ""
    """Why the gang does not fit (the last group cycle), for status and messages."""
    error: bool = False
    """``blocked`` is an error (kube's ``SchedulerError``), not "does not fit"."""
    schedule_start: float | None = None
    not_found_reported: set[str] = field(default_factory=set)

    def fail(self, now: float, message: str, *, error: bool = False) -> None:
        """A group cycle failed: the gang goes behind the pods queued since. It stays
        released: its members were counted, the group cycle counts them again, and a
        member activated by the release being let through PreEnqueue must not release
        (activate) the others again, or a gang that does not fit retries without end."""
        self.sort_time = now
        if message:
            self.blocked = message
            self.error = error


class AssignedIndex:
    """Gang key -> uids of member pods on nodes (bound or assumed), from the snapshot.

    Indexed by the pods' references (:func:`pod_gang_ref`), resolved at query time, so a
    PodGroup created or deleted later (scheduler-plugins' label falling back to ours)
    never leaves stale keys behind."""

    def __init__(self, keys: GangKeys) -> None:
        self._keys = keys
        self._seen: dict[str, tuple[NodeInfo, int, list[tuple[GangRef, str]]]] = {}
        self._members: dict[GangRef, set[str]] = {}
        self._labels_version = -1

    def _node_members(self, ni: NodeInfo) -> list[tuple[GangRef, str]]:
        out = []
        for p in ni.pods:
            ref = pod_gang_ref(p)
            if ref is not None:
                out.append((ref, p.uid))
        return out

    def _apply(self, members: list[tuple[GangRef, str]], sign: int) -> None:
        for k, uid in members:
            s = self._members.setdefault(k, set())
            if sign > 0:
                s.add(uid)
            else:
                s.discard(uid)

    def refresh(self, snap: Snapshot) -> None:
        seen = self._seen
        if snap.labels_version != self._labels_version:
            # The node set may have changed: take back the members of nodes that left
            # the rows (membership does not depend on node labels; the loop below
            # catches rows that are another NodeInfo or changed).
            by_name = snap.by_name
            for name in [n for n, prev in seen.items() if by_name.get(n) is not prev[0]]:
                self._apply(seen.pop(name)[2], -1)
            self._labels_version = snap.labels_version
        for ni in snap.node_infos:
            prev = seen.get(ni.name)
            if prev is not None and prev[0] is ni and prev[1] == ni.generation:
                continue
            if prev is not None:
                self._apply(prev[2], -1)
            members = self._node_members(ni) if ni.pods else []
            self._apply(members, 1)
            seen[ni.name] = (ni, ni.generation, members)

    def members(self, snap: Snapshot, key: str) -> set[str]:
        self.refresh(snap)
        refs = refs_for(key, self._keys.exists)
        if len(refs) == 1:
            return self._members.get(refs[0], set())
        out: set[str] = set()
        for ref in refs:
            out |= self._members.get(ref, set())
        return out
