"""KubeCluster against a fake API server: the exact requests and the error mapping."""

from __future__ import annotations

import asyncio
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client as k8s_client

from kubesched.api.meta import micro_time
from kubesched.cluster.kube import KubeCluster
from kubesched.cluster.sessions import RateLimiter
from kubesched.framework.cluster_port import ClusterError, Conflict, NotFound, PodCondition
from tests.builders import make_pod
from tests.unit.cluster.scheduled import record_scheduled

NOW = datetime(2025, 3, 4, 5, 6, 7, 890123, tzinfo=UTC)


@dataclass
class Request:
    method: str
    path: str
    content_type: str
    body: Any
    authorization: str


@dataclass
class FakeAPI:
    requests: list[Request] = field(default_factory=list)
    replies: dict[tuple[str, str], list[tuple[int, Any]]] = field(default_factory=dict)
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)

    def reply(self, method: str, path: str, status: int, body: Any = None) -> None:
        self.replies.setdefault((method, path), []).append((status, body))

    async def handle(self, request: web.Request) -> web.Response:
        raw = await request.read()
        self.requests.append(
            Request(
                request.method,
                request.path_qs,
                request.headers.get("Content-Type", ""),
                orjson.loads(raw) if raw else None,
                request.headers.get("Authorization", ""),
            )
        )
        if self.delay:
            await asyncio.sleep(self.delay)
        queued = self.replies.get((request.method, request.path))
        status, body = queued.pop(0) if queued else (201, {"kind": "Status", "status": "Success"})
        return web.Response(
            status=status,
            body=orjson.dumps(body),
            content_type="application/json",
            headers=self.headers,
        )


@pytest.fixture
async def fake() -> AsyncIterator[tuple[FakeAPI, KubeCluster]]:
    api = FakeAPI()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", api.handle)
    server = TestServer(app)
    await server.start_server()
    cfg = k8s_client.Configuration(host=str(server.make_url("")).rstrip("/"))
    cfg.api_key = {"BearerToken": "Bearer s3cret"}
    cluster = KubeCluster(
        cfg,
        reporting_instance_suffix="host-1",
        qps=0,
        burst=1,
        request_timeout=1.0,
        now=lambda: NOW,
    )
    try:
        yield api, cluster
    finally:
        await cluster.aclose()
        await cluster.close()
        await server.close()


def pod(**status: Any) -> Any:
    b = make_pod("web-1", "shop")
    b._obj["metadata"]["uid"] = "uid-1"
    b._obj["metadata"]["resourceVersion"] = "42"
    b._obj["status"].update(status)
    return b.pod()


async def test_bind_posts_a_binding_with_the_pod_uid(fake: tuple[FakeAPI, KubeCluster]) -> None:
    api, cluster = fake
    await cluster.bind(pod(), "node-7")
    (req,) = api.requests
    assert (req.method, req.path) == ("POST", "/api/v1/namespaces/shop/pods/web-1/binding")
    assert req.authorization == "Bearer s3cret"
    assert req.body == {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "web-1", "namespace": "shop", "uid": "uid-1"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-7"},
    }


@pytest.mark.parametrize(
    ("status", "message", "error", "retryable"),
    [
        (404, 'pods "web-1" not found', NotFound, False),
        (409, "pod web-1 is already assigned to node node-2", Conflict, False),
        (
            409,
            "Precondition failed: UID in precondition: uid-1, UID in object meta: uid-2",
            NotFound,
            False,
        ),
        (429, "too many requests", ClusterError, True),
        (500, "etcdserver: request timed out", ClusterError, True),
        (503, "unavailable", ClusterError, True),
        (422, "invalid", ClusterError, False),
    ],
    ids=["404-notfound", "409-conflict", "409-uid-precondition", "429", "500", "503", "422"],
)
async def test_bind_errors_map_to_what_the_scheduler_does(
    fake: tuple[FakeAPI, KubeCluster],
    status: int,
    message: str,
    error: type[ClusterError],
    retryable: bool,
) -> None:
    api, cluster = fake
    api.reply("POST", "/api/v1/namespaces/shop/pods/web-1/binding", status, {"message": message})
    with pytest.raises(error) as info:
        await cluster.bind(pod(), "node-7")
    assert type(info.value) is error
    assert info.value.retryable is retryable
    assert message in str(info.value)
    assert info.value.server_message == message  # what the pod's condition quotes
    assert info.value.code == str(status)  # what kubesched_bind_request_errors counts
    assert info.value.retry_after is None


async def test_retry_after_is_read_from_a_429(fake: tuple[FakeAPI, KubeCluster]) -> None:
    api, cluster = fake
    api.headers = {"Retry-After": "3"}
    api.reply("POST", "/api/v1/namespaces/shop/pods/web-1/binding", 429, {"message": "slow down"})
    with pytest.raises(ClusterError) as info:
        await cluster.bind(pod(), "node-7")
    assert (info.value.code, info.value.retry_after, info.value.retryable) == ("429", 3.0, True)


async def test_timeout_is_a_retryable_error(fake: tuple[FakeAPI, KubeCluster]) -> None:
    api, cluster = fake
    api.delay = 0.3
    cluster.request_timeout = 0.05
    with pytest.raises(ClusterError) as info:
        await cluster.bind(pod(), "node-7")
    assert info.value.retryable
    assert info.value.code == "timeout"


async def test_connection_refused_is_a_retryable_error() -> None:
    cfg = k8s_client.Configuration(host="http://127.0.0.1:9")
    cluster = KubeCluster(cfg, reporting_instance_suffix="h", qps=0)
    try:
        with pytest.raises(ClusterError) as info:
            await cluster.bind(pod(), "n")
        assert type(info.value) is ClusterError and info.value.retryable
        assert info.value.code == "connection"
    finally:
        await cluster.close()


async def test_proxy_variables_are_not_read_per_request(
    fake: tuple[FakeAPI, KubeCluster], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The proxy is resolved once, when the kubeconfig is loaded: a proxy variable set
    afterwards (here, to a port nothing listens on) does not reroute the writes."""
    api, cluster = fake
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    await cluster.bind(pod(), "node-1")
    assert [r.method for r in api.requests] == ["POST"]


async def test_event_is_an_events_k8s_io_v1_event(fake: tuple[FakeAPI, KubeCluster]) -> None:
    api, cluster = fake
    victim, preemptor = pod(), make_pod("big", "shop").pod()
    await cluster.record_event(
        victim,
        event_type="Normal",
        reason="Preempted",
        action="Preempting",
        message="Preempted by pod x on node node-7",
        reporting_controller="kubesched",
        related=preemptor,
    )
    await cluster.flush_events()
    (req,) = api.requests
    assert (req.method, req.path) == ("POST", "/apis/events.k8s.io/v1/namespaces/shop/events")
    body = req.body
    assert body["metadata"]["name"].startswith("web-1.")
    assert body["metadata"]["namespace"] == "shop"
    assert {k: v for k, v in body.items() if k != "metadata"} == {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "eventTime": "2025-03-04T05:06:07.890123Z",
        "reportingController": "kubesched",
        "reportingInstance": "kubesched-host-1",
        "action": "Preempting",
        "reason": "Preempted",
        "note": "Preempted by pod x on node node-7",
        "type": "Normal",
        "regarding": {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": "shop",
            "name": "web-1",
            "uid": "uid-1",
            "resourceVersion": "42",
        },
        "related": {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": "shop",
            "name": "big",
            "uid": preemptor.uid,
        },
    }


async def test_event_write_never_blocks_nor_fails_the_caller(
    fake: tuple[FakeAPI, KubeCluster], caplog: pytest.LogCaptureFixture
) -> None:
    api, cluster = fake
    api.delay = 0.2
    api.reply("POST", "/apis/events.k8s.io/v1/namespaces/shop/events", 500, {"message": "boom"})
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await cluster.record_event(
        pod(),
        event_type="Normal",
        reason="Scheduled",
        action="Binding",
        message="x" * 5000,
        reporting_controller="kubesched",
    )
    assert loop.time() - t0 < 0.1  # returned before the write finished
    await cluster.flush_events()
    assert "could not write event Scheduled" in caplog.text
    assert len(api.requests[0].body["note"].encode()) <= 1024


async def test_events_are_written_several_at_a_time(fake: tuple[FakeAPI, KubeCluster]) -> None:
    api, cluster = fake
    api.delay = 0.2
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    for _ in range(8):
        await record_scheduled(cluster, pod())
    await cluster.flush_events()
    assert len(api.requests) == 8
    assert loop.time() - t0 < 8 * 0.2 / 2  # not one after the other


async def test_a_full_event_queue_drops_events_and_counts_them(
    fake: tuple[FakeAPI, KubeCluster], caplog: pytest.LogCaptureFixture
) -> None:
    api, cluster = fake
    cluster.event_queue_size, cluster.event_writers = 2, 1
    for _ in range(5):  # no await in between: the writer has taken none yet
        cluster.post_event(
            {"kind": "Pod", "namespace": "shop", "name": "web-1"},
            event_type="Normal",
            reason="Scheduled",
            action="Binding",
            message="m",
            reporting_controller="kubesched",
        )
    await cluster.flush_events()
    assert len(api.requests) == 2
    assert cluster.events_dropped == 3
    assert "event queue full" in caplog.text


async def test_the_token_is_read_per_request_so_refresh_hooks_apply(
    fake: tuple[FakeAPI, KubeCluster],
) -> None:
    api, cluster = fake
    tokens = iter(["Bearer t1", "Bearer t2"])

    def refresh(cfg: k8s_client.Configuration) -> None:
        cfg.api_key["BearerToken"] = next(tokens)

    cluster.cfg.refresh_api_key_hook = refresh
    await cluster.bind(pod(), "n1")
    await cluster.bind(pod(), "n2")
    assert [r.authorization for r in api.requests] == ["Bearer t1", "Bearer t2"]


async def test_request_sends_query_and_decodes_the_reply(
    fake: tuple[FakeAPI, KubeCluster],
) -> None:
    api, cluster = fake
    api.reply("GET", "/api/v1/pods", 200, {"items": [], "metadata": {}})
    reply = await cluster.request("GET", "/api/v1/pods", query={"continue": "a b/c=", "limit": "5"})
    assert reply == {"items": [], "metadata": {}}
    # the server reads the values back as they were given, however they were escaped
    path, _, query = api.requests[0].path.partition("?")
    assert path == "/api/v1/pods"
    assert urllib.parse.parse_qs(query) == {"continue": ["a b/c="], "limit": ["5"]}


async def test_status_patch_sets_pod_scheduled_false_and_nominated_node(
    fake: tuple[FakeAPI, KubeCluster],
) -> None:
    api, cluster = fake
    msg = "0/3 nodes are available: 3 Insufficient cpu."
    await cluster.patch_pod_status(
        pod(),
        condition=PodCondition("PodScheduled", "False", "Unschedulable", msg),
        nominated_node_name="node-2",
    )
    (req,) = api.requests
    assert (req.method, req.path) == ("PATCH", "/api/v1/namespaces/shop/pods/web-1/status")
    assert req.content_type == "application/strategic-merge-patch+json"
    assert req.body == {
        "status": {
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": msg,
                    "lastProbeTime": None,
                    "lastTransitionTime": "2025-03-04T05:06:07Z",
                }
            ],
            "nominatedNodeName": "node-2",
        }
    }


async def test_status_patch_clears_nominated_node_and_keeps_transition_time(
    fake: tuple[FakeAPI, KubeCluster],
) -> None:
    api, cluster = fake
    before = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "old",
        "lastTransitionTime": "2025-01-01T00:00:00Z",
    }
    p = pod(conditions=[before], nominatedNodeName="node-2")
    await cluster.patch_pod_status(
        p,
        condition=PodCondition("PodScheduled", "False", "Unschedulable", "new"),
        nominated_node_name="",
    )
    (req,) = api.requests
    status = req.body["status"]
    assert status["nominatedNodeName"] is None  # null deletes the field
    assert status["conditions"][0]["lastTransitionTime"] == "2025-01-01T00:00:00Z"


async def test_status_patch_is_skipped_when_nothing_changes(
    fake: tuple[FakeAPI, KubeCluster],
) -> None:
    api, cluster = fake
    cond = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "m"}
    p = pod(conditions=[cond])
    await cluster.patch_pod_status(
        p,
        condition=PodCondition("PodScheduled", "False", "Unschedulable", "m"),
        nominated_node_name="",
    )
    assert api.requests == []


async def test_victim_gets_disruption_target_then_delete_with_uid_precondition(
    fake: tuple[FakeAPI, KubeCluster],
) -> None:
    api, cluster = fake
    cond = PodCondition(
        "DisruptionTarget",
        "True",
        "PreemptionByScheduler",
        "kubesched: preempting to accommodate a higher priority pod",
    )
    await cluster.delete_pod(pod(), condition=cond)
    patch, delete = api.requests
    assert (patch.method, patch.path) == ("PATCH", "/api/v1/namespaces/shop/pods/web-1/status")
    assert patch.content_type == "application/strategic-merge-patch+json"
    assert patch.body["status"]["conditions"] == [
        {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
            "message": "kubesched: preempting to accommodate a higher priority pod",
            "lastProbeTime": None,
            "lastTransitionTime": "2025-03-04T05:06:07Z",
        }
    ]
    assert (delete.method, delete.path) == ("DELETE", "/api/v1/namespaces/shop/pods/web-1")
    assert delete.body == {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "preconditions": {"uid": "uid-1"},
    }


async def test_victim_already_gone_is_not_found(fake: tuple[FakeAPI, KubeCluster]) -> None:
    api, cluster = fake
    api.reply("PATCH", "/api/v1/namespaces/shop/pods/web-1/status", 404, {"message": "gone"})
    with pytest.raises(NotFound):
        await cluster.delete_pod(pod(), condition=PodCondition("DisruptionTarget", "True"))
    assert len(api.requests) == 1


async def test_bind_volume_static_and_dynamic(fake: tuple[FakeAPI, KubeCluster]) -> None:
    api, cluster = fake
    pv: dict[str, Any] = {
        "kind": "PersistentVolume",
        "metadata": {"name": "pv-1", "resourceVersion": "5"},
        "spec": {},
    }
    cluster.put("PersistentVolume", pv)
    pvc = {
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": "shop", "uid": "c-1", "resourceVersion": "9"},
        "spec": {},
    }
    await cluster.bind_volume(pvc, "pv-1", None)
    await cluster.bind_volume(pvc, None, "node-3")
    put_pv, put_pvc = api.requests
    assert (put_pv.method, put_pv.path) == ("PUT", "/api/v1/persistentvolumes/pv-1")
    assert put_pv.body["metadata"]["resourceVersion"] == "5"
    assert put_pv.body["metadata"]["annotations"] == {"pv.kubernetes.io/bound-by-controller": "yes"}
    assert put_pv.body["spec"]["claimRef"] == {
        "kind": "PersistentVolumeClaim",
        "apiVersion": "v1",
        "namespace": "shop",
        "name": "data",
        "uid": "c-1",
        "resourceVersion": "9",
    }
    assert (put_pvc.method, put_pvc.path) == (
        "PUT",
        "/api/v1/namespaces/shop/persistentvolumeclaims/data",
    )
    assert put_pvc.body["metadata"]["annotations"] == {
        "volume.kubernetes.io/selected-node": "node-3"
    }
    assert pv["metadata"].get("annotations") is None  # the store's object is not mutated


async def test_list_objects_follows_continue_tokens(fake: tuple[FakeAPI, KubeCluster]) -> None:
    api, cluster = fake
    api.reply(
        "GET",
        "/api/v1/nodes",
        200,
        {"items": [{"metadata": {"name": "a"}}], "metadata": {"continue": "t1"}},
    )
    api.reply("GET", "/api/v1/nodes", 200, {"items": [{"metadata": {"name": "b"}}], "metadata": {}})
    items = await cluster.list_objects("Node")
    assert [i["metadata"]["name"] for i in items] == ["a", "b"]
    assert [r.path for r in api.requests] == [
        "/api/v1/nodes?limit=500",
        "/api/v1/nodes?limit=500&continue=t1",
    ]


async def test_list_pages_yields_each_page_trimmed_before_asking_for_the_next(
    fake: tuple[FakeAPI, KubeCluster],
) -> None:
    api, cluster = fake
    managed = [{"manager": "kubelet", "operation": "Update", "fieldsV1": {"f:status": {}}}]
    api.reply(
        "GET",
        "/api/v1/nodes",
        200,
        {
            "items": [{"metadata": {"name": "a", "managedFields": managed}}],
            "metadata": {"continue": "t1", "resourceVersion": "7"},
        },
    )
    api.reply("GET", "/api/v1/nodes", 200, {"items": [{"metadata": {"name": "b"}}], "metadata": {}})
    pages = []
    async for items, rv in cluster.list_pages("Node", page_size=1):
        pages.append(([i["metadata"] for i in items], rv, len(api.requests)))
    assert pages == [([{"name": "a"}], "7", 1), ([{"name": "b"}], "", 2)]
    assert api.requests[0].path == "/api/v1/nodes?limit=1"


def test_store_keys_namespaced_and_cluster_scoped() -> None:
    cluster = KubeCluster(k8s_client.Configuration(), reporting_instance_suffix="h")
    pvc = {"metadata": {"name": "data", "namespace": "shop"}}
    sc = {"metadata": {"name": "fast"}}
    assert cluster.put("PersistentVolumeClaim", pvc) is None
    cluster.put("StorageClass", sc)
    assert cluster.get("PersistentVolumeClaim", "shop", "data") is pvc
    assert cluster.get("StorageClass", "", "fast") is sc
    assert list(cluster.list("PersistentVolumeClaim", "shop")) == [pvc]
    assert list(cluster.list("PersistentVolumeClaim", "other")) == []
    assert cluster.remove("PersistentVolumeClaim", pvc) is pvc
    assert cluster.get("PersistentVolumeClaim", "shop", "data") is None


@pytest.mark.looptime
async def test_rate_limiter_allows_burst_then_qps() -> None:
    loop = asyncio.get_running_loop()
    limiter = RateLimiter(qps=10, burst=5)
    t0 = loop.time()
    for _ in range(5):
        await limiter.acquire()
    assert loop.time() - t0 == pytest.approx(0)
    for _ in range(10):
        await limiter.acquire()
    assert loop.time() - t0 == pytest.approx(1.0, abs=0.01)


def test_micro_time_has_six_fraction_digits() -> None:
    assert micro_time(datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)) == "2025-01-02T03:04:05.000000Z"
