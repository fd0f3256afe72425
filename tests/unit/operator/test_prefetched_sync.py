"""The initial sync (each watched kind's informer's first listing) takes every kind from
the prefetch (one LIST each, pods and nodes first); a kind the server refuses (404, 403)
or a broken connection leaves the listing to the informer, which then ends as it would
have without the prefetch."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client as k8s_client

from kubesched.cluster.informer import Informer
from kubesched.cluster.kinds import OPTIONAL_KINDS, WATCHED
from kubesched.cluster.kube import KubeCluster
from kubesched.cluster.prefetch import Prefetch
from kubesched.framework.cluster_port import ClusterError
from kubesched.operator.handlers import DIRECT_KINDS, WatchRouter
from tests.unit.cluster.test_prefetch import kubeconfig

JSON = dict[str, Any]
PATH_OF = {k.kind: f"{k.prefix}/{k.plural}" for k in WATCHED}
SYNCED = [k.kind for k in WATCHED if k.kind in DIRECT_KINDS]
"""What the informers list at the initial sync: every watched kind."""

DROP = -1
"""A status for :attr:`FakeAPI.refuse`: the connection breaks instead of an answer."""


def obj(kind: str, name: str) -> JSON:
    meta = {"name": name, "uid": f"uid-{kind}-{name}", "resourceVersion": "7"}
    if not next(k for k in WATCHED if k.kind == kind).cluster_scoped:
        meta["namespace"] = "ns"
    return {"kind": kind, "metadata": meta}


@dataclass
class FakeAPI:
    """Two objects of every watched kind, in pages of ``limit``, but for the kinds
    ``refuse`` answers with a status (or :data:`DROP`)."""

    refuse: dict[str, int] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    """The paths GET, in order."""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(request.path)
        assert request.headers["Authorization"] == "Bearer t0ken"
        kind = next(k for k, path in PATH_OF.items() if path == request.path)
        status = self.refuse.get(kind)
        if status == DROP:
            assert request.transport is not None
            request.transport.close()
            return web.Response()
        if status is not None:
            body = {"kind": "Status", "code": status, "message": f"no {kind} for you"}
            return web.Response(status=status, body=orjson.dumps(body))
        items = [obj(kind, "a"), obj(kind, "b")]
        start = int(request.query.get("continue") or 0)
        limit = int(request.query["limit"])
        meta = {"resourceVersion": "9"}
        if start + limit < len(items):
            meta["continue"] = str(start + limit)
        page = {"kind": f"{kind}List", "metadata": meta, "items": items[start : start + limit]}
        return web.Response(body=orjson.dumps(page), content_type="application/json")

    def lists_of(self, kind: str) -> int:
        return self.requests.count(PATH_OF[kind])


@pytest.fixture
async def server() -> AsyncIterator[tuple[FakeAPI, TestServer]]:
    api = FakeAPI()
    app = web.Application()
    app.router.add_route("GET", "/{path:.*}", api.handle)
    srv = TestServer(app)
    await srv.start_server()
    try:
        yield api, srv
    finally:
        await srv.close()


@pytest.fixture
async def cluster(server: tuple[FakeAPI, TestServer]) -> AsyncIterator[KubeCluster]:
    cfg = k8s_client.Configuration(host=str(server[1].make_url("")).rstrip("/"))
    cfg.api_key = {"BearerToken": "Bearer t0ken"}
    kube = KubeCluster(cfg, reporting_instance_suffix="h", qps=0, request_timeout=5)
    try:
        yield kube
    finally:
        await kube.close()


Outcome = dict[str, list[str] | str]
"""kind -> the store's keys after its initial sync, or the error that ended it."""


async def initial_sync(cluster: KubeCluster, prefetch: Prefetch | None) -> Outcome:
    """Each kind's initial sync: its informer's first listing (``run`` starts them all at
    once; one by one here, so that the requests come in a known order)."""
    cluster.objects.clear()
    router = WatchRouter(cluster, scheduler_names=["kubesched"], reporting_controller="ks")
    outcome: Outcome = {}
    for kind in SYNCED:
        taken = functools.partial(prefetch.take, kind) if prefetch else None
        informer = Informer(cluster, kind, router.dispatch, prefetched=taken)
        try:
            await informer.relist()
        except ClusterError as e:
            outcome[kind] = str(e)
        else:
            outcome[kind] = sorted(cluster.objects.get(kind, {}))
    return outcome


@pytest.fixture
def prefetch_of(tmp_path: Path, cluster: KubeCluster) -> Callable[[], Prefetch]:
    def make() -> Prefetch:
        # pages of one: a listing of several pages is delivered whole
        return Prefetch(kubeconfig(tmp_path, cluster), page_size=1).start()

    return make


async def test_every_watched_kind_is_prefetched_pods_and_nodes_first(
    server: tuple[FakeAPI, TestServer], cluster: KubeCluster, prefetch_of: Callable[[], Prefetch]
) -> None:
    api, _ = server
    without = await initial_sync(cluster, None)
    api.requests.clear()
    prefetch = prefetch_of()
    assert await initial_sync(cluster, prefetch) == without
    assert without["Pod"] == ["ns/a", "ns/b"]
    assert without["PersistentVolumeClaim"] == ["ns/a", "ns/b"]
    assert without["StorageClass"] == ["a", "b"]
    # one LIST of each kind (two pages), the prefetch's: the sync made none of its own
    assert api.requests[:4] == [PATH_OF["Pod"]] * 2 + [PATH_OF["Node"]] * 2
    assert all(api.lists_of(k.kind) == 2 for k in WATCHED), api.requests
    assert await prefetch.take("Namespace") is None  # taken once: relists are the sync's


@pytest.mark.parametrize(
    "refuse",
    [
        pytest.param({"PodGroup": 404, "DeviceClass": 404}, id="optional kinds not served"),
        pytest.param({"ResourceSlice": 403}, id="RBAC forbids an optional kind"),
        pytest.param({"PodDisruptionBudget": 403}, id="RBAC forbids one kind"),
        pytest.param({"Namespace": 404}, id="a kind that must be served is not"),
        pytest.param({"CSINode": 500}, id="a server error"),
    ],
)
async def test_a_refused_kind_is_listed_by_the_sync_as_without_the_prefetch(
    server: tuple[FakeAPI, TestServer],
    cluster: KubeCluster,
    prefetch_of: Callable[[], Prefetch],
    refuse: dict[str, int],
) -> None:
    api, _ = server
    api.refuse = refuse
    without = await initial_sync(cluster, None)
    api.requests.clear()
    prefetch = prefetch_of()
    assert await initial_sync(cluster, prefetch) == without
    for kind, status in refuse.items():
        if kind in OPTIONAL_KINDS and status == 404:
            # not served (a CRD not installed): none listed, on the prefetch's word alone
            assert without[kind] == []
            assert api.lists_of(kind) == 1
        else:
            # the same answer, twice: the prefetch's, then the sync's own
            assert api.lists_of(kind) == 2
            assert without[kind] == f"GET {PATH_OF[kind]}: {status} no {kind} for you"
    # the refusal spoiled no other kind: one LIST each (two pages), the prefetch's
    assert all(api.lists_of(k) == 2 for k in SYNCED if k not in refuse), api.requests
    assert without["PersistentVolume"] == ["a", "b"]


async def test_a_broken_connection_ends_the_prefetch_and_the_sync_lists_the_rest(
    server: tuple[FakeAPI, TestServer], cluster: KubeCluster, prefetch_of: Callable[[], Prefetch]
) -> None:
    api, _ = server
    without = await initial_sync(cluster, None)
    api.requests.clear()
    api.refuse = {"Service": DROP}
    prefetch = prefetch_of()
    assert await asyncio.wait_for(prefetch.take("PodDisruptionBudget"), 5) is None
    api.refuse = {}
    assert await initial_sync(cluster, prefetch) == without
    before, after = SYNCED[: SYNCED.index("Service")], SYNCED[SYNCED.index("Service") :]
    assert all(api.lists_of(k) == 2 for k in before)  # prefetched, in pages of one
    assert api.lists_of("Service") == 1 + 1  # the broken request, then the sync's
    assert all(api.lists_of(k) == 1 for k in after[1:])  # the sync's own (one page)
