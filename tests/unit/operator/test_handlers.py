"""WatchRouter: Kopf watch events -> store + EventHandlers; relist reconciliation; registry."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any, cast

import pytest
from kubernetes_asyncio import client as k8s_client

from kubesched.cluster.kinds import WATCHED
from kubesched.cluster.kube import KubeCluster
from kubesched.operator.handlers import DIRECT_KINDS, WatchRouter, build_registry
from kubesched.scheduler.eventhandlers import EventHandlers

JSON = dict[str, Any]


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str, str | None]] = []
        self.sched = SimpleNamespace(held=None)  # a scheduler holding no pods back

    def on_event(self, kind: str, event_type: str, obj: JSON, old: JSON | None = None) -> None:
        old_rv = old["metadata"].get("resourceVersion") if old else None
        self.calls.append((kind, event_type, obj["metadata"].get("resourceVersion"), old_rv))


class FakeCluster(KubeCluster):
    def __init__(self) -> None:
        super().__init__(k8s_client.Configuration(), reporting_instance_suffix="h")
        self.listed: dict[str, list[JSON]] = {}
        self.posted: list[tuple[dict[str, str], str, str, str]] = []

    async def list_objects(self, kind: str) -> list[JSON]:
        return [dict(o) for o in self.listed.get(kind, [])]

    async def list_pages(
        self, kind: str, page_size: int = 500
    ) -> AsyncIterator[tuple[list[JSON], str]]:
        yield await self.list_objects(kind), ""

    def post_event(self, regarding: Any, **kw: Any) -> None:
        self.posted.append(
            (dict(regarding), kw["reason"], kw["reporting_controller"], kw["message"])
        )


def pod(name: str, rv: str, uid: str = "u1", scheduler: str = "kubesched", **spec: Any) -> JSON:
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": rv},
        "spec": {"schedulerName": scheduler, "containers": [], **spec},
        "status": {},
    }


@pytest.fixture
def setup() -> tuple[WatchRouter, FakeCluster, Recorder]:
    cluster = FakeCluster()
    router = WatchRouter(cluster, scheduler_names=["kubesched"], reporting_controller="kubesched")
    rec = Recorder()
    router.attach(cast(EventHandlers, rec))
    return router, cluster, rec


def test_listing_is_added_replays_are_dropped_updates_carry_old(
    setup: tuple[WatchRouter, FakeCluster, Recorder],
) -> None:
    router, cluster, rec = setup
    router.dispatch("Pod", None, pod("a", "5"))  # Kopf's initial listing
    router.dispatch("Pod", None, pod("a", "5"))  # a relist of the same version
    router.dispatch("Pod", "MODIFIED", pod("a", "4"))  # older: ignored
    router.dispatch("Pod", "MODIFIED", pod("a", "7"))
    router.dispatch("Pod", "BOOKMARK", pod("a", "8"))
    router.dispatch("Pod", "DELETED", pod("a", "9"))
    router.dispatch("Pod", "DELETED", pod("a", "9"))  # unknown now: ignored
    assert rec.calls == [
        ("Pod", "ADDED", "5", None),
        ("Pod", "MODIFIED", "7", "5"),
        ("Pod", "DELETED", "9", None),
    ]
    assert cluster.get("Pod", "ns", "a") is None


def test_recreated_object_is_a_delete_then_an_add(
    setup: tuple[WatchRouter, FakeCluster, Recorder],
) -> None:
    router, cluster, rec = setup
    router.dispatch("Pod", "ADDED", pod("a", "5", uid="old"))
    router.dispatch("Pod", None, pod("a", "3", uid="new"))  # relist after a gap
    assert rec.calls[1:] == [("Pod", "DELETED", "5", None), ("Pod", "ADDED", "3", None)]
    assert cluster.get("Pod", "ns", "a")["metadata"]["uid"] == "new"  # type: ignore[index]


def test_other_kinds_are_stored_for_the_plugins(
    setup: tuple[WatchRouter, FakeCluster, Recorder],
) -> None:
    router, cluster, rec = setup
    sc = {"kind": "StorageClass", "metadata": {"name": "fast", "resourceVersion": "1"}}
    router.dispatch("StorageClass", "ADDED", sc)
    assert cluster.get("StorageClass", "", "fast") is sc
    assert rec.calls == [("StorageClass", "ADDED", "1", None)]


def test_malformed_pod_of_ours_gets_one_event_per_version() -> None:
    cluster = FakeCluster()
    router = WatchRouter(cluster, scheduler_names=["kubesched"], reporting_controller="kubesched")
    from kubesched.scheduler.scheduler import Scheduler

    handlers = EventHandlers(Scheduler(cluster, cluster), on_bad_object=router.on_bad_object)
    router.attach(handlers)
    bad = pod("bad", "1", priority="high")
    router.dispatch("Pod", "ADDED", bad)
    router.dispatch("Pod", None, dict(bad))  # same version again (relist): no new event
    router.dispatch("Pod", "MODIFIED", pod("bad", "2", priority="high"))
    router.dispatch("Pod", "ADDED", pod("theirs", "1", uid="u2", scheduler="other", priority="x"))
    assert [(ref["name"], reason, ctl) for ref, reason, ctl, _ in cluster.posted] == [
        ("bad", "FailedScheduling", "kubesched"),
        ("bad", "FailedScheduling", "kubesched"),
    ]
    ref, _, _, message = cluster.posted[0]
    assert ref == {"apiVersion": "v1", "kind": "Pod", "name": "bad", "uid": "u1", "namespace": "ns"}
    assert "spec.priority: must be an integer" in message


async def test_reconcile_forgets_objects_the_server_no_longer_has(
    setup: tuple[WatchRouter, FakeCluster, Recorder],
) -> None:
    router, cluster, rec = setup
    router.dispatch("Pod", "ADDED", pod("kept", "5", uid="k"))
    router.dispatch("Pod", "ADDED", pod("gone", "6", uid="g"))
    router.dispatch("Pod", "ADDED", pod("replaced", "7", uid="r1"))
    cluster.listed["Pod"] = [pod("kept", "8", uid="k"), pod("replaced", "9", uid="r2")]
    rec.calls.clear()
    assert await router.reconcile(["Pod"]) == 1
    assert sorted(rec.calls) == sorted(
        [
            ("Pod", "MODIFIED", "8", "5"),
            ("Pod", "DELETED", "7", None),  # the old incarnation of "replaced"
            ("Pod", "ADDED", "9", None),
            ("Pod", "DELETED", "6", None),
        ]
    )
    assert {k for k in cluster.objects["Pod"]} == {"ns/kept", "ns/replaced"}


def test_registry_has_only_event_handlers_for_every_watched_kind() -> None:
    cluster = FakeCluster()
    router = WatchRouter(cluster, scheduler_names=["kubesched"], reporting_controller="kubesched")
    registry = build_registry(router)
    handlers = registry._watching.get_all_handlers()
    assert len(handlers) == len(WATCHED)
    plurals = {h.selector.any_name for h in handlers if h.selector is not None}
    assert {"pods", "nodes", "persistentvolumeclaims", "poddisruptionbudgets"} <= plurals
    assert not list(registry._changing.get_all_handlers())  # no annotations, no finalizers
    assert build_registry(router) is not registry


def test_registry_leaves_every_watched_kind_to_the_direct_informers() -> None:
    """With the direct informers (the default watch engine), Kopf watches none of the
    watched kinds: pods, nodes, budgets, volumes, the DRA kinds and PodGroups all arrive
    through the informers, each watching from its own listing."""
    cluster = FakeCluster()
    router = WatchRouter(cluster, scheduler_names=["kubesched"], reporting_controller="kubesched")
    assert {w.kind for w in WATCHED} == DIRECT_KINDS
    registry = build_registry(router, skip=DIRECT_KINDS)
    assert not list(registry._watching.get_all_handlers())


def _dra(kind: str, name: str, rv: str, namespace: str | None = None) -> JSON:
    meta: JSON = {"name": name, "uid": f"{kind}-{name}", "resourceVersion": rv}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "resource.k8s.io/v1", "kind": kind, "metadata": meta, "spec": {}}


def test_dra_objects_are_stored_and_become_cluster_events() -> None:
    """DeviceClasses and ResourceSlices are cluster-scoped, claims namespaced; each change
    is a cluster event of its own kind (what DynamicResources' queueing hints register)."""
    from kubesched.framework.interface import ActionType, ClusterEvent, EventResource
    from kubesched.scheduler.scheduler import Scheduler

    cluster = FakeCluster()
    router = WatchRouter(cluster, scheduler_names=["kubesched"], reporting_controller="kubesched")
    sched = Scheduler(cluster, cluster)
    seen: list[tuple[ClusterEvent, str | None, str | None]] = []

    def rv(obj: Any) -> str | None:
        return None if obj is None else str(obj["metadata"]["resourceVersion"])

    def spy(event: ClusterEvent, old: Any, new: Any, *a: Any, **kw: Any) -> None:
        seen.append((event, rv(old), rv(new)))

    sched.queues.move_all_to_active_or_backoff = spy  # type: ignore[method-assign,assignment]
    router.attach(EventHandlers(sched, on_bad_object=router.on_bad_object))
    router.dispatch("DeviceClass", None, _dra("DeviceClass", "gpu", "1"))
    router.dispatch("ResourceSlice", "ADDED", _dra("ResourceSlice", "node-1-gpu", "2"))
    router.dispatch("ResourceClaim", "ADDED", _dra("ResourceClaim", "c", "3", "ns"))
    router.dispatch("ResourceClaim", "MODIFIED", _dra("ResourceClaim", "c", "4", "ns"))
    router.dispatch("ResourceSlice", "DELETED", _dra("ResourceSlice", "node-1-gpu", "5"))
    assert cluster.get("DeviceClass", "", "gpu") is not None
    assert cluster.get("ResourceClaim", "ns", "c")["metadata"]["resourceVersion"] == "4"  # type: ignore[index]
    assert cluster.get("ResourceSlice", "", "node-1-gpu") is None
    assert seen == [
        (ClusterEvent(EventResource.DEVICE_CLASS, ActionType.ADD), None, "1"),
        (ClusterEvent(EventResource.RESOURCE_SLICE, ActionType.ADD), None, "2"),
        (ClusterEvent(EventResource.RESOURCE_CLAIM, ActionType.ADD), None, "3"),
        (ClusterEvent(EventResource.RESOURCE_CLAIM, ActionType.UPDATE_OTHER), "3", "4"),
        (ClusterEvent(EventResource.RESOURCE_SLICE, ActionType.DELETE), "5", None),
    ]


async def test_reconcile_without_the_resource_api_lists_no_dra_objects(
    setup: tuple[WatchRouter, FakeCluster, Recorder],
) -> None:
    """An API server that does not serve resource.k8s.io/v1 (404): none exist, no error."""
    from kubesched.framework.cluster_port import NotFound

    router, cluster, rec = setup

    async def not_served(kind: str, page_size: int = 500) -> AsyncIterator[tuple[list[JSON], str]]:
        raise NotFound(f"GET {kind}: 404 the server could not find the requested resource")
        yield [], ""

    cluster.list_pages = not_served  # type: ignore[method-assign]
    assert await router.reconcile(["DeviceClass", "ResourceSlice", "ResourceClaim"]) == 0
    assert rec.calls == []
