"""The API server connections resume their TLS session (kubesched.cluster.sessions'
ResumingContext): after the first handshake each new connection offers the server its
ticket, whether it is a bind's, an Event writer's or a watch's, and a ticket the server
no longer takes costs only the full handshake it would have had."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client as k8s_client

from kubesched.cluster.kube import KubeCluster
from kubesched.cluster.sessions import ResumingContext, tls_context
from tests.builders import make_pod
from tests.tls import server_certificate


class _Server:
    """An HTTPS server answering every request with a Status; it records, per connection
    in the order they came, whether its TLS session was resumed."""

    def __init__(self, tmp_path: Path) -> None:
        ca, cert, key = server_certificate()
        (tmp_path / "ca.crt").write_bytes(ca)
        (tmp_path / "tls.crt").write_bytes(cert)
        (tmp_path / "tls.key").write_bytes(key)
        self.dir = tmp_path
        self.resumed: dict[object, bool] = {}
        self.server: TestServer | None = None

    async def start(self, port: int = 0) -> int:
        async def handle(request: web.Request) -> web.Response:
            await request.read()
            transport = request.transport
            assert transport is not None
            tls = transport.get_extra_info("ssl_object")
            self.resumed.setdefault(transport, tls.session_reused)
            return web.json_response({"kind": "Status", "status": "Success"}, status=201)

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handle)
        # a context of its own each start: a restarted server has new ticket keys
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(self.dir / "tls.crt", self.dir / "tls.key")
        self.server = TestServer(app, host="127.0.0.1", port=port)
        await self.server.start_server(ssl=ctx)
        assert self.server.port is not None
        return self.server.port

    async def stop(self) -> None:
        assert self.server is not None
        await self.server.close()

    def cluster(self, port: int) -> KubeCluster:
        cfg = k8s_client.Configuration(host=f"https://127.0.0.1:{port}")
        cfg.ssl_ca_cert = str(self.dir / "ca.crt")
        cfg.api_key = {"BearerToken": "Bearer t"}
        cfg.connection_pool_maxsize = 4
        return KubeCluster(cfg, reporting_instance_suffix="r", qps=0, event_writers=2)


async def _bind_burst(cluster: KubeCluster, n: int) -> None:
    pods = [make_pod(f"p{i}", "shop").pod() for i in range(n)]
    await asyncio.gather(*(cluster.bind(p, f"node-{i}") for i, p in enumerate(pods)))


async def test_connections_after_the_first_resume_its_session(tmp_path: Path) -> None:
    server = _Server(tmp_path)
    port = await server.start()
    cluster = server.cluster(port)
    try:
        # the first connections open together, before any of them has a ticket: they
        # shake hands in full (and none fails for a session not through yet)
        await _bind_burst(cluster, 8)
        first = len(server.resumed)
        assert first >= 2 and not any(server.resumed.values())
        # the writes' pool is full: the next connections are a new pool's (the reads'),
        # and a watch's through aiohttp, each offering the session the binds got
        await cluster.request("GET", "/version")
        async with cluster.open("GET", "/api/v1/pods", query={"watch": "1"}) as resp:
            await resp.read()
    finally:
        await cluster.close()
        await server.stop()
    later = list(server.resumed.values())[first:]
    assert len(later) == 2 and all(later), server.resumed


async def test_a_ticket_the_server_no_longer_takes_costs_a_full_handshake(
    tmp_path: Path,
) -> None:
    server = _Server(tmp_path)
    port = await server.start()
    cluster = server.cluster(port)
    try:
        await cluster.request("GET", "/version")
        await server.stop()  # restarted on the same port: new ticket keys, old ones void
        await server.start(port)
        server.resumed.clear()
        await cluster.request("GET", "/version")  # the kept connection is gone: a new one
        await _bind_burst(cluster, 1)
    finally:
        await cluster.close()
        await server.stop()
    assert list(server.resumed.values()) == [False, True]  # refused, then the new ticket


def test_the_sessions_context_is_the_resuming_one_with_the_cas_verification(
    tmp_path: Path,
) -> None:
    ca, _, _ = server_certificate()
    (tmp_path / "ca.crt").write_bytes(ca)
    cfg = k8s_client.Configuration(host="https://127.0.0.1:1")
    cfg.ssl_ca_cert = str(tmp_path / "ca.crt")
    ctx = tls_context(cfg)
    assert isinstance(ctx, ResumingContext)
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert len(ctx.get_ca_certs()) == 1


def test_a_connection_opened_while_another_shakes_hands_starts_without_its_session() -> None:
    """An earlier connection whose handshake is under way has a session OpenSSL cannot
    copy yet (``ValueError: i2d() failed``): the next connection must still be made
    (a start's reads and binds open several at once)."""
    ctx = ResumingContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    shaking = ctx.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_hostname="api")
    with pytest.raises(ssl.SSLWantReadError):  # its ClientHello out, the answer awaited
        shaking.do_handshake()
    nxt = ctx.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_hostname="api")
    assert nxt.server_hostname == "api"
