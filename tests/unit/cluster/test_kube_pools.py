"""KubeCluster's connection pools: binds, Events and reads never wait for each other's
connections (a fake API server whose answers to one kind of request are held)."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client as k8s_client

from kubesched.cluster.kube import KubeCluster
from kubesched.cluster.sessions import LIST_CONNECTIONS, WRITES, session_for
from kubesched.framework.cluster_port import ClusterError
from kubesched.framework.types import Pod
from tests.builders import make_pod
from tests.unit.cluster.scheduled import record_scheduled

EVENTS = "/apis/events.k8s.io/v1/namespaces/shop/events"
BINDING = "/api/v1/namespaces/shop/pods/web-1/binding"


@dataclass
class HeldAPI:
    """Answers at once, except requests to a path in ``held`` until ``release``."""

    held: set[str] = field(default_factory=set)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    served: list[str] = field(default_factory=list)
    waiting: int = 0
    peers: dict[str, set[object]] = field(default_factory=dict)
    """Path -> the client ports it was asked from (one per connection)."""

    async def handle(self, request: web.Request) -> web.Response:
        await request.read()
        peer = request.transport.get_extra_info("peername") if request.transport else None
        self.peers.setdefault(request.path, set()).add(peer)
        if request.path in self.held:
            self.waiting += 1
            await self.release.wait()
        self.served.append(f"{request.method} {request.path}")
        return web.json_response({"kind": "Status", "status": "Success"}, status=201)


@pytest.fixture
async def held() -> AsyncIterator[tuple[HeldAPI, KubeCluster]]:
    api = HeldAPI()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", api.handle)
    server = TestServer(app)
    await server.start_server()
    cfg = k8s_client.Configuration(host=str(server.make_url("")).rstrip("/"))
    cfg.connection_pool_maxsize = 2  # the writes' pool: two connections
    cluster = KubeCluster(
        cfg, reporting_instance_suffix="host-1", qps=0, burst=1, request_timeout=2.0
    )
    try:
        yield api, cluster
    finally:
        api.release.set()
        await cluster.aclose(within=2.0)
        await cluster.close()
        await server.close()


def _pod(name: str = "web-1") -> Pod:
    b = make_pod(name, "shop")
    b._obj["metadata"]["uid"] = f"uid-{name}"
    return b.pod()


async def _until(check: Callable[[], bool], within: float = 2.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not check():
        assert loop.time() < deadline, "the fake API server never saw the requests"
        await asyncio.sleep(0.01)


async def test_a_bind_is_not_held_up_by_event_writes_in_flight(
    held: tuple[HeldAPI, KubeCluster],
) -> None:
    api, cluster = held
    api.held.add(EVENTS)
    for _ in range(cluster.event_writers * 2):  # every writer busy, more queued
        await record_scheduled(cluster, _pod())
    await _until(lambda: api.waiting >= 2)  # as many as the writes have connections
    # With one pool the writers held both connections and this bind timed out.
    await cluster.bind(_pod(), "node-7")
    assert api.served == [f"POST {BINDING}"]
    api.release.set()
    await cluster.flush_events()
    assert api.served.count(f"POST {EVENTS}") == cluster.event_writers * 2


async def test_a_warmed_writes_pool_binds_on_the_connection_the_warming_opened(
    held: tuple[HeldAPI, KubeCluster],
) -> None:
    # run warms the writes while the caches sync: the first bind then pays no TLS
    # handshake beside the next binds' own
    api, cluster = held
    await cluster.warm(WRITES)
    assert api.served == ["GET /version"]
    await cluster.bind(_pod(), "node-7")
    assert api.served == ["GET /version", f"POST {BINDING}"]
    assert api.peers[BINDING] == api.peers["/version"]  # one connection, not two


async def test_warming_a_pool_the_server_refuses_is_only_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = k8s_client.Configuration(host=f"http://127.0.0.1:{port}")
    cluster = KubeCluster(cfg, reporting_instance_suffix="h", qps=0, request_timeout=2.0)
    try:
        with caplog.at_level(logging.DEBUG, logger="kubesched.cluster.http"):
            await cluster.warm(WRITES)
        assert "warming the writes connections" in caplog.text
    finally:
        await cluster.close()


async def test_a_read_or_watch_does_not_wait_for_a_write_connection(
    held: tuple[HeldAPI, KubeCluster],
) -> None:
    api, cluster = held
    api.held.add(BINDING)
    binds = [
        asyncio.create_task(cluster.bind(_pod(), "node-7"))
        for _ in range(3)  # two hold the writes' connections, one waits for them
    ]
    await _until(lambda: api.waiting == 2)
    await cluster.request("GET", "/api/v1/pods")
    async with cluster.open("GET", "/api/v1/nodes", query={"watch": "1"}) as resp:
        assert resp.status == 201
    assert api.served == ["GET /api/v1/pods", "GET /api/v1/nodes"]
    api.release.set()
    await asyncio.gather(*binds)
    assert api.served.count(f"POST {BINDING}") == 3


async def test_a_write_after_close_opens_no_connection(
    held: tuple[HeldAPI, KubeCluster],
) -> None:
    """A background write still running when kubesched stops (after close) fails as a
    lost connection; it does not open a session nobody would close."""
    api, cluster = held
    await cluster.bind(_pod("web-0"), "node-1")
    await cluster.close()
    with pytest.raises(ClusterError, match="closed: kubesched is stopping") as err:
        await cluster.bind(_pod(), "node-1")
    assert err.value.code == "connection"
    assert api.served == ["POST /api/v1/namespaces/shop/pods/web-0/binding"]


async def test_lists_take_a_few_connections_and_never_hold_up_a_watch(
    held: tuple[HeldAPI, KubeCluster],
) -> None:
    """Start-up lists every watched kind at once: a few connections serve them in turn
    (not a TLS handshake each), and a watch opens meanwhile."""
    api, cluster = held
    api.held.add("/api/v1/pods")
    lists = [asyncio.create_task(cluster.list_objects("Pod")) for _ in range(LIST_CONNECTIONS + 3)]
    await _until(lambda: api.waiting == LIST_CONNECTIONS)
    await asyncio.sleep(0.05)
    assert api.waiting == LIST_CONNECTIONS  # the others wait for a connection
    async with cluster.open("GET", "/api/v1/nodes", query={"watch": "1"}) as resp:
        assert resp.status == 201
    api.release.set()
    await asyncio.gather(*lists)
    assert api.served.count("GET /api/v1/pods") == LIST_CONNECTIONS + 3
    assert len(api.peers["/api/v1/pods"]) == LIST_CONNECTIONS


async def test_uvloops_fd_in_use_on_connect_is_a_lost_connection(
    held: tuple[HeldAPI, KubeCluster], monkeypatch: pytest.MonkeyPatch
) -> None:
    """uvloop after a cancelled connect (an API server restart: the soak met it) can
    refuse a new socket whose descriptor a stale transport still holds. That request
    fails as a lost connection (retryable: a bind is retried, a watch reconnects); the
    process went down with the RuntimeError before. The next connect works."""
    api, cluster = held
    loop = asyncio.get_running_loop()
    refusals = ["File descriptor 32 is used by transport <TCPTransport closed=False>"]

    # a single read and a write (the lean connections: loop.create_connection)
    real_connection = type(loop).create_connection

    async def create_connection(self: Any, *args: Any, **kwargs: Any) -> Any:
        if refusals:
            raise RuntimeError(refusals.pop())
        return await real_connection(self, *args, **kwargs)

    monkeypatch.setattr(type(loop), "create_connection", create_connection)
    with pytest.raises(ClusterError) as lost:
        await cluster.send("GET", "/api/v1/namespaces/shop/pods/web-1")
    assert lost.value.code == "connection" and lost.value.retryable
    assert "is used by transport" in str(lost.value)
    await cluster.send("GET", "/api/v1/namespaces/shop/pods/web-1")
    assert api.served == ["GET /api/v1/namespaces/shop/pods/web-1"]
    monkeypatch.undo()

    # a watch (aiohttp's connector) and the sessions lent to Kopf (session_for): Kopf
    # retries a lost connection and re-raises a RuntimeError (its watcher, and the
    # process, ended on it)
    original = aiohttp.TCPConnector.connect

    async def connect(self: aiohttp.TCPConnector, *args: Any, **kwargs: Any) -> Any:
        if refusals:
            raise RuntimeError(refusals.pop())
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(aiohttp.TCPConnector, "connect", connect)
    refusals.append("File descriptor 33 is used by transport <TCPTransport closed=False>")
    with pytest.raises(aiohttp.ClientConnectionError, match="is used by transport"):
        async with cluster.open("GET", "/api/v1/namespaces/shop/pods/web-1"):
            pass
    async with cluster.open("GET", "/api/v1/namespaces/shop/pods/web-1") as resp:
        await resp.read()
    lent = session_for(cluster.cfg, limit=0)
    try:
        refusals.append("File descriptor 34 is used by transport <TCPTransport closed=False>")
        with pytest.raises(aiohttp.ClientConnectionError, match="is used by transport"):
            await lent.get(f"{cluster.cfg.host}/api/v1/nodes")
    finally:
        await lent.close()

    refusals.append("some other loop bug")  # not ours to hide
    with pytest.raises(RuntimeError, match="some other loop bug"):
        async with cluster.open("GET", "/api/v1/namespaces/shop/pods/web-1"):
            pass
