"""A Handle for Coscheduling's unit tests: PodGroups in a store, pods by uid, and a
record of what the plugin asked the scheduler to do (activations; events are
recorded by the fake cluster)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kubesched.api.gangs import STORE_KINDS, GangAPI
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.types import Pod
from kubesched.plugins.coscheduling import Args, Coscheduling
from tests.builders import make_node, make_pod
from tests.unit.plugins.fakes import FakeHandle, FakeStore

OUR_LABEL = "kubesched.dev/pod-group"
X_LABEL = "scheduling.x-k8s.io/pod-group"


def pod_group(
    name: str, min_member: int | None = None, api: GangAPI = GangAPI.KUBESCHED, **spec: Any
) -> dict[str, Any]:
    """A PodGroup of ``api``: ``min_member`` is ``minMember`` (ours, scheduler-plugins') or
    a ``gang`` policy's ``minCount`` (Kubernetes'; None there means a ``basic`` policy)."""
    body: dict[str, Any] = dict(spec)
    if api is GangAPI.UPSTREAM:
        policy = {"basic": {}} if min_member is None else {"gang": {"minCount": min_member}}
        body.setdefault("schedulingPolicy", policy)
    elif min_member is not None:
        body["minMember"] = min_member
    return {
        "apiVersion": api.value,
        "kind": STORE_KINDS[api],  # the store's kind: the three APIs all say "PodGroup"
        "metadata": {"name": name, "namespace": "default", "resourceVersion": "1"},
        "spec": body,
    }


def member(name: str, group: str, api: GangAPI = GangAPI.KUBESCHED) -> Pod:
    b = make_pod(name)
    if api is GangAPI.UPSTREAM:
        b.spec(schedulingGroup={"podGroupName": group})
    else:
        b.label(OUR_LABEL if api is GangAPI.KUBESCHED else X_LABEL, group)
    return b.pod()


class GangHandle(FakeHandle):
    """PodGroups in the store, member pods known by uid, nodes holding bound members."""

    def __init__(self, *groups: Mapping[str, Any]) -> None:
        super().__init__(Snapshot(), FakeStore(*groups))
        self.pods: dict[str, Pod] = {}
        self.activated: list[list[str]] = []
        self.rejected: list[str] = []
        self.clock = 0.0

    def now(self) -> float:
        return self.clock

    @property
    def objects(self) -> FakeStore:
        assert isinstance(self._store, FakeStore)
        return self._store

    def add(self, *pods: Pod) -> list[Pod]:
        for p in pods:
            self.pods[p.uid] = p
        return list(pods)

    def bind(self, node: str, *pods: Pod, **labels: str) -> list[Pod]:
        """Put ``pods`` on a new node ``node`` (with ``labels``) in the snapshot."""
        nb = make_node(node).alloc(cpu="8", memory="16Gi")
        for k, v in labels.items():
            nb.label(k, v)
        placed = [p.assigned_to(node) for p in pods]
        self.add(*placed)
        infos: list[NodeInfo] = [*self._snapshot.node_infos, nb.info(*placed)]
        self._snapshot.rebuild(infos)
        return placed

    def get_pod(self, uid: str) -> Pod | None:
        return self.pods.get(uid)

    def activate(self, pods: Iterable[Pod]) -> None:
        self.activated.append(sorted(p.name for p in pods))

    def reject_waiting_pod(self, uid: str, plugin: str, message: str) -> bool:
        self.rejected.append(uid)
        return True


def plugin(*groups: Mapping[str, Any]) -> tuple[Coscheduling, GangHandle]:
    h = GangHandle(*groups)
    return Coscheduling(Args(), h), h
