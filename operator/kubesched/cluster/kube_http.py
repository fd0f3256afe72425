"""KubeCluster's request path: API calls through aiohttp sessions of our own, and the API
server's answers mapped to the ClusterPort's errors. :class:`KubeHTTP` is the base class
of :class:`kubesched.cluster.kube.KubeCluster`, which makes every write and read through
:meth:`~KubeHTTP.request`, :meth:`~KubeHTTP.send` and :meth:`~KubeHTTP.open`.

Requests whose answer is read whole (:meth:`~KubeHTTP.send`: the writes, the Events,
single reads and LISTs; :data:`LEAN_POOLS`) go through
:mod:`~kubesched.cluster.lean_http`'s keep-alive connections, with the sessions' TLS
context, unless the configuration names a proxy: about 40% of the client CPU of an aiohttp
request, and a pod costs two of them (its Binding and its Event). The watches (streamed,
:meth:`~KubeHTTP.open`) and a proxy's requests go through aiohttp sessions of our own, one per connection pool
(:data:`~kubesched.cluster.sessions.POOLS`, made in :mod:`kubesched.cluster.sessions`),
built from kubernetes_asyncio's ``Configuration`` as its
``ApiClient`` builds its own (host, TLS context with the CA and client certificates,
``tls_server_name``, proxy, ``connection_pool_maxsize`` for the writes) but with
``trust_env`` off (see :func:`session_for`), and the bearer token comes from
``Configuration.get_api_key_with_prefix`` on every request, so token refresh hooks
(exec plugins, rotated service-account tokens) apply. What is skipped is the generic
request path (``call_api``: parameter sanitizing, model serialization, ``json.dumps``,
header rebuilding), which was ~23% of the event loop at a few hundred binds a second
(py-spy under ``kubesched bench``): bodies are serialized once with orjson and sent as
bytes, responses are read as raw bytes and decoded with orjson when needed. The
generated models are never used: they cost about a millisecond per object and famously
fail to deserialize the ``Binding`` returned by the pods/binding subresource
(kubernetes-client/python#825).

Errors, as the scheduler reads them: 404 -> :class:`NotFound`; 409 -> :class:`Conflict`
(a failed UID precondition is :class:`NotFound`: the object we meant is gone); 429, 5xx,
timeouts and connection errors -> :class:`ClusterError` (retryable: the scheduler
retries a bind in place, then the pod goes back to the queue with backoff); other 4xx ->
:class:`ClusterError` with ``retryable=False``. Every error carries ``code`` (the HTTP
status, ``timeout`` or ``connection``) and the server's ``Retry-After``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import urllib.parse
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

import orjson
from kubernetes_asyncio import client as k8s_client

if TYPE_CHECKING:
    import aiohttp

from kubesched import __version__
from kubesched.cluster import aio
from kubesched.cluster.lean_http import LeanPool, LostConnection, Response
from kubesched.cluster.sessions import (
    EVENTS,
    LIST_CONNECTIONS,
    LISTS,
    POOLS,
    READS,
    WRITES,
    RateLimiter,
    pool_for,
    session_for,
    tls_context,
)
from kubesched.framework.cluster_port import ClusterError, Conflict, NotFound

__all__ = ["JSON_PATCH", "MERGE_PATCH", "STRATEGIC_MERGE", "KubeHTTP"]

log = logging.getLogger("kubesched.cluster.http")

JSON_PATCH = "application/json-patch+json"
"""RFC 6902 operations (``test`` first, for a change that must see what was read)."""
MERGE_PATCH = "application/merge-patch+json"
"""RFC 7386: what our CRDs' status takes (no strategic merge for custom resources)."""
STRATEGIC_MERGE = "application/strategic-merge-patch+json"
"""Built-in kinds: lists merged by their keys (a pod's conditions by ``type``)."""


LEAN_POOLS = (WRITES, EVENTS, READS, LISTS)
"""The pools whose :meth:`KubeHTTP.send` requests go through
:mod:`~kubesched.cluster.lean_http` unless the configuration names a proxy: the binds,
the Events and the other writes (a few hundred a second), and the single reads and
LISTs. Streamed answers (:meth:`KubeHTTP.open`: the watches) stay with aiohttp, whose
import waits for the first of them (:mod:`kubesched.cluster.aio`): the reads and LISTs
of the initial sync (the SchedulingProfiles, the gang APIs' discovery, a kind the
prefetch did not list) no longer import it on the way to the first bind."""

_NO_LIMIT = RateLimiter(0, 1)


def _retry_after(value: str | None) -> float | None:
    """Retry-After in seconds (the HTTP-date form is not used by the API server)."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


def _api_error(
    method: str, path: str, status: int, body: bytes, retry_after: str | None = None
) -> ClusterError:
    message = server = ""
    try:
        decoded = orjson.loads(body)
        if isinstance(decoded, dict):
            message = server = str(decoded.get("message") or "")
    except orjson.JSONDecodeError:
        message = body[:200].decode(errors="replace")
    text = f"{method} {path}: {status} {message}".rstrip()
    err: ClusterError
    if status == 404:
        err = NotFound(text)
    elif status == 409 and "Precondition failed" in message:
        err = NotFound(text)  # the UID we meant is gone (deleted, maybe re-created)
    elif status == 409:
        err = Conflict(text)
    else:
        err = ClusterError(text)
    err.server_message = server
    if status in (404, 409):
        err.code = str(status)
        return err
    if 400 <= status < 500 and status != 429:
        err.retryable = False
    err.code = str(status)
    err.retry_after = _retry_after(retry_after)
    return err


class KubeHTTP:
    """The request path (see the module docstring); :class:`~kubesched.cluster.kube.KubeCluster`
    is this plus the ClusterPort's writes, the Events and the object store."""

    def __init__(
        self,
        cfg: k8s_client.Configuration,
        *,
        qps: float,
        burst: int,
        request_timeout: float,
        event_writers: int,
    ) -> None:
        self.cfg = cfg
        """Where the API server is and how to log in (kubernetes_asyncio's ``Configuration``)."""
        self.request_timeout = request_timeout
        # The writes' bucket; the Events have a bucket of their own (KubeCluster), as
        # kube-scheduler uses a separate client for events: a burst of FailedScheduling
        # events never delays a binding.
        self._writes = RateLimiter(qps, burst)
        self.event_writers = max(1, event_writers)
        """KubeCluster's Event writers: the :data:`EVENTS` pool has a connection each."""
        self._host: str | None = None
        self._extra: dict[str, Any] = {}
        self._sessions: dict[str, aiohttp.ClientSession] = {}
        """Pool name (:data:`POOLS`) -> its session, made at its first request (aiohttp
        sessions belong in a running loop)."""
        self._lean: dict[str, LeanPool] = {}
        """Pool name (:data:`LEAN_POOLS`) -> its lean connections, made at its first request."""
        self._closed = False
        """Set by :meth:`close`: a request after it (a background write still running
        at the stop) fails as a lost connection instead of making a session nobody
        would close."""

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        query: Mapping[str, str] | None = None,
        limiter: RateLimiter | None = None,
        pool: str | None = None,
    ) -> Any:
        """One API call; returns the decoded JSON body (None when empty)."""
        data = await self.send(
            method,
            path,
            None if body is None else orjson.dumps(body),
            content_type=content_type,
            query=query,
            limiter=limiter,
            pool=pool,
        )
        return orjson.loads(data) if data else None

    async def send(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        *,
        content_type: str = "application/json",
        query: Mapping[str, str] | None = None,
        limiter: RateLimiter | None = None,
        pool: str | None = None,
    ) -> bytes:
        """The lean request path: a pre-serialized body through one of our sessions
        (``pool``, :data:`POOLS`; by default :func:`pool_for` the method), with the
        ApiClient's auth, TLS and proxy; returns the raw response body. Errors are mapped
        as the module docstring says."""
        await (limiter or self._writes).acquire()
        pool = pool or pool_for(method)
        lean = self._lean.get(pool) or (self._lean_pool(pool) if pool in LEAN_POOLS else None)
        try:
            if lean is not None:
                status, data, retry_after = await self._lean_send(
                    lean, method, path, body, content_type, query
                )
            else:
                async with self.open(
                    method, path, body, content_type=content_type, query=query, pool=pool
                ) as resp:
                    status = resp.status
                    data = await resp.read()
                    retry_after = resp.headers.get("Retry-After")
        except aio.errors(TimeoutError, LostConnection) as e:
            err = ClusterError(f"{method} {path}: {type(e).__name__}: {e}")
            err.code = "timeout" if isinstance(e, TimeoutError) else "connection"
            raise err from e
        if not 200 <= status < 300:
            raise _api_error(method, path, status, data, retry_after)
        return data

    async def _lean_send(
        self,
        lean: LeanPool,
        method: str,
        path: str,
        body: bytes | None,
        content_type: str,
        query: Mapping[str, str] | None,
    ) -> Response:
        """One exchange through the lean pool, within the request timeout."""
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        auth = await self.cfg.get_api_key_with_prefix("BearerToken")
        if auth:
            headers["Authorization"] = auth
        if query:
            path = f"{path}?{urllib.parse.urlencode(query)}"
        async with asyncio.timeout(self.request_timeout):
            return await lean.request(method, path, body, headers)

    @contextlib.asynccontextmanager
    async def open(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        *,
        content_type: str = "application/json",
        query: Mapping[str, str] | None = None,
        total: float | None = None,
        connect: float | None = None,
        pool: str | None = None,
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        """A request with the configuration's auth, TLS and proxy, its response open
        (streamed: watches), through the session of ``pool`` (default: :func:`pool_for`
        the method); no rate limit, no error mapping. It must be over within ``total``
        seconds (default ``request_timeout``), its connection made within ``connect``."""
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        auth = await self.cfg.get_api_key_with_prefix("BearerToken")
        if auth:
            headers["Authorization"] = auth
        await aio.imported()
        import aiohttp

        if self._closed:
            raise aiohttp.ClientConnectionError(
                "the API connections are closed: kubesched is stopping"
            )
        session = self._sessions.get(pool or pool_for(method))
        if session is None:
            session = self._session(pool or pool_for(method))
        async with session.request(
            method,
            f"{self._host}{path}",
            params=query,
            data=body,
            headers=headers,
            timeout=aiohttp.ClientTimeout(
                total=self.request_timeout if total is None else total, sock_connect=connect
            ),
            **self._extra,
        ) as resp:
            yield resp

    async def warm(self, pool: str) -> None:
        """Open ``pool``'s first connection now, with one ``GET /version`` (no rate limit;
        a failure is only logged): its TLS handshake then comes before the request that
        needs it. ``run`` warms the writes while the caches sync, so that the first bind
        does not pay a handshake beside the next binds' own."""
        try:
            if pool in LEAN_POOLS and self._lean_pool(pool) is not None:
                await self.send("GET", "/version", pool=pool, limiter=_NO_LIMIT)
            else:
                async with self.open("GET", "/version", pool=pool) as resp:
                    await resp.read()
        except aio.errors(TimeoutError, ClusterError) as e:
            log.debug("warming the %s connections: %s", pool, e)

    def _lean_pool(self, pool: str) -> LeanPool | None:
        """The lean connections of ``pool`` (made now), or None where aiohttp sends: a
        proxy, or after :meth:`close`."""
        found = self._lean.get(pool)
        if found is not None or self._closed:
            return found
        cfg = self.cfg
        if cfg.proxy:
            return None
        if pool == EVENTS:
            limit: int | None = self.event_writers
        elif pool == WRITES:
            limit = cfg.connection_pool_maxsize
        elif pool == LISTS:
            limit = LIST_CONNECTIONS
        elif pool == READS:
            limit = None
        else:
            raise ValueError(f"{pool!r} is not one of the lean pools {LEAN_POOLS}")
        host = str(cfg.host).rstrip("/")
        try:
            made = self._lean[pool] = LeanPool(
                host,
                ssl_context=tls_context(cfg) if host.startswith("https:") else None,
                server_hostname=cfg.tls_server_name or None,
                limit=limit,
                user_agent=f"kubesched/{__version__}",
            )
        except ValueError:
            return None  # not a URL we read: aiohttp's request says what is wrong with it
        return made

    def _session(self, pool: str) -> aiohttp.ClientSession:
        """The session of ``pool`` (:data:`POOLS`), made now; the host, proxy and TLS
        server name of the configuration are read at the first."""
        cfg = self.cfg
        if self._host is None:
            extra: dict[str, Any] = {}
            if cfg.proxy:
                extra["proxy"] = cfg.proxy
                if cfg.proxy_headers:
                    extra["proxy_headers"] = cfg.proxy_headers
            if cfg.tls_server_name:
                extra["server_hostname"] = cfg.tls_server_name
            self._extra = extra
            self._host = str(cfg.host).rstrip("/")
        if pool == EVENTS:
            limit: int | None = self.event_writers
        elif pool == READS:
            limit = 0
        elif pool == LISTS:
            limit = LIST_CONNECTIONS
        elif pool == WRITES:
            limit = None
        else:
            raise ValueError(f"no connection pool {pool!r} (one of {', '.join(POOLS)})")
        session = self._sessions[pool] = session_for(cfg, limit)
        return session

    async def close(self) -> None:
        """Close the connections (after KubeCluster's
        :meth:`~kubesched.cluster.kube.KubeCluster.aclose` and once no request is made)."""
        self._closed = True
        sessions, self._sessions = self._sessions, {}
        lean, self._lean = self._lean, {}
        # together: each waits for its TLS goodbyes (lean_http.CLOSE_WAIT at most)
        await asyncio.gather(*(pool.close() for pool in lean.values()))
        for session in sessions.values():
            await session.close()
