"""A lean HTTP/1.1 client for the short requests kubesched makes most: the binds, the
Events and the other writes (:data:`~kubesched.cluster.sessions.WRITES`,
:data:`~kubesched.cluster.sessions.EVENTS`).

A pod costs kubesched two requests, its Binding and its ``Scheduled`` Event. Through
aiohttp's ``ClientSession.request`` each took about 190 us of CPU on the client (its
general path: URL parsing, header multidicts, cookies, tracing, timers, the response
object and its stream reader); through a keep-alive connection of this module, about 80
(``python docs/request-cost.py``: 3000 Binding POSTs, 32 in flight, over TLS to one local
server). On a 2-core machine that CPU comes out of what the API server and the pods'
creators have (docs/benchmarks.md, "What bounds each number").

What it does, and no more: a request line, our headers and a body of bytes go out on a
connection of the pool (TLS with the sessions' context,
:func:`~kubesched.cluster.sessions.tls_context`); one request at a time per connection,
no pipelining; the answer is read by its ``Content-Length``, as chunks, or to the
connection's end; the connection is kept for the next request unless the server said
``Connection: close`` or the exchange failed. A pool has at most ``limit`` connections
(None: no limit); a request beyond them waits for one. A connection idle for
:data:`KEEPALIVE` seconds is closed before reuse, as aiohttp does. Errors: a lost or
refused connection, or an answer that is not HTTP/1.x, raises :class:`LostConnection`
(an ``OSError``); the caller's time limit (``asyncio.timeout``) covers the wait for a
connection, the connect and the answer, and a connection whose exchange it cut is
closed. Proxies are not spoken here: :class:`~kubesched.cluster.kube_http.KubeHTTP`
sends through aiohttp when the configuration names one.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ssl
import urllib.parse
from collections.abc import Callable
from typing import Any

from kubesched.cluster.sessions import FD_IN_USE

__all__ = ["KEEPALIVE", "LeanPool", "LostConnection", "Response"]

KEEPALIVE = 15.0
"""Seconds an idle connection is kept for reuse (aiohttp's default keep-alive)."""

_MAX_HEAD = 65536
"""The most bytes of status line and headers read before the answer is refused."""

Response = tuple[int, bytes, str | None]
"""(status, body, the ``Retry-After`` header or None)."""


class LostConnection(ConnectionError):
    """The connection failed or closed before a whole answer came."""


_POOL_CLOSED = "the API connections are closed"
"""Why a request fails once :meth:`LeanPool.close` has run."""


_EMPTY, _LENGTH, _CHUNKED, _UNTIL_CLOSE = range(4)
"""How an answer's body is framed: none (204, 304), ``Content-Length``, chunks, or the
connection's end."""


class _Head:
    """An answer's status line and headers, read once (the body may come in many reads)."""

    __slots__ = ("framing", "keep", "length", "retry_after", "status")

    def __init__(
        self, status: int, framing: int, length: int, keep: bool, retry_after: str | None
    ) -> None:
        self.status = status
        self.framing = framing
        self.length = length
        self.keep = keep
        self.retry_after = retry_after


class _Conn(asyncio.Protocol):
    """One keep-alive connection: a request written, its answer parsed as it comes. What
    was read is kept only until it is parsed: the head once, each whole chunk once (a
    LIST page of megabytes comes in hundreds of reads)."""

    __slots__ = (
        "_buf",
        "_head",
        "_parts",
        "_waiter",
        "closed",
        "ended",
        "idle_since",
        "on_end",
        "transport",
    )

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._buf = bytearray()
        self._head: _Head | None = None
        self._parts: list[bytes] = []
        """The chunks of a chunked body read so far (consumed from ``_buf``)."""
        self._waiter: asyncio.Future[tuple[Response, bool]] | None = None
        self.closed = False
        self.ended: asyncio.Future[None] | None = None
        """Done when the connection's end has come (:meth:`connection_lost`): its socket
        is closed. Made by :meth:`connection_made`."""
        self.on_end: Callable[[_Conn], None] | None = None
        self.idle_since = 0.0

    # -- asyncio.Protocol ---------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.ended = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        if self._waiter is None:  # nothing asked: not an answer we could read
            self.close()
            return
        self._buf += data
        self._parse(eof=False)

    def eof_received(self) -> bool:
        if self._waiter is not None:
            self._parse(eof=True)
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.ended is not None and not self.ended.done():
            self.ended.set_result(None)
        if self.on_end is not None:
            self.on_end(self)
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            reason = f": {exc}" if exc else ""
            waiter.set_exception(
                LostConnection(f"the API server closed the connection before answering{reason}")
            )

    # -- the exchange ---------------------------------------------------------------------------
    def send(self, payload: bytes) -> asyncio.Future[tuple[Response, bool]]:
        """Write one request; the future has (the answer, whether the connection can be
        kept)."""
        assert self.transport is not None and self._waiter is None
        waiter: asyncio.Future[tuple[Response, bool]] = asyncio.get_running_loop().create_future()
        if self.closed or self.transport.is_closing():
            waiter.set_exception(LostConnection("the connection to the API server was closed"))
            return waiter
        self._buf.clear()
        self._head, self._parts = None, []
        self._waiter = waiter
        self.transport.write(payload)
        return waiter

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        """Close at once: for a connection that carried nothing (no TLS goodbye)."""
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def _fail(self, why: str) -> None:
        """End the exchange with :class:`LostConnection`: the API server's answer ``why``
        (or, with ``why`` empty, never came), and close the connection."""
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            text = (
                f"the API server's answer {why}"
                if why
                else "the API server closed the connection before answering"
            )
            waiter.set_exception(LostConnection(text))
        self.close()

    def _parse(self, eof: bool) -> None:
        head = self._head
        if head is None:
            head = self._head = self._read_head(eof)
            if head is None:
                return  # more to come, or failed
        buf = self._buf
        body: bytes | None
        if head.framing == _EMPTY:
            body = b""
        elif head.framing == _CHUNKED:
            try:
                body = self._chunks()
            except ValueError as e:
                self._fail(str(e))
                return
            if body is None and eof:
                self._fail("ended inside its chunked body")
                return
        elif head.framing == _LENGTH:
            if len(buf) >= head.length:
                body = bytes(buf[: head.length])
                del buf[: head.length]
            else:
                body = None
                if eof:
                    self._fail(f"ended {head.length - len(buf)} bytes short of its body")
                    return
        else:  # _UNTIL_CLOSE
            body = None
            if eof:
                body = bytes(buf)
                buf.clear()
        if body is None:
            return  # more to come
        self._head, self._parts = None, []
        waiter, self._waiter = self._waiter, None
        assert waiter is not None
        if not waiter.done():
            answer = (head.status, body, head.retry_after)
            waiter.set_result((answer, head.keep and not eof and not buf))

    def _read_head(self, eof: bool) -> _Head | None:
        """The answer's head, taken from the buffer (interim 1xx answers passed over);
        None while incomplete, or once the exchange failed."""
        buf = self._buf
        while True:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if eof:
                    self._fail("ended before its headers did" if buf else "")
                elif len(buf) > _MAX_HEAD:
                    self._fail(f"has more than {_MAX_HEAD} bytes of headers")
                return None
            lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
            del buf[: end + 4]
            status_line = lines[0].split(" ", 2)
            if len(status_line) < 2 or not status_line[0].startswith("HTTP/1."):
                self._fail(f"is not HTTP/1.x: {lines[0][:80]!r}")
                return None
            try:
                status = int(status_line[1])
            except ValueError:
                self._fail(f"has no status: {lines[0][:80]!r}")
                return None
            if not 100 <= status < 200:  # an interim answer (100 Continue): the real one follows
                break
        length = -1
        chunked = False
        keep = status_line[0] != "HTTP/1.0"
        retry_after: str | None = None
        for line in lines[1:]:
            name, _, value = line.partition(":")
            name = name.strip().lower()
            if name == "content-length":
                try:
                    length = int(value)
                except ValueError:
                    length = -1
                if length < 0:
                    self._fail(f"has a bad Content-Length: {value.strip()[:40]!r}")
                    return None
            elif name == "transfer-encoding":
                chunked = "chunked" in value.lower()
            elif name == "connection":
                token = value.strip().lower()
                if token == "close":
                    keep = False
                elif token == "keep-alive":
                    keep = True
            elif name == "retry-after":
                retry_after = value.strip()
        if status in (204, 304):
            framing = _EMPTY
        elif chunked:
            framing = _CHUNKED
        elif length >= 0:
            framing = _LENGTH
        else:  # neither: the body is what comes until the connection ends
            framing, keep = _UNTIL_CLOSE, False
        return _Head(status, framing, length, keep, retry_after)

    def _chunks(self) -> bytes | None:
        """The chunked body once whole (its trailers read too); None while incomplete.
        Each whole chunk is moved from the buffer to ``_parts`` as it comes."""
        buf, parts = self._buf, self._parts
        pos = 0
        try:
            while True:
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    return None
                size_text = bytes(buf[pos:eol]).split(b";", 1)[0].strip()
                try:
                    size = int(size_text, 16)
                except ValueError:
                    size = -1
                if size < 0:
                    raise ValueError(f"has a bad chunk size {size_text[:20]!r}")
                if size == 0:
                    # the trailers (usually none) and the last CRLF
                    end = buf.find(b"\r\n\r\n", eol)
                    if end < 0:
                        return None
                    pos = end + 4
                    return b"".join(parts)
                data_start = eol + 2
                if len(buf) < data_start + size + 2:
                    return None
                parts.append(bytes(buf[data_start : data_start + size]))
                pos = data_start + size + 2
        finally:
            del buf[:pos]  # what was parsed (a bytearray drops its front without copying)


class LeanPool:
    """Keep-alive connections to one API server (see the module docstring)."""

    def __init__(
        self,
        url: str,
        *,
        ssl_context: ssl.SSLContext | None,
        server_hostname: str | None = None,
        limit: int | None = None,
        user_agent: str = "kubesched",
    ) -> None:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 (raises ValueError for a port that is not one)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.base = parts.path.rstrip("/")
        if parts.scheme == "https" and ssl_context is None:
            ssl_context = ssl.create_default_context()
        self.ssl = ssl_context if parts.scheme == "https" else None
        self.server_hostname = (server_hostname or self.host) if self.ssl else None
        self.limit = limit if limit else None
        self._fixed = (f"Host: {parts.netloc}\r\nUser-Agent: {user_agent}\r\n").encode("latin-1")
        self._idle: list[_Conn] = []
        self._count = 0
        """Connections open or being opened (idle ones included), against ``limit``."""
        self._open_conns: set[_Conn] = set()
        """Every connection made whose end has not come (idle, in use, or dropped and
        still closing: TLS says goodbye first), for :meth:`close`."""
        self._waiters: collections.deque[asyncio.Future[_Conn | None]] = collections.deque()
        self._closed = False

    async def request(
        self,
        method: str,
        target: str,
        body: bytes | None,
        headers: dict[str, str],
    ) -> Response:
        """One exchange: ``target`` is the path (with its query) under the server's URL
        (characters outside ASCII percent-encoded, as aiohttp would). Not for HEAD: its
        answer's length describes a body that does not come."""
        if not target.isascii():
            target = urllib.parse.quote(target, safe="/?&=%:;,+@!$'()*[]~")
        if body is None:
            length = b"Content-Length: 0\r\n" if method in ("POST", "PUT", "PATCH") else b""
        else:
            length = b"Content-Length: %d\r\n" % len(body)
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items()).encode("latin-1")
        payload = b"%s %s%s HTTP/1.1\r\n%s%s%s\r\n" % (
            method.encode("ascii"),
            self.base.encode("latin-1"),
            target.encode("latin-1"),
            self._fixed,
            extra,
            length,
        )
        if body:
            payload += body
        conn = await self._acquire()
        keep = False
        try:
            response, keep = await conn.send(payload)
        finally:
            self._release(conn, keep)
        return response

    async def close(self) -> None:
        """Close every connection, as aiohttp's session does: a request in flight, or
        made after this, raises :class:`LostConnection`."""
        self._closed = True
        self._idle = []
        conns = list(self._open_conns)
        for conn in conns:
            conn.close()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(LostConnection(_POOL_CLOSED))
        await _ended(conns)

    # -- the pool ---------------------------------------------------------------------------------
    async def _acquire(self) -> _Conn:
        if self._closed:
            raise LostConnection(_POOL_CLOSED)
        loop = asyncio.get_running_loop()
        now = loop.time()
        while self._idle:
            conn = self._idle.pop()
            transport = conn.transport
            if (
                not conn.closed
                and transport is not None
                and not transport.is_closing()
                and now - conn.idle_since < KEEPALIVE
            ):
                return conn
            self._drop(conn)
        if self.limit is None or self._count < self.limit:
            return await self._open()
        waiter: asyncio.Future[_Conn | None] = loop.create_future()
        self._waiters.append(waiter)
        try:
            handed = await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                handed = waiter.result()  # handed over as we were cancelled: pass it on
                if handed is not None:
                    self._release(handed, True)
                else:
                    self._wake_one()
            else:
                self._remove(waiter)
            raise
        if handed is not None:
            return handed
        return await self._open()  # a place freed: open a connection of our own

    async def _open(self) -> _Conn:
        self._count += 1
        loop = asyncio.get_running_loop()
        try:
            _, conn = await loop.create_connection(
                _Conn,
                self.host,
                self.port,
                ssl=self.ssl,
                server_hostname=self.server_hostname,
            )
        except BaseException as e:
            self._count -= 1
            self._wake_one()
            if isinstance(e, OSError) or (isinstance(e, RuntimeError) and FD_IN_USE in str(e)):
                # refused, unreachable, TLS refused; or uvloop's stale transport
                # (sessions.FD_IN_USE): a lost connection, which callers retry
                raise LostConnection(
                    f"connecting to the API server at {self.host}:{self.port}: {e}"
                ) from e
            raise
        if self._closed:
            # closed while this one was being made: no request goes out on it, and it is
            # closed now, not when a request would have ended
            self._count -= 1
            conn.abort()
            raise LostConnection(_POOL_CLOSED)
        self._open_conns.add(conn)
        conn.on_end = self._open_conns.discard
        return conn

    def _release(self, conn: _Conn, keep: bool) -> None:
        if keep and not conn.closed and not self._closed:
            while self._waiters:
                waiter = self._waiters.popleft()
                if not waiter.done():
                    waiter.set_result(conn)
                    return
            conn.idle_since = asyncio.get_running_loop().time()
            self._idle.append(conn)
            return
        self._drop(conn)
        self._wake_one()

    def _drop(self, conn: _Conn) -> None:
        conn.close()
        self._count -= 1

    def _wake_one(self) -> None:
        """A place in the pool freed: the first waiter opens a connection of its own."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _remove(self, waiter: asyncio.Future[Any]) -> None:
        with contextlib.suppress(ValueError):
            self._waiters.remove(waiter)


CLOSE_WAIT = 0.5
"""Seconds :meth:`LeanPool.close` waits for its connections' ends before cutting them."""


async def _ended(conns: list[_Conn]) -> None:
    """Return once every connection of ``conns`` has ended (its socket closed). A TLS
    connection's close first sends the server its goodbye and waits for the server's: a
    process that ended its event loop sooner left that socket open (Python warns of it as
    an unclosed transport). One the server does not answer within :data:`CLOSE_WAIT` is
    cut (no goodbye), which ends at the loop's next turn."""
    waits = [c.ended for c in conns if c.ended is not None and not c.ended.done()]
    if not waits:
        return
    _, late = await asyncio.wait(waits, timeout=CLOSE_WAIT)
    if not late:
        return
    for conn in conns:
        if conn.ended is not None and not conn.ended.done():
            conn.abort()
    await asyncio.wait(late, timeout=CLOSE_WAIT)
