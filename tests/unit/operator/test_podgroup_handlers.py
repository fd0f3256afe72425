"""PodGroup status writer: member index, debounced level-based writes, events, leader only."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, cast

import pytest
from kubernetes_asyncio import client as k8s_client

from kubesched.api.meta import FINALIZER
from kubesched.cluster.kube import KubeCluster
from kubesched.cluster.kube_http import JSON_PATCH
from kubesched.framework.cluster_port import ClusterError, NotFound
from kubesched.operator.handlers import WatchRouter
from kubesched.operator.podgroup_handlers import (
    GONE_FOR,
    RELEASE_INTERVAL,
    PodGroupStatusWriter,
    attach,
)
from kubesched.plugins.coscheduling import GangReport
from kubesched.scheduler.scheduler import Scheduler

pytestmark = pytest.mark.looptime

JSON = dict[str, Any]
NOW = datetime(2025, 1, 1, tzinfo=UTC)


class FakeApi(KubeCluster):
    """The store plus a status subresource that answers like the API server."""

    def __init__(self) -> None:
        super().__init__(k8s_client.Configuration(), reporting_instance_suffix="h")
        self.patches: list[tuple[str, JSON]] = []
        self.json_patches: list[tuple[str, list[JSON]]] = []
        self.refuse_json_patch: ClusterError | None = None
        self.events: list[JSON] = []
        self.rv = 100

    async def list_pages(
        self, kind: str, page_size: int = 500
    ) -> AsyncIterator[tuple[list[JSON], str]]:
        yield await self.list_objects(kind), ""  # the listing a test sets up, one page

    async def request(
        self, method: str, path: str, body: Any = None, content_type: str = "", **_: Any
    ) -> Any:
        if content_type == JSON_PATCH:
            if self.refuse_json_patch is not None:
                raise self.refuse_json_patch
            self.json_patches.append((path, body))
            return {}
        self.patches.append((path, body["status"]))
        self.rv += 1
        return {"metadata": {"resourceVersion": str(self.rv)}, "status": body["status"]}

    def post_event(self, regarding: Any, **kw: Any) -> None:
        self.events.append({"regarding": dict(regarding), **kw})


class FakeCoscheduling:
    name = "Coscheduling"

    def __init__(self) -> None:
        self.reports: dict[str, GangReport] = {}

    def report(self, namespace: str, name: str) -> GangReport | None:
        return self.reports.get(f"{namespace}/{name}")


def scheduler_with(plugin: FakeCoscheduling) -> Scheduler:
    chain = SimpleNamespace(queue_sort=plugin, permit=[plugin], pre_filter=[plugin])
    profile = SimpleNamespace(framework=SimpleNamespace(chain=chain))
    return cast(Scheduler, SimpleNamespace(profiles={"kubesched": profile}))


def group(name: str = "g", min_member: int = 2, rv: str = "1") -> JSON:
    return {
        "apiVersion": "kubesched.dev/v1alpha1",
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "generation": 1,
            "resourceVersion": rv,
        },
        "spec": {"minMember": min_member},
    }


def pod(name: str, group: str | None = "g", node: str = "") -> JSON:
    labels = {"kubesched.dev/pod-group": group} if group else {}
    spec: JSON = {"schedulerName": "kubesched", "containers": []}
    if node:
        spec["nodeName"] = node
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "labels": labels},
        "spec": spec,
        "status": {"phase": "Pending"},
    }


class Setup:
    def __init__(self, leading: bool = True) -> None:
        self.api = FakeApi()
        self.plugin = FakeCoscheduling()
        self.leading = leading
        self.writer = PodGroupStatusWriter(
            self.api,
            scheduler_with(self.plugin),
            reporter="kubesched",
            leading=lambda: self.leading,
            wall_clock=lambda: NOW,
        )

    def put(self, kind: str, obj: JSON, event_type: str = "ADDED") -> None:
        old = self.api.get(kind, "ns", obj["metadata"]["name"])
        if event_type == "DELETED":
            self.api.remove(kind, obj)
        else:
            self.api.put(kind, obj)
        self.writer.on_event(kind, event_type, obj, old)


async def test_member_events_are_debounced_into_one_write_with_counts() -> None:
    s = Setup()
    s.put("PodGroup", group())
    s.put("Pod", pod("a", node="n1"))
    s.put("Pod", pod("b", node="n1"))
    s.put("Pod", pod("outsider", group=None, node="n1"))
    await asyncio.sleep(1)
    ((path, status),) = s.api.patches
    assert path == "/apis/kubesched.dev/v1alpha1/namespaces/ns/podgroups/g/status"
    assert status["phase"] == "Scheduled"
    assert status["counts"]["bound"] == 2
    assert status["conditions"][0]["reason"] == "Scheduled"
    assert status["conditions"][0]["lastTransitionTime"] == "2025-01-01T00:00:00Z"
    # Written once: a timer tick before the watch brings our write changes nothing.
    assert await s.writer.sync("ns/g") is False
    assert len(s.api.patches) == 1
    (event,) = s.api.events
    assert (event["reason"], event["event_type"]) == ("Scheduled", "Normal")
    assert event["regarding"]["kind"] == "PodGroup"
    assert event["reporting_controller"] == "kubesched"
    assert event["message"] == "PodGroup is Scheduled (2 bound): 2/2 members bound"


async def test_the_status_from_the_watch_is_compared_too() -> None:
    s = Setup()
    g = group()
    s.put("PodGroup", g)
    s.put("Pod", pod("a"))
    await asyncio.sleep(1)
    (_, written), *_ = s.api.patches
    s.put(
        "PodGroup",
        {**g, "metadata": {**g["metadata"], "resourceVersion": "500"}, "status": written},
        "MODIFIED",
    )
    assert await s.writer.sync("ns/g") is False
    assert len(s.api.patches) == 1
    assert s.api.events == []  # Pending at first: no event


async def test_blocked_and_timed_out_gangs_are_warnings_with_the_reason() -> None:
    s = Setup()
    s.put("PodGroup", group())
    s.put("Pod", pod("a"))
    s.put("Pod", pod("b"))
    msg = "1/2 members fit; 1 pods: Insufficient nvidia.com/gpu"
    s.plugin.reports["ns/g"] = GangReport(
        frozenset(), msg, False, asyncio.get_running_loop().time()
    )
    await asyncio.sleep(1)
    status = s.api.patches[-1][1]
    assert status["conditions"][0]["reason"] == "Unschedulable"
    assert status["message"] == msg
    # The first try, 0.25 s (the debounce) before the write, in wall-clock time.
    assert status["scheduleStartTime"] == "2024-12-31T23:59:59Z"
    assert s.api.events[-1]["reason"] == "Unschedulable"
    assert s.api.events[-1]["event_type"] == "Warning"
    s.plugin.reports["ns/g"] = GangReport(frozenset(), "timed out", True, 0.0)
    assert await s.writer.sync("ns/g") is True
    assert s.api.patches[-1][1]["conditions"][0]["reason"] == "Timeout"
    assert s.api.patches[-1][1]["scheduleStartTime"] == "2024-12-31T23:59:59Z"  # kept
    assert s.api.events[-1]["reason"] == "Timeout"


async def test_members_waiting_at_permit_are_counted() -> None:
    s = Setup()
    s.put("PodGroup", group(min_member=3))
    for n in "abc":
        s.put("Pod", pod(n))
    s.plugin.reports["ns/g"] = GangReport(frozenset({"uid-a", "uid-b"}), "", False, None)
    await asyncio.sleep(1)
    status = s.api.patches[-1][1]
    assert status["phase"] == "Scheduling"
    assert status["counts"]["waiting"] == 2
    assert status["counts"]["pending"] == 1


async def test_a_pod_leaving_or_deleted_is_no_longer_counted() -> None:
    s = Setup()
    s.put("PodGroup", group(min_member=1))
    s.put("Pod", pod("a", node="n"))
    s.put("Pod", pod("b", node="n"))
    await asyncio.sleep(1)
    assert s.api.patches[-1][1]["counts"]["bound"] == 2
    s.put("Pod", pod("a", group="other", node="n"), "MODIFIED")
    s.put("Pod", pod("b", node="n"), "DELETED")
    await asyncio.sleep(1)
    assert s.api.patches[-1][1]["counts"]["bound"] == 0


async def test_a_pod_joining_a_gang_after_pods_that_name_none_is_counted() -> None:
    # Pods naming no gang are not indexed at all while no pod names one; the first
    # member, a pod changing its gang, and one leaving every gang are still followed.
    s = Setup()
    s.put("PodGroup", group(min_member=1))
    s.put("Pod", pod("outsider", group=None, node="n"))
    s.put("Pod", pod("a", group=None, node="n"))
    s.put("Pod", pod("a", node="n"), "MODIFIED")
    await asyncio.sleep(1)
    assert s.api.patches[-1][1]["counts"]["bound"] == 1
    s.put("Pod", pod("a", group=None, node="n"), "MODIFIED")
    await asyncio.sleep(1)
    assert s.api.patches[-1][1]["counts"]["bound"] == 0
    s.put("Pod", pod("a", group=None, node="n"), "DELETED")
    s.put("Pod", pod("b", node="n"))
    await asyncio.sleep(1)
    assert s.api.patches[-1][1]["counts"]["bound"] == 1


async def test_a_follower_writes_nothing() -> None:
    s = Setup(leading=False)
    s.put("PodGroup", group())
    s.put("Pod", pod("a", node="n"))
    s.put("Pod", pod("b", node="n"))
    await asyncio.sleep(1)
    assert await s.writer.sync("ns/g") is False
    assert s.api.patches == [] and s.api.events == []
    s.leading = True  # the next timer tick after taking over
    assert await s.writer.sync("ns/g") is True


async def test_a_write_failure_is_logged_and_retried_by_the_next_tick() -> None:
    s = Setup()
    s.put("PodGroup", group(min_member=1))
    s.put("Pod", pod("a", node="n"))

    async def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("apiserver down")

    real = s.api.request
    s.api.request = broken  # type: ignore[method-assign]
    assert await s.writer.sync("ns/g") is False
    s.api.request = real  # type: ignore[method-assign]
    assert await s.writer.sync("ns/g") is True


async def test_a_group_the_api_server_no_longer_has_is_not_written_again_until_seen_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Deleted while the watch was away (an API server restart): the store still holds the
    # group and its members' deletions keep touching it. The first write meets 404; member
    # events and ticks write nothing more, and say nothing more, until the group's own
    # next event (its DELETED, or the group back under a new uid) or GONE_FOR seconds.
    s = Setup()
    s.put("PodGroup", group(min_member=1))
    s.put("Pod", pod("a", node="n"))
    calls: list[str] = []

    async def gone(method: str, path: str, *_: Any, **__: Any) -> Any:
        calls.append(path)
        raise NotFound(f'PATCH {path}: 404 podgroups.kubesched.dev "g" not found')

    real = s.api.request
    s.api.request = gone  # type: ignore[method-assign]
    with caplog.at_level("INFO", logger="kubesched.operator.podgroups"):
        assert await s.writer.sync("ns/g") is False
        s.put("Pod", pod("a"), "DELETED")  # a member goes: touches the group
        await asyncio.sleep(1)
        await s.writer.tick()
        assert len(calls) == 1
        (record,) = [r for r in caplog.records if r.name == "kubesched.operator.podgroups"]
        assert record.levelname == "INFO"
        assert '"g" not found' in record.getMessage()
        assert "not tried again until a watch event for it, or for 60 s" in record.getMessage()
        # no news of the group for GONE_FOR: one more try (a 404 in error is not for good)
        await asyncio.sleep(GONE_FOR)
        await s.writer.tick()
        await s.writer.tick()
        assert len(calls) == 2
    # the same name again, a new object: written at once
    s.api.request = real  # type: ignore[method-assign]
    s.put("PodGroup", group(min_member=1), "DELETED")
    again = {**group(min_member=1), "metadata": {**group()["metadata"], "uid": "uid-g2"}}
    s.put("PodGroup", again)
    s.put("Pod", pod("b", node="n"))
    await asyncio.sleep(1)
    assert [p[1]["phase"] for p in s.api.patches] == ["Scheduled"]


async def test_a_tick_writes_what_no_watch_event_shows() -> None:
    # Members reserved at Permit show in no watch event: the tick (every STATUS_INTERVAL,
    # for kubesched.dev PodGroups as for the other two APIs) writes them.
    api = FakeApi()
    router = WatchRouter(api, scheduler_names=["kubesched"], reporting_controller="kubesched")
    plugin = FakeCoscheduling()
    writer = attach(router, scheduler_with(plugin), reporter="kubesched", leading=lambda: True)
    assert router.listeners == [writer.on_event]
    api.put("PodGroup", group(min_member=2))
    for name in ("a", "b"):
        api.put("Pod", pod(name))
        writer.on_event("Pod", "ADDED", pod(name), None)
    await writer.tick()
    assert [p[1]["phase"] for p in api.patches] == ["Pending"]
    plugin.reports["ns/g"] = GangReport(frozenset({"uid-a", "uid-b"}), "", False, None)
    await writer.tick()
    assert api.patches[-1][1]["phase"] == "Scheduling"
    assert api.patches[-1][1]["counts"]["waiting"] == 2
    assert api.patches[-1][0] == "/apis/kubesched.dev/v1alpha1/namespaces/ns/podgroups/g/status"
    await writer.tick()
    assert len(api.patches) == 2  # unchanged: nothing written


def with_finalizers(obj: JSON, finalizers: list[str], deleting: bool = False) -> JSON:
    meta = {**obj["metadata"], "finalizers": finalizers}
    if deleting:
        meta["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    return {**obj, "metadata": meta}


async def test_the_finalizer_an_older_release_left_is_taken_off_by_the_leader() -> None:
    s = Setup()
    path = "/apis/kubesched.dev/v1alpha1/namespaces/ns/podgroups/g"
    s.put("PodGroup", with_finalizers(group(), ["example.com/keep", FINALIZER]))
    await asyncio.sleep(1)  # the debounce
    listed = ["example.com/keep", FINALIZER]
    assert s.api.json_patches == [
        (
            path,
            [
                {"op": "test", "path": "/metadata/finalizers", "value": listed},
                {"op": "replace", "path": "/metadata/finalizers", "value": ["example.com/keep"]},
            ],
        )
    ]
    assert [p[1]["phase"] for p in s.api.patches] == ["Pending"]  # and its status

    # Being deleted (no spec change): released at its watch event, no status written.
    s.api.json_patches.clear()
    s.put(
        "PodGroup",
        with_finalizers(group(rv="2"), [FINALIZER], deleting=True),
        "MODIFIED",
    )
    await asyncio.sleep(1)
    assert s.api.json_patches == [
        (
            path,
            [
                {"op": "test", "path": "/metadata/finalizers", "value": [FINALIZER]},
                {"op": "remove", "path": "/metadata/finalizers"},
            ],
        )
    ]
    assert len(s.api.patches) == 1


async def test_a_follower_leaves_the_finalizer_and_a_refused_patch_is_tried_again() -> None:
    s = Setup(leading=False)
    s.put("PodGroup", with_finalizers(group(), [FINALIZER]))
    await asyncio.sleep(1)
    await s.writer.tick()
    assert s.api.json_patches == []
    s.leading = True
    err = ClusterError("PATCH ...: 422 the server rejected our request: test failed")
    s.api.refuse_json_patch = err  # another controller changed the list meanwhile
    await s.writer.tick()
    assert s.api.json_patches == []
    assert [p[1]["phase"] for p in s.api.patches] == ["Pending"]  # the status still is
    s.api.refuse_json_patch = None
    await s.writer.tick()
    assert s.api.json_patches == []  # not again before RELEASE_INTERVAL
    await asyncio.sleep(RELEASE_INTERVAL)
    await s.writer.tick()
    assert len(s.api.json_patches) == 1


async def test_a_finalizer_put_back_at_once_is_not_fought_over() -> None:
    # A rolling upgrade: the older replicas' Kopf puts its finalizer back as soon as it
    # is taken off. The leader tries again every RELEASE_INTERVAL, not at every event.
    s = Setup()
    s.put("PodGroup", with_finalizers(group(), [FINALIZER]))
    await asyncio.sleep(1)
    assert len(s.api.json_patches) == 1
    for rv in range(2, 12):
        s.put("PodGroup", with_finalizers(group(rv=str(rv)), [FINALIZER]), "MODIFIED")
        await asyncio.sleep(1)
        await s.writer.tick()
    assert len(s.api.json_patches) == 1
    await asyncio.sleep(RELEASE_INTERVAL)
    await s.writer.tick()
    assert len(s.api.json_patches) == 2


async def test_reconcile_lists_no_pod_groups_when_their_crd_is_missing() -> None:
    class NoCRD(FakeApi):
        async def list_objects(self, kind: str) -> list[JSON]:
            if kind == "PodGroup":
                raise NotFound("GET /apis/kubesched.dev/v1alpha1/podgroups: 404")
            return [pod("a")] if kind == "Pod" else []

    api = NoCRD()
    router = WatchRouter(api, scheduler_names=["kubesched"], reporting_controller="kubesched")
    assert await router.reconcile(("PodGroup", "Pod")) == 0
    assert api.get("Pod", "ns", "a") is not None

    async def missing(kind: str) -> list[JSON]:
        raise NotFound(f"{kind}: 404")

    api.list_objects = missing  # type: ignore[method-assign]
    with pytest.raises(NotFound):
        await router.reconcile(("Node",))  # a built-in kind missing is an error
