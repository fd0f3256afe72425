"""A fault-injecting reverse proxy in front of the real kube-apiserver (e2e tests).

kubesched talks plain HTTP to the proxy on loopback (a kubeconfig from
:meth:`FaultProxy.kubeconfig`); the proxy forwards every request over HTTPS to the API
server, streaming responses (watches included), unless a rule matches first:

- ``fail_next(method, path, times, status, retry_after=None)``: answer ``status``
  (500, 429 with ``Retry-After``, ...) without forwarding;
- ``hang_next(method, path, times, seconds, forward=False)``: hold the request for
  ``seconds`` before forwarding it (when the client gave up meanwhile -- beyond its
  timeout -- it is dropped: the server never sees it), or, with ``forward=True``,
  forward it first and then hold the answer (the server did it; the client times out);
- ``hold_next(method, path)``: hold the next matching request until the test calls
  ``release()`` on the returned rule (``await rule.arrived.wait()`` first): a window,
  opened deterministically, between a scheduler's decision and its bind.

``path`` is a regular expression searched in the request path (``r"/binding$"``).
Rules are consumed in the order they were added; :attr:`FaultProxy.log` records what
happened to each request a rule matched. Runs in the test's event loop.

:meth:`FaultProxy.close` ends every request still being answered before it returns:
one held or hanging is answered 503 at once, not forwarded, and one streaming (a watch)
ends as the upstream connections close. Their clients have usually gone (a scheduler
the test stopped), and the server's shutdown does not wait for a connection whose client
has gone, so such a handler would outlive the test's event loop ("Task was destroyed but
it is pending!").
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import ssl
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from aiohttp import web

__all__ = ["FaultProxy", "Rule"]

# Hop-by-hop headers and those aiohttp sets itself.
_SKIP_REQUEST = {"host", "content-length", "transfer-encoding", "connection", "accept-encoding"}
_SKIP_RESPONSE = {"content-length", "transfer-encoding", "connection", "content-encoding"}


@dataclass
class Rule:
    method: str
    path: re.Pattern[str]
    times: int
    status: int | None = None
    retry_after: float | None = None
    delay: float = 0.0
    forward: bool = False
    hits: int = 0
    gate: asyncio.Event | None = None
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when a request matched this rule."""

    def release(self) -> None:
        """Let a held request through (``hold_next``)."""
        if self.gate is not None:
            self.gate.set()

    def matches(self, request: web.Request) -> bool:
        return (
            self.hits < self.times
            and request.method == self.method
            and self.path.search(request.path) is not None
        )


@dataclass
class FaultProxy:
    upstream: str
    """The API server's base URL (``https://127.0.0.1:<port>``)."""
    ssl_context: ssl.SSLContext
    rules: list[Rule] = field(default_factory=list)
    log: list[tuple[str, str, str]] = field(default_factory=list)
    """(method, path, what the rule did: ``500``, ``hang``, ``hang-after-forward``)."""
    forwarded: int = 0
    url: str = ""
    _runner: web.AppRunner | None = None
    _session: aiohttp.ClientSession | None = None
    _closing: asyncio.Event = field(default_factory=asyncio.Event)
    _handling: set[asyncio.Task[Any]] = field(default_factory=set)
    """The handlers of the requests being answered."""

    # -- rules ------------------------------------------------------------------------------
    def fail_next(
        self,
        method: str,
        path: str,
        times: int,
        status: int,
        retry_after: float | None = None,
    ) -> Rule:
        rule = Rule(method, re.compile(path), times, status=status, retry_after=retry_after)
        self.rules.append(rule)
        return rule

    def hang_next(
        self, method: str, path: str, times: int, seconds: float, *, forward: bool = False
    ) -> Rule:
        rule = Rule(method, re.compile(path), times, delay=seconds, forward=forward)
        self.rules.append(rule)
        return rule

    def hold_next(self, method: str, path: str) -> Rule:
        rule = Rule(method, re.compile(path), 1, gate=asyncio.Event())
        self.rules.append(rule)
        return rule

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self) -> str:
        """Listen on a free loopback port; return the proxy's URL."""
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self.ssl_context),
            timeout=aiohttp.ClientTimeout(total=None),
            auto_decompress=True,
        )
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(
            app, access_log=None, handle_signals=False, shutdown_timeout=1.0
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = getattr(site, "_server", None)
        port = int(server.sockets[0].getsockname()[1]) if server is not None else 0
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def close(self) -> None:
        self._closing.set()  # held and hanging requests are answered 503, streams end
        if self._handling:
            await asyncio.wait(set(self._handling), timeout=5.0)
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    def kubeconfig(self, directory: Path, token: str) -> Path:
        """A kubeconfig for ``token`` that points at the proxy."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "faulty", "cluster": {"server": self.url}}],
            "users": [{"name": "faulty", "user": {"token": token}}],
            "contexts": [{"name": "faulty", "context": {"cluster": "faulty", "user": "faulty"}}],
            "current-context": "faulty",
        }
        path = directory / "kubeconfig-faultproxy.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)
        return path

    # -- serving ---------------------------------------------------------------------------------
    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if self._closing.is_set():
            return self._closed(request)
        task = asyncio.current_task()
        assert task is not None  # aiohttp answers each request in a task of its own
        self._handling.add(task)
        try:
            return await self._answer(request)
        finally:
            self._handling.discard(task)

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        rule = next((r for r in self.rules if r.matches(request)), None)
        if rule is not None:
            rule.hits += 1
            rule.arrived.set()
            if rule.gate is not None:
                self.log.append((request.method, request.path, "held"))
                if await self._pause(rule.gate.wait()):
                    return self._closed(request)
                if request.transport is None or request.transport.is_closing():
                    self.log.append((request.method, request.path, "dropped"))
                    return web.Response(status=504)  # the client gave up: nobody reads it
                return await self._forward(request, stream=True)
            if rule.status is not None:
                self.log.append((request.method, request.path, str(rule.status)))
                headers = {}
                if rule.retry_after is not None:
                    headers["Retry-After"] = f"{rule.retry_after:g}"
                body = (
                    '{"kind":"Status","apiVersion":"v1","status":"Failure",'
                    f'"message":"injected by the fault proxy","code":{rule.status}}}'
                )
                return web.Response(
                    status=rule.status, text=body, content_type="application/json", headers=headers
                )
            if not rule.forward:
                self.log.append((request.method, request.path, "hang"))
                if await self._pause(asyncio.sleep(rule.delay)):
                    return self._closed(request)
                if request.transport is None or request.transport.is_closing():
                    self.log.append((request.method, request.path, "dropped"))
                    return web.Response(status=504)  # nobody reads it
            else:
                self.log.append((request.method, request.path, "hang-after-forward"))
                resp = await self._forward(request, stream=False)
                await self._pause(asyncio.sleep(rule.delay))
                return resp
        return await self._forward(request, stream=True)

    async def _pause(self, waiting: Coroutine[Any, Any, Any]) -> bool:
        """Await ``waiting`` (a hold, a hang, a stream) unless the proxy closes first:
        True then (``waiting`` is cancelled)."""
        paused = asyncio.ensure_future(waiting)
        closing = asyncio.ensure_future(self._closing.wait())
        try:
            await asyncio.wait({paused, closing}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in (paused, closing):
                waiter.cancel()
        return self._closing.is_set()

    def _closed(self, request: web.Request) -> web.Response:
        self.log.append((request.method, request.path, "closed"))
        return web.Response(status=503, text="the fault proxy closed")

    async def _forward(self, request: web.Request, *, stream: bool) -> web.StreamResponse:
        assert self._session is not None
        self.forwarded += 1
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _SKIP_REQUEST}
        body = await request.read()
        async with self._session.request(
            request.method,
            f"{self.upstream}{request.path_qs}",
            headers=headers,
            data=body or None,
        ) as upstream:
            try:
                out_headers = {
                    k: v for k, v in upstream.headers.items() if k.lower() not in _SKIP_RESPONSE
                }
                if not stream:
                    data = await upstream.read()
                    return web.Response(status=upstream.status, body=data, headers=out_headers)
                resp = web.StreamResponse(status=upstream.status, headers=out_headers)
                await resp.prepare(request)
                await self._pause(self._copy(upstream, resp))
                with contextlib.suppress(ConnectionResetError):
                    await resp.write_eof()
                return resp
            finally:
                # An answer read to its end has released its connection. One that was not
                # (the proxy closes, the client went away, the handler was cancelled) ends
                # now: closed the usual way, its TLS goodbye would wait for the API
                # server's reply, and the event loop may be gone by then (an unclosed
                # socket, reported in whatever test collects it).
                held = upstream.connection
                if held is not None and held.transport is not None:
                    held.transport.abort()

    @staticmethod
    async def _copy(upstream: aiohttp.ClientResponse, resp: web.StreamResponse) -> None:
        try:
            async for chunk in upstream.content.iter_any():
                await resp.write(chunk)
        except (ConnectionResetError, aiohttp.ClientError):
            pass  # either side went away: end the stream
