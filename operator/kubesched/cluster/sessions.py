"""kubesched's connections to the API server: per pool of connections (:data:`POOLS`),
lean connections (:mod:`~kubesched.cluster.lean_http`) and an aiohttp session built from
kubernetes_asyncio's ``Configuration`` (:func:`session_for`), with their connector
(:func:`_connector_class`); and the client-side rate limit (:class:`RateLimiter`).
:class:`kubesched.cluster.kube.KubeCluster` sends through them
(:class:`~kubesched.cluster.kube_http.KubeHTTP`, its request path), and Kopf's requests
go through sessions made here too (``operator/kopf_runner.py``)."""

from __future__ import annotations

import asyncio
import functools
import os
import ssl
import sys
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kubernetes_asyncio import client as k8s_client

if TYPE_CHECKING:
    import aiohttp

__all__ = [
    "EVENTS",
    "FD_IN_USE",
    "LISTS",
    "LIST_CONNECTIONS",
    "POOLS",
    "READS",
    "READ_BUFFER",
    "WRITES",
    "RateLimiter",
    "ResumingContext",
    "pool_for",
    "session_for",
    "tls_context",
]

READ_BUFFER = 2**21
"""aiohttp's read buffer per connection, as kubernetes_asyncio sets it: a watch event with
a large object can exceed the default (etcd takes requests up to 1.5 MiB)."""


WRITES = "writes"
EVENTS = "events"
READS = "reads"
LISTS = "lists"
POOLS = (WRITES, EVENTS, READS, LISTS)
"""The connection pools, so that no kind of request waits for a connection another kind
holds. A request read whole goes through the pool's :mod:`~kubesched.cluster.lean_http`
connections unless a proxy is configured (``KubeHTTP``'s ``LEAN_POOLS``); a streamed one
(a watch) through its aiohttp session:

* ``writes``: binds, status patches, deletions and the other writes, at most the
  configuration's ``connection_pool_maxsize`` connections;
* ``events``: the Event writers, one connection each (``event_writers``), as
  kube-scheduler writes Events through a client of their own;
* ``reads``: watches and single GETs, no limit (a watch holds its connection for its
  life);
* ``lists``: LISTs (:meth:`KubeCluster.list_pages`), at most :data:`LIST_CONNECTIONS`.
  Start-up lists every watched kind at once: on the reads' pool that was a TLS
  handshake each (~20, about 2.5 ms of CPU apiece on the way to the first bind) and as
  many connections idle for the keep-alive's 15 s after; a LIST takes a round trip or
  two, so a few connections serve them in turn.

With one pool for all three, a stream of pods starved the binds: each Event writer
takes the next Event as soon as its write returns, in the same step of the event loop,
so it took the connection it had just released before the bind woken for it ran, and
the binds waited their turn behind 16 writers that never waited (SchedulingBasic,
1000 nodes, stream arrival: 100-550 binds in flight, a bind request 2.9 s at p50
against 0.36 s for an Event); and a watch that reconnected queued behind them all,
so no pod event arrived meanwhile."""


LIST_CONNECTIONS = 4
"""Connections of the ``lists`` pool (see :data:`POOLS`)."""


def pool_for(method: str) -> str:
    """The pool of a request that names none: reads for GET, writes otherwise."""
    return READS if method == "GET" else WRITES


def session_for(
    cfg: k8s_client.Configuration,
    limit: int | None = None,
    *,
    headers: Mapping[str, str] | None = None,
) -> aiohttp.ClientSession:
    """An aiohttp session to the API server of ``cfg`` (inside a running event loop), with
    at most ``limit`` connections (None: ``cfg.connection_pool_maxsize``; 0: no limit),
    sending ``headers`` with every request.

    ``trust_env`` off: with it on (kubernetes_asyncio's own session) every request reads
    the proxy variables and ``~/.netrc`` in a worker thread, about 10% of the event loop
    at a few hundred binds a second and a thread hop per write (py-spy under ``kubesched
    bench``). The proxy is resolved once in :func:`load_client_configuration`; a netrc is
    no way to authenticate to an API server."""
    import aiohttp  # imported by then (kubesched.cluster.aio), or now

    connector = _connector_class()(
        limit=cfg.connection_pool_maxsize if limit is None else limit, ssl=tls_context(cfg)
    )
    return aiohttp.ClientSession(
        connector=connector, headers=headers, trust_env=False, read_bufsize=READ_BUFFER
    )


def tls_context(cfg: k8s_client.Configuration) -> ssl.SSLContext:
    """The TLS context of ``cfg``'s sessions: its CA, client certificate and key, whether
    it verifies the server. One context serves every session with the same settings and
    files (a file changed on disk makes a new one): without a CA of its own a context
    loads the system's whole bundle, about 25 ms, and each pool and Kopf's sessions
    would each have made one on the way to the first bind."""
    files = (cfg.ssl_ca_cert or None, cfg.cert_file or None, cfg.key_file or None)
    stamps = tuple(_stamp(f) for f in files)
    return _tls_context(
        files, stamps, bool(cfg.verify_ssl), bool(cfg.disable_strict_ssl_verification)
    )


def _stamp(path: str | None) -> tuple[int, int] | None:
    try:
        st = os.stat(path) if path else None
    except OSError:
        return None  # loading it says what is wrong
    return None if st is None else (st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=8)
def _tls_context(
    files: tuple[str | None, str | None, str | None],
    stamps: tuple[tuple[int, int] | None, ...],
    verify: bool,
    lax: bool,
) -> ssl.SSLContext:
    ca, cert, key = files
    ctx = ResumingContext(ssl.PROTOCOL_TLS_CLIENT)  # as ssl.create_default_context makes it
    if verify or ca:
        if ca:
            ctx.load_verify_locations(cafile=ca)
        else:
            ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    keylog = os.environ.get("SSLKEYLOGFILE")  # as ssl.create_default_context honours it
    if keylog and not sys.flags.ignore_environment:
        ctx.keylog_filename = keylog
    if cert:
        ctx.load_cert_chain(cert, keyfile=key)
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if lax:
        ctx.verify_flags &= ~ssl.VERIFY_X509_STRICT
    return ctx


class ResumingContext(ssl.SSLContext):
    """A client TLS context whose new connections resume the TLS session of an earlier one
    to the same server (a session ticket: TLS 1.3's PSK, or 1.2's ticket), as browsers and
    Go's clients with a session cache do.

    kubesched speaks HTTP/1.1 to the API server, a connection per request in flight: each
    pool's connections (32 for the binds, one per Event writer) and every watch hold one,
    about 70 TLS handshakes in a start and its first burst where kube-scheduler's HTTP/2
    makes two. A full handshake costs kube-apiserver a signature with its key and us the
    check of its certificate chain; a resumed one neither (against v1.37.2's apiserver on
    loopback, 100 connections each way: 1.9-2.0 ms of the API server's CPU a connection
    full, 0.6-1.2 resumed; ours 1.0-1.2 against 0.9). The server decides: a ticket it no
    longer takes (restarted, keys rotated, another server) costs nothing but the full
    handshake it would have had, and the connections after it resume that one.

    The event loop's TLS (uvloop's, asyncio's) makes each connection's ``SSLObject``
    with :meth:`wrap_bio`: the session is offered there, taken from the newest earlier
    connection to the same server name that holds a ticket (a ticket comes after the
    handshake, with the first answer), else the last one seen."""

    def __init__(self, protocol: int = ssl.PROTOCOL_TLS_CLIENT) -> None:
        super().__init__()  # the protocol went to SSLContext.__new__
        self._made: list[tuple[str | None, weakref.ref[ssl.SSLObject]]] = []
        """The last :data:`_RECENT` client connections: (server name, its SSLObject)."""
        self._sessions: dict[str | None, ssl.SSLSession] = {}
        """Server name -> the last session with a ticket seen for it."""

    def wrap_bio(
        self,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
        server_side: bool = False,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLObject:
        if server_side:
            return super().wrap_bio(incoming, outgoing, server_side, server_hostname, session)
        name = server_hostname.decode() if isinstance(server_hostname, bytes) else server_hostname
        if session is None:
            session = self._session_for(name)
        made = super().wrap_bio(incoming, outgoing, server_side, server_hostname, session)
        self._made.append((name, weakref.ref(made)))
        del self._made[:-_RECENT]
        return made

    def _session_for(self, name: str | None) -> ssl.SSLSession | None:
        for seen, ref in reversed(self._made):
            earlier = ref() if seen == name else None
            if earlier is None:
                continue
            try:
                held = earlier.session
            except ValueError:  # its handshake is not through: no session to copy yet
                continue
            if held is not None and held.has_ticket:
                self._sessions[name] = held
                break
        return self._sessions.get(name)


_RECENT = 8
"""Connections :class:`ResumingContext` remembers to take a fresh ticket from."""


FD_IN_USE = "is used by transport"
"""uvloop's words when a new socket gets the file descriptor of a transport it still
tracks (``File descriptor N is used by transport <TCPTransport ...>``): after a connect
was cancelled (an API server restart, a timeout), aiohttp with uvloop can meet it on a
later connect (MagicStack/uvloop#653, open). See :func:`_connector_class`."""


@functools.cache
def _connector_class() -> type[aiohttp.TCPConnector]:
    """aiohttp's connector, with uvloop's :data:`FD_IN_USE` on a new connection raised
    as the lost connection it is (``aiohttp.ClientConnectionError``), so the caller's
    retry applies: our binds, watches and LISTs, and Kopf's requests, which go through
    these sessions too (Kopf retries a lost connection and re-raises a RuntimeError,
    which ended its watcher and the process: the soak's API server restart met it).
    Made at the first session: aiohttp is not imported before (kubesched.cluster.aio)."""
    import aiohttp

    class Connector(aiohttp.TCPConnector):
        async def connect(self, *args: Any, **kwargs: Any) -> Any:
            try:
                return await super().connect(*args, **kwargs)
            except RuntimeError as e:
                if FD_IN_USE not in str(e):
                    raise
                raise aiohttp.ClientConnectionError(f"connecting to the API server: {e}") from e

    return Connector


class RateLimiter:
    """A token bucket: ``qps`` tokens a second, at most ``burst`` saved up (client-go's
    flowcontrol). ``qps <= 0`` disables it. Time comes from the event loop."""

    def __init__(self, qps: float, burst: int) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._tokens = float(self.burst)
        self._last: float | None = None
        self._lock = asyncio.Lock()

    async def acquire(self) -> None:
        if self.qps <= 0:
            return
        async with self._lock:
            loop = asyncio.get_running_loop()
            now = loop.time()
            if self._last is not None:
                self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
            self._last = now
            if self._tokens < 1:
                wait = (1 - self._tokens) / self.qps
                await asyncio.sleep(wait)
                self._tokens = 1.0
                self._last = loop.time()
            self._tokens -= 1
