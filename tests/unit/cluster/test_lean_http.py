"""The lean HTTP/1.1 client of the binds, Events and other writes
(kubesched.cluster.lean_http): kept connections, every way an answer can be framed, a
connection the server closes, the pool's limit, time limits, and the proxy case (aiohttp
sends then)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client as k8s_client

from kubesched.cluster import lean_http
from kubesched.cluster.kube import KubeCluster
from kubesched.cluster.lean_http import LeanPool, LostConnection
from kubesched.framework.cluster_port import ClusterError
from kubesched.framework.types import Pod
from tests.builders import make_pod
from tests.tls import server_certificate
from tests.unit.cluster.scheduled import record_scheduled

BINDING = "/api/v1/namespaces/shop/pods/web-1/binding"


def _pod() -> Pod:
    b = make_pod("web-1", "shop")
    b._obj["metadata"]["uid"] = "uid-1"
    return b.pod()


@dataclass
class Scripted:
    """A raw TCP server: each request read (head and Content-Length body) is answered
    with the next of ``answers`` (bytes, or a callable of the writer for odd endings)."""

    answers: list[bytes | Callable[[asyncio.StreamWriter], None]] = field(default_factory=list)
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)
    open_now: int = 0
    most_open: int = 0
    hold: asyncio.Event | None = None
    asked: asyncio.Event = field(default_factory=asyncio.Event)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open_now += 1
        self.most_open = max(self.most_open, self.open_now)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                body = await reader.readexactly(length) if length else b""
                self.requests.append(head + body)
                self.asked.set()
                if self.hold is not None:
                    await self.hold.wait()
                answer = self.answers.pop(0)
                if callable(answer):
                    answer(writer)
                    if writer.is_closing():
                        return
                else:
                    writer.write(answer)
                await writer.drain()
        finally:
            self.open_now -= 1
            writer.close()


@pytest.fixture
async def scripted() -> AsyncIterator[tuple[Scripted, str]]:
    s = Scripted()
    server = await asyncio.start_server(s.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield s, f"http://127.0.0.1:{port}"
    finally:
        server.close()


def ok(body: bytes = b'{"kind":"Status"}', status: str = "201 Created", extra: str = "") -> bytes:
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{extra}"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def closing(data: bytes) -> Callable[[asyncio.StreamWriter], None]:
    def answer(writer: asyncio.StreamWriter) -> None:
        writer.write(data)
        writer.close()

    return answer


async def test_answers_framed_by_length_by_chunks_or_by_the_connections_end(
    scripted: tuple[Scripted, str],
) -> None:
    server, url = scripted
    pool = LeanPool(url, ssl_context=None)
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n"
    )
    server.answers = [
        ok(b'{"a":1}'),
        chunked,
        b"HTTP/1.1 100 Continue\r\n\r\n" + ok(b"{}", "201 Created"),
        ok(b"", "204 No Content"),
        closing(b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{"to":"the end"}'),
    ]
    try:
        assert await pool.request("POST", "/a", b"{}", {}) == (201, b'{"a":1}', None)
        assert await pool.request("GET", "/b", None, {}) == (200, b"hello, world", None)
        assert await pool.request("POST", "/c", b"{}", {}) == (201, b"{}", None)
        assert await pool.request("DELETE", "/d", None, {}) == (204, b"", None)
        assert server.connections == 1  # every answer so far kept the connection
        assert await pool.request("GET", "/e", None, {}) == (200, b'{"to":"the end"}', None)
        server.answers = [ok()]
        assert (await pool.request("GET", "/f", None, {}))[0] == 201
        assert server.connections == 2  # an answer read to the end cannot be followed
    finally:
        await pool.close()


async def test_the_request_as_sent(scripted: tuple[Scripted, str]) -> None:
    server, url = scripted
    pool = LeanPool(url + "/prefix/", ssl_context=None, user_agent="kubesched/9")
    server.answers = [ok(), ok()]
    try:
        await pool.request("POST", "/x?y=1", b'{"k":1}', {"Authorization": "Bearer t"})
        await pool.request("DELETE", "/z/\u00e9", None, {})
    finally:
        await pool.close()
    port = url.rsplit(":", 1)[1]
    assert server.requests == [
        f"POST /prefix/x?y=1 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: kubesched/9\r\n"
        f'Authorization: Bearer t\r\nContent-Length: 7\r\n\r\n{{"k":1}}'.encode(),
        f"DELETE /prefix/z/%C3%A9 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: kubesched/9\r\n"
        "\r\n".encode(),
    ]


async def test_connection_close_and_http_1_0_answers_are_not_reused(
    scripted: tuple[Scripted, str],
) -> None:
    server, url = scripted
    pool = LeanPool(url, ssl_context=None)
    server.answers = [
        ok(extra="Connection: close\r\n"),
        ok(),
        b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}",
        ok(),
    ]
    try:
        for _ in range(4):
            assert (await pool.request("GET", "/", None, {}))[0] in (200, 201)
    finally:
        await pool.close()
    assert server.connections == 3  # a new one after the close and after the HTTP/1.0


async def test_a_connection_the_server_closed_while_idle_is_not_used_again(
    scripted: tuple[Scripted, str],
) -> None:
    server, url = scripted
    pool = LeanPool(url, ssl_context=None)
    server.answers = [closing(ok()), ok()]  # a keep-alive answer, then the server hangs up
    try:
        await pool.request("GET", "/", None, {})
        await asyncio.sleep(0.05)
        assert await pool.request("GET", "/", None, {}) == (201, b'{"kind":"Status"}', None)
    finally:
        await pool.close()
    assert server.connections == 2


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        (
            closing(b"HTTP/1.1 201 Created\r\nContent-Length: 100\r\n\r\n0123456789"),
            "90 bytes short",
        ),
        (closing(b"HTTP/1.1 201 Cre"), "ended before its headers did"),
        (b"SSH-2.0-OpenSSH\r\n\r\n", "is not HTTP/1.x"),
        (b"HTTP/1.1 20x Created\r\nContent-Length: 0\r\n\r\n", "has no status"),
        (b"HTTP/1.1 201 Created\r\nContent-Length: -4\r\n\r\n", "bad Content-Length"),
        (
            closing(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel"),
            "ended inside its chunked body",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n",
            "bad chunk size",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\nhello\r\n",
            "bad chunk size",
        ),
        (closing(b""), "closed the connection before answering"),
    ],
)
async def test_an_answer_cut_short_or_garbled_is_a_lost_connection_and_the_pool_recovers(
    scripted: tuple[Scripted, str],
    answer: bytes | Callable[[asyncio.StreamWriter], None],
    words: str,
) -> None:
    server, url = scripted
    pool = LeanPool(url, ssl_context=None, limit=1)
    server.answers = [answer, ok()]
    try:
        with pytest.raises(LostConnection, match=words):
            await pool.request("POST", "/", b"{}", {})
        # the broken connection was closed and its place freed (limit 1)
        assert (await pool.request("POST", "/", b"{}", {}))[0] == 201
    finally:
        await pool.close()


async def test_the_limit_holds_and_a_request_cut_by_its_time_limit_frees_its_place(
    scripted: tuple[Scripted, str],
) -> None:
    server, url = scripted
    pool = LeanPool(url, ssl_context=None, limit=2)
    server.hold = asyncio.Event()
    server.answers = [ok() for _ in range(6)]

    async def timed(limit: float) -> tuple[int, bytes, str | None]:
        async with asyncio.timeout(limit):
            return await pool.request("POST", "/", b"{}", {})

    try:
        cut = asyncio.create_task(timed(0.1))
        waiting = [asyncio.create_task(timed(5.0)) for _ in range(4)]
        with pytest.raises(TimeoutError):
            await cut
        assert server.most_open == 2  # the limit, with four more requests waiting
        server.hold.set()
        assert [(await t)[0] for t in waiting] == [201] * 4
        assert server.most_open == 2
    finally:
        server.hold.set()
        await pool.close()
    assert server.connections == 3  # the cut one was closed, a new one took its place


async def test_idle_connections_are_kept_for_the_keep_alive_only(
    scripted: tuple[Scripted, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, url = scripted
    monkeypatch.setattr(lean_http, "KEEPALIVE", 0.05)
    pool = LeanPool(url, ssl_context=None)
    server.answers = [ok(), ok(), ok()]
    try:
        await pool.request("GET", "/", None, {})
        await pool.request("GET", "/", None, {})
        assert server.connections == 1
        await asyncio.sleep(0.1)
        await pool.request("GET", "/", None, {})
        assert server.connections == 2
    finally:
        await pool.close()


async def test_requests_after_close_fail_and_waiters_are_told(
    scripted: tuple[Scripted, str],
) -> None:
    server, url = scripted
    pool = LeanPool(url, ssl_context=None, limit=1)
    server.hold = asyncio.Event()
    server.answers = [ok(), ok()]
    first = asyncio.create_task(pool.request("GET", "/", None, {}))
    second = asyncio.create_task(pool.request("GET", "/", None, {}))
    await asyncio.wait_for(server.asked.wait(), 2.0)
    await pool.close()
    with pytest.raises(LostConnection, match="closed"):
        await second
    with pytest.raises(LostConnection, match="closed the connection before answering"):
        await first  # in flight: its connection closed too, as aiohttp's session does
    server.hold.set()
    with pytest.raises(LostConnection, match="closed"):
        await pool.request("GET", "/", None, {})


async def test_a_connection_made_while_the_pool_closes_carries_no_request(
    scripted: tuple[Scripted, str],
) -> None:
    server, url = scripted
    pool = LeanPool(url, ssl_context=None)
    server.answers = [ok()]
    request = asyncio.create_task(pool.request("GET", "/", None, {}))
    await asyncio.sleep(0)  # the request is connecting
    await pool.close()
    with pytest.raises(LostConnection, match="closed"):
        await request
    for _ in range(50):  # the server sees the connection end
        if server.connections and not server.open_now:
            break
        await asyncio.sleep(0.01)
    assert server.requests == []
    assert server.open_now == 0


class SlowGoodbye:
    """A TLS server (a thread, blocking sockets) that answers one request and says its
    TLS goodbye only when ``goodbye`` is set: as an API server on a loaded machine, late."""

    def __init__(self, tmp_path: Path) -> None:
        ca, cert, key = server_certificate()
        (tmp_path / "tls.crt").write_bytes(cert)
        (tmp_path / "tls.key").write_bytes(key)
        self.client_ctx = ssl.create_default_context(cadata=ca.decode())
        self.ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.ctx.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"https://127.0.0.1:{self.listener.getsockname()[1]}"
        self.goodbye = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        raw, _ = self.listener.accept()
        with self.ctx.wrap_socket(raw, server_side=True) as tls:
            head = b""
            while b"\r\n\r\n" not in head:
                head += tls.recv(4096)
            tls.sendall(ok())
            self.goodbye.wait(10.0)
            with contextlib.suppress(OSError, ssl.SSLError):
                tls.recv(4096)  # the client's goodbye
                tls.unwrap()  # and ours

    def stop(self) -> None:
        self.goodbye.set()
        self.thread.join(10.0)
        self.listener.close()


@pytest.mark.parametrize("late", [0.1, None], ids=["late goodbye", "no goodbye"])
async def test_close_returns_with_every_tls_socket_closed(
    tmp_path: Path, late: float | None
) -> None:
    """A TLS connection's close waits for the server's goodbye: a close that returned at
    once left the socket open, and a process whose event loop ended next (``kubesched
    explain``) leaked it, which Python reports as an unclosed transport. Now ``close``
    waits for the goodbye, and cuts a connection whose goodbye does not come in
    :data:`~kubesched.cluster.lean_http.CLOSE_WAIT`."""
    server = SlowGoodbye(tmp_path)
    pool = LeanPool(server.url, ssl_context=server.client_ctx)
    try:
        assert (await pool.request("GET", "/", None, {}))[0] == 201
        (conn,) = pool._open_conns
        assert conn.transport is not None
        sock = conn.transport.get_extra_info("socket")
        assert sock.fileno() != -1
        if late is not None:
            asyncio.get_running_loop().call_later(late, server.goodbye.set)
        await pool.close()
        assert sock.fileno() == -1
        assert not pool._open_conns
    finally:
        await asyncio.to_thread(server.stop)


async def test_binds_and_events_over_tls_on_kept_connections(tmp_path: Path) -> None:
    ca, cert, key = server_certificate()
    (tmp_path / "ca.crt").write_bytes(ca)
    (tmp_path / "tls.crt").write_bytes(cert)
    (tmp_path / "tls.key").write_bytes(key)
    seen: list[tuple[str, str, str, str]] = []
    peers: set[object] = set()

    async def handle(request: web.Request) -> web.Response:
        await request.read()
        peers.add(request.transport.get_extra_info("peername") if request.transport else None)
        seen.append(
            (
                request.method,
                request.path,
                request.headers.get("Authorization", ""),
                request.headers.get("User-Agent", ""),
            )
        )
        return web.json_response({"kind": "Status", "status": "Success"}, status=201)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    server = TestServer(app, host="127.0.0.1")
    await server.start_server(ssl=server_ctx)
    cfg = k8s_client.Configuration(host=f"https://127.0.0.1:{server.port}")
    cfg.ssl_ca_cert = str(tmp_path / "ca.crt")
    cfg.api_key = {"BearerToken": "Bearer s3cret"}
    cfg.connection_pool_maxsize = 2
    cluster = KubeCluster(cfg, reporting_instance_suffix="h", qps=0, event_writers=1)
    try:
        await asyncio.gather(*(cluster.bind(_pod(), f"node-{i}") for i in range(10)))
        for _ in range(3):
            await record_scheduled(cluster, _pod())
        await cluster.flush_events()
    finally:
        await cluster.aclose()
        await cluster.close()
        await server.close()
    binds = [s for s in seen if s[1] == BINDING]
    events = [s for s in seen if s[1].endswith("/events")]
    assert len(binds) == 10 and len(events) == 3
    assert {(s[2], s[3].split("/")[0]) for s in seen} == {("Bearer s3cret", "kubesched")}
    assert len(peers) <= 3  # two for the binds, one for the Event writer: all kept


async def test_a_server_that_does_not_verify_is_refused_as_a_lost_connection(
    tmp_path: Path,
) -> None:
    """A server whose certificate the CA did not sign: the bind fails as a lost
    connection (retried), naming the TLS failure."""
    _, cert, key = server_certificate()
    other_ca, _, _ = server_certificate()
    (tmp_path / "other.crt").write_bytes(other_ca)
    (tmp_path / "tls.crt").write_bytes(cert)
    (tmp_path / "tls.key").write_bytes(key)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    app = web.Application()
    server = TestServer(app, host="127.0.0.1")
    await server.start_server(ssl=server_ctx)
    cfg = k8s_client.Configuration(host=f"https://127.0.0.1:{server.port}")
    cfg.ssl_ca_cert = str(tmp_path / "other.crt")
    cluster = KubeCluster(cfg, reporting_instance_suffix="h", qps=0)
    try:
        with pytest.raises(ClusterError, match="CERTIFICATE_VERIFY_FAILED") as err:
            await cluster.bind(_pod(), "node-1")
        assert err.value.code == "connection" and err.value.retryable
    finally:
        await cluster.close()
        await server.close()


async def test_with_a_proxy_the_writes_go_through_it(tmp_path: Path) -> None:
    """Proxies are aiohttp's: with one configured, a bind goes to the proxy, which gets
    the absolute URL of the API server."""
    seen: list[str] = []

    async def proxy(request: web.Request) -> web.Response:
        await request.read()
        seen.append(f"{request.method} {request.url}")
        return web.json_response({"kind": "Status"}, status=201)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", proxy)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    cfg = k8s_client.Configuration(host="http://kube.invalid:6443")
    cfg.proxy = f"http://127.0.0.1:{server.port}"
    cluster = KubeCluster(cfg, reporting_instance_suffix="h", qps=0)
    try:
        await cluster.bind(_pod(), "node-1")
    finally:
        await cluster.close()
        await server.close()
    assert seen == [f"POST http://kube.invalid:6443{BINDING}"]


class _Transport:
    """What a :class:`lean_http._Conn` writes to, for feeding it reads by hand."""

    def is_closing(self) -> bool:
        return False

    def write(self, data: bytes) -> None:
        pass

    def close(self) -> None:
        pass


def _read_in(pieces: list[bytes]) -> tuple[lean_http.Response, bool]:
    """The answer a connection makes of ``pieces``, each one read of the socket."""

    async def read() -> tuple[lean_http.Response, bool]:
        conn = lean_http._Conn()
        conn.connection_made(_Transport())  # type: ignore[arg-type]
        answer = conn.send(b"GET / HTTP/1.1\r\n\r\n")
        for piece in pieces:
            assert not answer.done()
            conn.data_received(piece)
        return answer.result()

    return asyncio.run(read())


_ANSWERS = {
    "chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"5;ext=1\r\nhello\r\n7\r\n, world\r\nA\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\n",
    "interim then length": b"HTTP/1.1 100 Continue\r\n\r\n"
    b'HTTP/1.1 201 Created\r\nContent-Length: 9\r\nRetry-After: 2\r\n\r\n{"a": 1}\n',
    "no content": b"HTTP/1.1 204 No Content\r\nConnection: keep-alive\r\n\r\n",
    "length, closing": b"HTTP/1.1 409 Conflict\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}",
}


@pytest.mark.parametrize("name", list(_ANSWERS))
def test_an_answer_reads_the_same_however_the_socket_cuts_it(name: str) -> None:
    wire = _ANSWERS[name]
    whole = _read_in([wire])
    assert whole[0][1] in (b"hello, world0123456789", b'{"a": 1}\n', b"", b"{}")
    for cut in range(1, len(wire)):  # every cut into two reads
        assert _read_in([wire[:cut], wire[cut:]]) == whole, cut
    for size in (1, 2, 3, 7):  # and into many
        assert _read_in([wire[i : i + size] for i in range(0, len(wire), size)]) == whole


def test_a_list_page_of_megabytes_is_parsed_as_it_comes() -> None:
    """A LIST page (4 MB in 8 KiB chunks, as the API server writes it) read 64 KiB at a
    time: each read's whole chunks leave the buffer as they are parsed, so the buffer
    never holds more than a read and a chunk (it held the whole page, and every read
    parsed it again from its first byte: 86 ms for this page, 0.9 s for 16 MB)."""
    item = b'{"metadata":{"name":"p"},"spec":{"containers":[]}},' * 40
    body = item * (4 * 1024 * 1024 // len(item))
    wire = [
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    ]
    wire += [
        b"%x\r\n%s\r\n" % (len(body[i : i + 8192]), body[i : i + 8192])
        for i in range(0, len(body), 8192)
    ]
    wire.append(b"0\r\n\r\n")
    data = b"".join(wire)

    async def read() -> tuple[lean_http.Response, bool]:
        conn = lean_http._Conn()
        conn.connection_made(_Transport())  # type: ignore[arg-type]
        answer = conn.send(b"GET /api/v1/pods?limit=500 HTTP/1.1\r\n\r\n")
        for i in range(0, len(data), 65536):
            conn.data_received(data[i : i + 65536])
            assert len(conn._buf) <= 65536 + 8192 + 16
        return answer.result()

    (status, got, _), keep = asyncio.run(read())
    assert (status, got == body, keep) == (200, True, True)
