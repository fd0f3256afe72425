"""A Handle for plugin unit tests: a snapshot, and a cluster port that records binds."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from kubesched.cluster.kinds import CLUSTER_SCOPED
from kubesched.framework.cluster_port import PodCondition
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import PreBinding, PreFilterResult, WaitingPod
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Status
from kubesched.framework.types import Pod


class FakeCluster:
    """Records binds (raises ``bind_error`` instead when set) and events."""

    def __init__(self) -> None:
        self.binds: list[tuple[str, str]] = []
        self.events: list[tuple[str, str, str]] = []
        """(pod name, reason, message) of every ``record_event``."""
        self.bind_error: BaseException | None = None
        self.volume_binds: list[tuple[str, str | None, str | None]] = []
        """(claim key, PV name, selected node) for every ``bind_volume``."""

    async def bind(self, pod: Pod, node_name: str) -> None:
        if self.bind_error is not None:
            raise self.bind_error
        self.binds.append((pod.key, node_name))

    async def record_event(
        self,
        regarding: Pod,
        *,
        event_type: str,
        reason: str,
        action: str,
        message: str,
        reporting_controller: str,
        related: Pod | None = None,
    ) -> None:
        self.events.append((regarding.name, reason, message))

    async def patch_pod_status(
        self,
        pod: Pod,
        *,
        condition: PodCondition | None = None,
        nominated_node_name: str | None = None,
    ) -> None:
        raise NotImplementedError

    async def delete_pod(self, pod: Pod, *, condition: PodCondition | None = None) -> None:
        raise NotImplementedError

    async def bind_volume(
        self, pvc: Mapping[str, Any], pv_name: str | None, selected_node: str | None
    ) -> None:
        meta = pvc.get("metadata") or {}
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
        self.volume_binds.append((key, pv_name, selected_node))

    async def update_claim_status(
        self,
        claim: Mapping[str, Any],
        allocation: Mapping[str, Any] | None,
        reserved_for: Mapping[str, Any],
    ) -> Mapping[str, Any]:
        raise NotImplementedError

    async def unreserve_claim(self, claim: Mapping[str, Any], pod_uid: str) -> None:
        raise NotImplementedError

    async def deallocate_claim(self, claim: Mapping[str, Any]) -> None:
        raise NotImplementedError

    async def create_claim(self, claim: Mapping[str, Any]) -> Mapping[str, Any]:
        raise NotImplementedError

    async def delete_claim(self, claim: Mapping[str, Any]) -> None:
        raise NotImplementedError

    async def set_extended_resource_claim_status(self, pod: Pod, status: Mapping[str, Any]) -> None:
        raise NotImplementedError


class EmptyStore:
    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        return None

    def list(self, kind: str, namespace: str | None = None) -> Iterable[Mapping[str, Any]]:
        return ()


class FakeStore(EmptyStore):
    """A store holding given objects (cluster-scoped kinds keyed by name alone)."""

    CLUSTER_SCOPED = CLUSTER_SCOPED

    def __init__(self, *objects: Mapping[str, Any]) -> None:
        self.objects: dict[tuple[str, str], Mapping[str, Any]] = {}
        for o in objects:
            self.add(o)

    def _key(self, kind: str, namespace: str, name: str) -> tuple[str, str]:
        if kind in self.CLUSTER_SCOPED:
            return kind, name
        return kind, f"{namespace or 'default'}/{name}"

    def add(self, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = self._key(str(obj["kind"]), str(meta.get("namespace") or ""), str(meta["name"]))
        self.objects[key] = obj

    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.objects.get(self._key(kind, namespace, name))

    def list(self, kind: str, namespace: str | None = None) -> Iterable[Mapping[str, Any]]:
        return [o for (k, _), o in self.objects.items() if k == kind]


class FakeHandle:
    def __init__(self, snapshot: Snapshot | None = None, store: EmptyStore | None = None) -> None:
        self._snapshot = snapshot if snapshot is not None else Snapshot()
        self._cluster = FakeCluster()
        self._store = store if store is not None else EmptyStore()
        self.victims_observed: list[int] = []
        """What preemption reported with observe_preemption_victims."""

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    @property
    def cluster(self) -> FakeCluster:
        return self._cluster

    @property
    def store(self) -> EmptyStore:
        return self._store

    @property
    def profile_name(self) -> str:
        return "test"

    def now(self) -> float:
        return 0.0

    def get_waiting_pod(self, uid: str) -> WaitingPod | None:
        return None

    def iterate_waiting_pods(self) -> Iterable[WaitingPod]:
        return ()

    def reject_waiting_pod(self, uid: str, plugin: str, message: str) -> bool:
        return False

    def get_pod_in_pre_bind(self, uid: str) -> PreBinding | None:
        return None

    def activate(self, pods: Iterable[Pod]) -> None:
        pass

    def nominated_pods_for_node(self, node_name: str) -> list[Pod]:
        return []

    def get_pod(self, uid: str) -> Pod | None:
        return None

    def observe_preemption_victims(self, count: int) -> None:
        self.victims_observed.append(count)

    def run_pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None, list[str]]:
        raise NotImplementedError

    def run_filter_plugins_with_nominated_pods(
        self, state: CycleState, pod: Pod, node_info: NodeInfo
    ) -> Status | None:
        raise NotImplementedError

    def run_filter(
        self,
        state: CycleState,
        pod: Pod,
        node_info: NodeInfo,
        skip: Collection[str] | None = None,
    ) -> Status | None:
        raise NotImplementedError

    def skip_with_node_filters(self, state: CycleState) -> frozenset[str]:
        raise NotImplementedError

    def filter_rejects_as_if(
        self, state: CycleState, pod: Pod, node_info: NodeInfo, removed: Sequence[Pod]
    ) -> bool:
        raise NotImplementedError

    def add_nominated_pods(
        self, state: CycleState, pod: Pod, node_info: NodeInfo
    ) -> tuple[bool, CycleState, NodeInfo, Status | None]:
        raise NotImplementedError

    def run_pre_filter_extension_add_pod(
        self, state: CycleState, pod: Pod, pod_to_add: Pod, node_info: NodeInfo
    ) -> Status | None:
        raise NotImplementedError

    def run_pre_filter_extension_remove_pod(
        self, state: CycleState, pod: Pod, pod_to_remove: Pod, node_info: NodeInfo
    ) -> Status | None:
        raise NotImplementedError
