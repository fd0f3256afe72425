"""The HTTP endpoints: /healthz, /readyz, /metrics and /explain/{namespace}/{name}.

- ``/healthz``: 200 ``ok`` whenever the event loop answers (liveness). ``kubesched run``
  imports and starts this server once its caches are synced, at the latest 2 s after
  its start (``_serve`` in :mod:`kubesched.operator.run`).
- ``/readyz``: 200 once the caches are synced, on the leader *and* on followers, as
  kube-scheduler does (its /readyz checks informer sync; leader election is not a
  readiness condition there). A follower that reported NotReady would never become
  Ready, so a rolling update of a 2-replica Deployment would stall. The body says which
  role the replica has. ``/readyz/leader`` answers 200 only on the leader, for a Service
  or a probe that wants exactly the replica that schedules.
  ``?verbose`` lists the individual checks, kube-style (``[+]informer-sync ok``).
- ``/metrics``: the scheduler's own Prometheus registry, in the text format.
- ``/explain/{namespace}/{name}``: why a pod is (or is not) placed
  (:mod:`kubesched.scheduler.explain`) as JSON; ``?output=table`` gives the table.
- ``/ui/``: the web view (:mod:`kubesched.ui`): queues, gangs, profiles and why a pod
  is pending, polling ``/ui/api/state`` and ``/ui/api/explain/{namespace}/{name}``.
- ``/debug/cache``: the cache's nodes and pods, the assumed pods and the queued pods
  with their pool and last failure reason (:mod:`kubesched.scheduler.cachedump`), as
  JSON; kube-scheduler's cache dumper, over HTTP.

Who may read them: with ``auth`` (``--delegate-auth``), every path but /healthz, /readyz
and /livez needs a bearer token the API server accepts for a user RBAC lets ``get`` that
path (:mod:`kubesched.operator.delegated_auth`, one middleware for every handler, /ui/
included); without it, ``kubesched run`` listens on localhost only (see
:attr:`kubesched.operator.settings.Settings.bind_address`).

Nothing here returns credentials: responses are built from pod and node names, plugin
names and scheduling messages only. Explaining runs on the event loop (it reads and
briefly adjusts the scheduler's cache) and costs one full Filter pass over all nodes.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable, Sequence
from typing import Any

import orjson
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from kubesched.framework.types import ObjectError, Pod
from kubesched.operator.delegated_auth import DelegatedAuth, auth_middleware
from kubesched.profile_status import ProfileBook
from kubesched.scheduler.cachedump import cache_dump
from kubesched.scheduler.explain import explain_pod
from kubesched.scheduler.scheduler import Scheduler
from kubesched.ui.web import SchedulerSource, add_routes

__all__ = ["make_app", "serve"]

log = logging.getLogger("kubesched.server")


def make_app(
    *,
    scheduler: Scheduler,
    ready: Callable[[], bool],
    leading: Callable[[], bool],
    auth: DelegatedAuth | None = None,
    profile_book: Callable[[], ProfileBook | None] = lambda: None,
) -> web.Application:
    """The aiohttp application (``serve`` runs it; tests use it with a test client).
    ``auth``: every path but the health endpoints is authenticated and authorized.
    ``profile_book``: the SchedulingProfiles and their status, for the web view."""

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    def _checks() -> list[tuple[str, bool, str]]:
        synced = ready()
        lead = leading()
        return [
            ("informer-sync", synced, "ok" if synced else "caches not synced"),
            ("leader-election", True, "leading" if lead else "following"),
        ]

    async def readyz(request: web.Request) -> web.Response:
        checks = _checks()
        ok = all(passed for _, passed, _ in checks)
        if "verbose" in request.query:
            lines = [f"[{'+' if p else '-'}]{name} {msg}" for name, p, msg in checks]
            lines.append("readyz check " + ("passed" if ok else "failed"))
            text = "\n".join(lines) + "\n"
        else:
            role = "leader" if leading() else "follower"
            text = f"ok ({role})" if ok else "caches not synced"
        return web.Response(text=text, status=200 if ok else 503)

    async def readyz_leader(request: web.Request) -> web.Response:
        if ready() and leading():
            return web.Response(text="ok (leader)")
        return web.Response(text="not leading", status=503)

    async def metrics(request: web.Request) -> web.Response:
        body = generate_latest(scheduler.metrics.registry)
        resp = web.Response(body=body)
        resp.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return resp

    async def explain(request: web.Request) -> web.Response:
        ns = request.match_info["namespace"]
        name = request.match_info["name"]
        raw = _find_pod(scheduler, ns, name)
        if raw is None:
            return _json({"error": f"pod {ns}/{name} not found"}, 404)
        try:
            pod = Pod(dict(raw))
            exp = explain_pod(scheduler, pod)
        except LookupError as e:  # no profile serves its schedulerName
            return _json({"error": str(e)}, 422)
        except ObjectError as e:
            return _json({"error": f"pod {ns}/{name}: {e}"}, 422)
        if request.query.get("output") == "table":
            return web.Response(text=exp.table())
        return _json(exp.to_dict(), 200)

    async def debug_cache(request: web.Request) -> web.Response:
        return _json(cache_dump(scheduler), 200)

    app = web.Application(middlewares=[auth_middleware(auth)] if auth is not None else [])
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/livez", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/readyz/leader", readyz_leader)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/explain/{namespace}/{name}", explain)
    app.router.add_get("/debug/cache", debug_cache)
    # The web view: its routes on this app, so the auth middleware guards them too.
    add_routes(
        app, SchedulerSource(lambda: scheduler, source="kubesched run", profile_book=profile_book)
    )
    return app


def _json(doc: Any, status: int) -> web.Response:
    return web.Response(body=orjson.dumps(doc), status=status, content_type="application/json")


def _find_pod(scheduler: Scheduler, ns: str, name: str) -> Any:
    store = scheduler.store
    if store is not None:
        raw = store.get("Pod", ns, name)
        if raw is not None:
            return raw
    for pod in scheduler.unscheduled.values():
        if pod.namespace == ns and pod.name == name:
            return pod.raw
    return None


async def serve(
    *,
    sockets: Sequence[socket.socket],
    scheduler: Scheduler,
    ready: Callable[[], bool],
    leading: Callable[[], bool],
    started: Callable[[int], None] | None = None,
    auth: DelegatedAuth | None = None,
    profile_book: Callable[[], ProfileBook | None] = lambda: None,
) -> None:
    """Serve on ``sockets`` (:func:`kubesched.operator.listen.listen`'s, bound when
    ``run`` started) until cancelled. ``started(port)`` (a test hook) gets their port,
    the one the OS picked when the setting is 0."""
    app = make_app(
        scheduler=scheduler, ready=ready, leading=leading, auth=auth, profile_book=profile_book
    )
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    try:
        for sock in sockets:
            await web.SockSite(runner, sock).start()
        host, bound = sockets[0].getsockname()[:2]
        log.info(
            "serving /healthz /readyz /metrics /explain /debug/cache /ui/ on %s:%d (%s)",
            host,
            bound,
            "authenticated and authorized by the API server" if auth else "no authentication",
        )
        if started is not None:
            started(bound)
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
