"""The lean informer against a fake API server: list, watch, bookmarks, 410 Gone, reconnects."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client as k8s_client

from kubesched.cluster.informer import Informer
from kubesched.cluster.kube import KubeCluster
from kubesched.framework.cluster_port import ClusterError


def pod(name: str, rv: int, uid: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": uid or f"uid-{name}",
            "resourceVersion": str(rv),
        },
    }


def event(type_: str, obj: dict[str, Any]) -> bytes:
    return orjson.dumps({"type": type_, "object": obj}) + b"\n"


def bookmark(rv: int) -> bytes:
    return event("BOOKMARK", {"kind": "Pod", "metadata": {"resourceVersion": str(rv)}})


Watch = list[bytes] | int | Callable[[], None]
"""Lines to stream then end; an HTTP status to answer; or 'drop the connection'."""


@dataclass
class FakeAPI:
    lists: list[tuple[list[dict[str, Any]], int] | int] = field(default_factory=list)
    """Listings (items, resourceVersion) in turn, or an HTTP status to answer."""
    watches: list[Watch] = field(default_factory=list)
    queries: list[dict[str, str]] = field(default_factory=list)
    paging: tuple[list[dict[str, Any]], int] = ([], 0)
    """The rest of the listing being paged through (``limit`` / ``continue``)."""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        query = dict(request.query)
        self.queries.append(query)
        assert request.headers["Authorization"] == "Bearer t0ken"
        if "watch" not in query:
            listing = self.paging if "continue" in query else self.lists.pop(0)
            if isinstance(listing, int):
                status = {"kind": "Status", "code": listing, "message": "nope"}
                return web.Response(status=listing, body=orjson.dumps(status))
            items, rv = listing
            limit = int(query.get("limit") or 0) or len(items)
            self.paging = (items[limit:], rv)
            meta = {"resourceVersion": str(rv)}
            if items[limit:]:
                meta["continue"] = f"page-{len(self.queries)}"
            body = {"kind": "PodList", "metadata": meta, "items": items[:limit]}
            return web.Response(body=orjson.dumps(body), content_type="application/json")
        if not self.watches:
            await asyncio.sleep(3600)  # a quiet watch, until the test ends
        script = self.watches.pop(0)
        if isinstance(script, int):
            status = {"kind": "Status", "code": script, "message": "nope"}
            return web.Response(status=script, body=orjson.dumps(status))
        if callable(script):
            assert request.transport is not None
            request.transport.close()  # the connection breaks mid-watch
            return web.Response()
        resp = web.StreamResponse()
        resp.content_type = "application/json"
        await resp.prepare(request)
        for line in script:
            # split lines across chunks: the decoder must join them
            half = len(line) // 2
            await resp.write(line[:half])
            await resp.write(line[half:])
        await resp.write_eof()
        return resp

    def watch_queries(self) -> list[dict[str, str]]:
        return [q for q in self.queries if "watch" in q]


def cluster_of(server: TestServer) -> KubeCluster:
    """Our client of ``server``, logged in with the token the fakes expect."""
    cfg = k8s_client.Configuration(host=str(server.make_url("")).rstrip("/"))
    cfg.api_key = {"BearerToken": "Bearer t0ken"}
    return KubeCluster(cfg, reporting_instance_suffix="h", qps=0, request_timeout=5)


@pytest.fixture
async def fake() -> AsyncIterator[tuple[FakeAPI, KubeCluster]]:
    api = FakeAPI()
    app = web.Application()
    app.router.add_route("GET", "/api/v1/pods", api.handle)
    app.router.add_route("GET", "/apis/kubesched.dev/v1alpha1/podgroups", api.handle)
    server = TestServer(app)
    await server.start_server()
    cluster = cluster_of(server)
    try:
        yield api, cluster
    finally:
        await cluster.aclose()
        await cluster.close()
        await server.close()


Seen = list[tuple[str | None, str, str]]


async def run_until(
    cluster: KubeCluster, condition: Callable[[Seen], bool], *, kind: str = "Pod"
) -> tuple[Informer, Seen]:
    """Run an informer of ``kind`` until ``condition(seen)``."""
    seen: Seen = []
    done = asyncio.Event()

    def dispatch(got: str, event_type: str | None, obj: dict[str, Any]) -> None:
        assert got == kind and obj["kind"] == kind
        meta = obj["metadata"]
        seen.append((event_type, meta["name"], meta["resourceVersion"]))
        if condition(seen):
            done.set()

    informer = Informer(
        cluster,
        kind,
        dispatch,
        page_size=2,
        backoff_initial=0.01,
        backoff_max=0.05,
        absent_poll=0.05,
    )
    task = asyncio.create_task(informer.run())
    try:
        async with asyncio.timeout(5):
            await done.wait()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return informer, seen


async def test_list_then_watch_from_its_resource_version_with_bookmarks(
    fake: tuple[FakeAPI, KubeCluster],
) -> None:
    api, cluster = fake
    api.lists = [([pod("a", 5), pod("b", 6)], 10)]
    api.watches = [
        [event("ADDED", pod("c", 11)), bookmark(15), event("MODIFIED", pod("a", 16))],
        [event("DELETED", pod("b", 20))],
    ]
    informer, seen = await run_until(cluster, lambda s: len(s) >= 5)
    assert seen == [
        (None, "a", "5"),
        (None, "b", "6"),
        ("ADDED", "c", "11"),
        ("MODIFIED", "a", "16"),
        ("DELETED", "b", "20"),
    ]
    first, second = api.watch_queries()[:2]
    assert first["resourceVersion"] == "10" and first["allowWatchBookmarks"] == "true"
    assert second["resourceVersion"] == "16"  # resumed where the first watch ended
    assert informer.lists == 1 and informer.synced.is_set()
    assert set(informer.known) == {"ns/a", "ns/c"}


async def test_a_bookmark_moves_the_resource_version_only(
    fake: tuple[FakeAPI, KubeCluster],
) -> None:
    api, cluster = fake
    api.lists = [([], 10)]
    api.watches = [[bookmark(42)], [event("ADDED", pod("a", 43))]]
    _, seen = await run_until(cluster, lambda s: len(s) >= 1)
    assert seen == [("ADDED", "a", "43")]
    assert api.watch_queries()[1]["resourceVersion"] == "42"


@pytest.mark.parametrize("gone", ["error-event", "http-status"])
async def test_410_gone_relists_and_synthesizes_deletes(
    fake: tuple[FakeAPI, KubeCluster], gone: str
) -> None:
    api, cluster = fake
    api.lists = [
        ([pod("a", 5), pod("b", 6), pod("c", 7)], 10),
        # after the relist: a unchanged, b gone, c re-created under a new uid, d new
        ([pod("a", 5), pod("c", 30, uid="uid-c2"), pod("d", 31)], 40),
    ]
    expired = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}
    first: Watch = [event("ERROR", expired)] if gone == "error-event" else 410
    api.watches = [[event("MODIFIED", pod("b", 12))], first]
    informer, seen = await run_until(cluster, lambda s: len(s) >= 9)
    assert seen[:4] == [
        (None, "a", "5"),
        (None, "b", "6"),
        (None, "c", "7"),
        ("MODIFIED", "b", "12"),
    ]
    relisted = seen[4:]
    assert relisted[:3] == [(None, "a", "5"), (None, "c", "30"), (None, "d", "31")]
    # the last versions seen of what vanished (b) or was replaced (c)
    assert sorted(relisted[3:5]) == [("DELETED", "b", "12"), ("DELETED", "c", "7")]
    assert informer.lists == 2
    assert api.watch_queries()[-1]["resourceVersion"] == "40"


async def test_reconnects_with_backoff_from_the_last_resource_version(
    fake: tuple[FakeAPI, KubeCluster], caplog: pytest.LogCaptureFixture
) -> None:
    api, cluster = fake
    api.lists = [([], 10)]
    api.watches = [
        [event("ADDED", pod("a", 11))],
        lambda: None,  # the connection breaks
        500,
        [event("MODIFIED", pod("a", 12))],
    ]
    informer, seen = await run_until(cluster, lambda s: len(s) >= 2)
    assert seen == [("ADDED", "a", "11"), ("MODIFIED", "a", "12")]
    assert [q["resourceVersion"] for q in api.watch_queries()[:4]] == ["10", "11", "11", "11"]
    assert informer.lists == 1  # no relist for a broken connection
    assert "Pod watch failed" in caplog.text


async def test_a_list_failure_is_retried(fake: tuple[FakeAPI, KubeCluster]) -> None:
    api, cluster = fake
    calls = 0
    real = cluster.request

    async def flaky(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            from kubesched.framework.cluster_port import ClusterError

            raise ClusterError("GET /api/v1/pods: 503")
        return await real(*args, **kwargs)

    cluster.request = flaky  # type: ignore[method-assign]
    api.lists = [([pod("a", 5)], 10)]
    informer, seen = await run_until(cluster, lambda s: len(s) >= 1)
    assert seen == [(None, "a", "5")] and informer.synced.is_set()


async def test_listing_pages_are_delivered_as_they_arrive_without_managed_fields(
    fake: tuple[FakeAPI, KubeCluster],
) -> None:
    # managedFields (server-side apply bookkeeping) is often half of a pod: never kept
    api, cluster = fake
    managed = [{"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {}}}]

    def with_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
        obj["metadata"]["managedFields"] = managed
        return obj

    api.lists = [([with_managed_fields(pod(n, i)) for i, n in enumerate("abc", 1)], 10)]
    api.watches = [[event("MODIFIED", with_managed_fields(pod("a", 11)))]]
    delivered: list[tuple[str | None, str, int, bool]] = []
    done = asyncio.Event()

    def dispatch(kind: str, event_type: str | None, obj: dict[str, Any]) -> None:
        lists_so_far = sum("watch" not in q for q in api.queries)
        meta = obj["metadata"]
        delivered.append((event_type, meta["name"], lists_so_far, "managedFields" in meta))
        if len(delivered) == 4:
            done.set()

    informer = Informer(cluster, "Pod", dispatch, page_size=2)
    task = asyncio.create_task(informer.run())
    try:
        async with asyncio.timeout(5):
            await done.wait()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert delivered == [
        (None, "a", 1, False),  # the first page, before the second was asked for
        (None, "b", 1, False),
        (None, "c", 2, False),
        ("MODIFIED", "a", 2, False),
    ]
    assert [q.get("continue") for q in api.queries if "watch" not in q] == [None, "page-1"]
    assert informer.resource_version == "11"


def group(name: str, rv: int) -> dict[str, Any]:
    return {**pod(name, rv), "apiVersion": "kubesched.dev/v1alpha1", "kind": "PodGroup"}


async def test_an_optional_kind_not_served_is_none_until_it_is(
    fake: tuple[FakeAPI, KubeCluster], caplog: pytest.LogCaptureFixture
) -> None:
    """PodGroups without their CRD: synced with none (the start goes on), listed again
    until the CRD is installed, then watched; uninstalled, what was held is DELETED."""
    caplog.set_level(logging.INFO, logger="kubesched")
    api, cluster = fake
    api.lists = [404, 404, ([group("g", 5)], 10), 404, 404]
    api.watches = [404]  # the CRD is deleted while watched
    informer, seen = await run_until(cluster, lambda s: len(s) >= 2, kind="PodGroup")
    assert seen == [(None, "g", "5"), ("DELETED", "g", "5")]
    assert informer.synced.is_set() and informer.served is False and not informer.known
    logged = [r.getMessage() for r in caplog.records if r.name == "kubesched.cluster.informer"]
    assert [m for m in logged if "served" in m] == [
        "PodGroup is not served (its CRD is not installed, or its API group is off): none "
        "listed; looking again every 0 s",
        "PodGroup is served now: 1 listed",
        "PodGroup watch: not served any more (404): relisting",
        "PodGroup is not served (its CRD is not installed, or its API group is off): none "
        "listed; looking again every 0 s",
    ]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize("status", [403, 404])
async def test_a_kind_refused_or_not_served_at_the_first_listing_ends_the_start(
    fake: tuple[FakeAPI, KubeCluster], status: int
) -> None:
    """Pods (which must be served) answered 404, or 403 by RBAC: the informer ends with
    the API server's words instead of retrying while nothing is ever scheduled."""
    api, cluster = fake
    api.lists = [status]
    informer = Informer(cluster, "Pod", lambda *_: None, backoff_initial=0.01)
    with pytest.raises(ClusterError, match=f"GET /api/v1/pods: {status} nope"):
        await asyncio.wait_for(informer.run(), 5)
    assert not informer.synced.is_set()


async def test_the_first_watch_waits_for_its_gate_and_misses_nothing(
    fake: tuple[FakeAPI, KubeCluster],
) -> None:
    """``run`` opens most watches once the first bind is out: listed at once, watched
    later, from the listing's resourceVersion (what changed meanwhile arrives then)."""
    api, cluster = fake
    api.lists = [([pod("a", 5)], 10)]
    api.watches = [[event("ADDED", pod("b", 11))]]
    seen: Seen = []
    gate, watched = asyncio.Event(), asyncio.Event()

    def dispatch(_: str, event_type: str | None, obj: dict[str, Any]) -> None:
        seen.append((event_type, obj["metadata"]["name"], obj["metadata"]["resourceVersion"]))
        if event_type is not None:
            watched.set()

    informer = Informer(cluster, "Pod", dispatch, watch_after=gate)
    task = asyncio.create_task(informer.run())
    try:
        async with asyncio.timeout(5):
            await informer.synced.wait()
            await asyncio.sleep(0.2)
            assert seen == [(None, "a", "5")] and not api.watch_queries()
            gate.set()
            await watched.wait()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert seen == [(None, "a", "5"), ("ADDED", "b", "11")]
    assert api.watch_queries()[0]["resourceVersion"] == "10"
