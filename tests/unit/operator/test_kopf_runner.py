"""run_kopf: Kopf started through kopf.spawn_tasks and stopped through its stop flag ends
its own tasks and nobody else's (kopf.operator would cancel every task created after its
start: the scheduler's, the HTTP server's, the caller's)."""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Any

import kopf
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kopf._cogs.clients import api as kopf_api
from kubernetes_asyncio import client as k8s_client

from kubesched.operator import kopf_runner
from kubesched.operator.kopf_runner import kopf_settings, run_kopf
from kubesched.operator.settings import Settings


async def _discovery(request: web.Request) -> web.Response:
    return web.json_response({"versions": ["v1"]} if request.path == "/api" else {"groups": []})


async def test_stopping_kopf_ends_its_tasks_and_leaves_the_others_running() -> None:
    app = web.Application()
    app.router.add_get("/api", _discovery)
    app.router.add_get("/apis", _discovery)
    server = TestServer(app)
    await server.start_server()
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    async def login(**_: Any) -> kopf.ConnectionInfo:
        return kopf.ConnectionInfo(server=str(server.make_url("")).rstrip("/"))

    before = asyncio.all_tasks()
    synced, stop, ready = asyncio.Event(), asyncio.Event(), asyncio.Event()
    spawned = asyncio.Event()
    kopf_task = asyncio.create_task(
        run_kopf(
            after=synced,
            stop_flag=stop,
            on_spawned=spawned.set,
            registry=registry,
            settings=kopf_settings(Settings(leader_elect=False)),
            clusterwide=True,
            standalone=True,
            ready_flag=ready,
        )
    )
    await asyncio.sleep(0.05)
    assert not spawned.is_set()  # Kopf waits for the cache
    synced.set()
    await asyncio.wait_for(ready.wait(), 10)
    assert spawned.is_set()
    bystander = asyncio.create_task(asyncio.sleep(3600))  # made after Kopf started
    stop.set()
    await asyncio.wait_for(kopf_task, 10)
    assert not bystander.cancelled() and not bystander.done()
    assert asyncio.all_tasks() - before == {bystander}  # none of Kopf's left behind
    bystander.cancel()
    await server.close()


async def test_a_stop_before_the_cache_is_synced_never_starts_kopf() -> None:
    stop = asyncio.Event()
    stop.set()
    spawned: list[bool] = []
    await asyncio.wait_for(
        run_kopf(
            after=asyncio.Event(),
            stop_flag=stop,
            on_spawned=lambda: spawned.append(True),
            registry=kopf.OperatorRegistry(),
        ),
        1,
    )
    assert spawned == []


def _coroutine_function_in(filename: str) -> Any:
    """An ``async def`` whose code claims to live in ``filename`` (as Kopf's own code does
    in its package directory)."""
    namespace: dict[str, Any] = {"asyncio": asyncio}
    exec(compile("async def nap():\n    await asyncio.sleep(3600)\n", filename, "exec"), namespace)
    return namespace["nap"]


async def test_kopf_tasks_left_after_its_stop_are_ended_and_nobody_elses() -> None:
    """A task Kopf's code starts outside its root tasks (a worker sleeping out a retry's
    backoff) would wake after the stop and open a session nobody closes: it is ended; a
    task of ours started in the same context, and a Kopf task of another run, are not."""
    kopf_nap = _coroutine_function_in("/site-packages/kopf/_core/fake.py")
    our_nap = _coroutine_function_in("/work/kubesched/operator/fake.py")
    outsider = asyncio.create_task(kopf_nap())  # another run's (no recording here)
    owned: weakref.WeakSet[asyncio.Task[Any]] = weakref.WeakSet()
    factory_before = asyncio.get_running_loop().get_task_factory()
    with kopf_runner._recording_kopf_tasks(owned):
        kopfs = asyncio.create_task(kopf_nap())
        ours = asyncio.create_task(our_nap())
    assert asyncio.get_running_loop().get_task_factory() is factory_before
    assert set(owned) == {kopfs}
    await kopf_runner._end_kopf_tasks(owned)
    assert kopfs.cancelled()
    assert not ours.done() and not outsider.done()
    for t in (ours, outsider):
        t.cancel()
    await asyncio.gather(ours, outsider, return_exceptions=True)


async def test_a_request_kopf_begins_after_its_cleanup_leaves_no_connection_open(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Kopf's API discovery reads group versions in tasks that outlive its stop; one that
    reached Kopf's credentials after its cleanup had closed them made a new session whose
    connections stayed open ("unclosed transport" when the loop ended). The sessions Kopf
    uses are lent by our login handler now, and closed once Kopf's tasks are done: such a
    late request finds its session closed, and no connection outlives run_kopf. Kopf's
    line about that failure ("Request attempt #1/9 failed; TCP closed; ...", or "will
    retry: ... Connector is closed") is no ERROR at a clean stop: it is logged at DEBUG."""
    caplog.set_level(logging.DEBUG, logger="kopf")
    connections: list[asyncio.BaseTransport] = []

    async def version(request: web.Request) -> web.Response:
        assert request.transport is not None
        connections.append(request.transport)
        return web.json_response({"major": "1", "minor": "37"})

    app = web.Application()
    app.router.add_get("/api", _discovery)
    app.router.add_get("/apis", _discovery)
    app.router.add_get("/version", version)
    server = TestServer(app)
    await server.start_server()
    cfg = k8s_client.Configuration()
    cfg.host = str(server.make_url("")).rstrip("/")
    settings = kopf_settings(Settings(leader_elect=False))
    registry = kopf.OperatorRegistry()
    connected, cleaned_up = asyncio.Event(), asyncio.Event()
    late: list[asyncio.Task[Any]] = []
    # Kopf's code in a task of Kopf's: a request while Kopf runs, and one begun once its
    # cleanup is done (as a discovery read left over from the stop begins it).
    namespace: dict[str, Any] = {
        "asyncio": asyncio,
        "api": kopf_api,
        "connected": connected,
        "cleaned_up": cleaned_up,
    }
    source = (
        "async def reads(settings, logger):\n"
        "    await api.get('/version', settings=settings, logger=logger)\n"
        "    connected.set()\n"
        "    await cleaned_up.wait()\n"
        "    await asyncio.sleep(0.1)\n"  # the vault is closed right after the cleanup
        "    await api.get('/version', settings=settings, logger=logger)\n"
    )
    exec(compile(source, "/site-packages/kopf/_cogs/clients/fake.py", "exec"), namespace)

    @kopf.on.login(registry=registry)
    async def login(**_: Any) -> kopf.AiohttpSession:
        return await kopf_runner.login_info(cfg)

    @kopf.on.startup(registry=registry)
    async def startup(**kwargs: Any) -> None:
        late.append(asyncio.create_task(namespace["reads"](settings, kwargs["logger"])))

    @kopf.on.cleanup(registry=registry)
    async def cleanup(**_: Any) -> None:
        cleaned_up.set()

    synced, stop, ready = asyncio.Event(), asyncio.Event(), asyncio.Event()
    synced.set()
    kopf_task = asyncio.create_task(
        run_kopf(
            after=synced,
            stop_flag=stop,
            on_spawned=lambda: None,
            registry=registry,
            settings=settings,
            clusterwide=True,
            standalone=True,
            ready_flag=ready,
        )
    )
    await asyncio.wait_for(connected.wait(), 10)
    stop.set()
    await asyncio.wait_for(kopf_task, 10)
    assert late and late[0].done()
    await asyncio.sleep(0.1)  # the server sees the connections closed
    assert connections, "Kopf made no request"
    assert all(t.is_closing() for t in connections), "a connection of Kopf's is left open"
    await server.close()
    failed = [r for r in caplog.records if r.getMessage().startswith("Request attempt ")]
    assert failed, "the late request did not fail"
    assert {r.levelname for r in failed} == {"DEBUG"}, [r.getMessage() for r in failed]


def test_kopf_request_failures_are_its_to_report_until_the_stop() -> None:
    """Before the stop, a failed request of Kopf's (an API server restarting) stays at
    Kopf's level; lines of ours, and Kopf's other lines, are never touched."""
    stopped = asyncio.Event()
    quiet = kopf_runner._KopfLineLevels(stopped)

    def record(name: str, msg: str, level: int = logging.ERROR) -> logging.LogRecord:
        return logging.LogRecord(name, level, __file__, 1, msg, None, None)

    failed = "Request attempt #1/9 failed; will retry: GET /apis -> ClientConnectionError()"
    before = record("kopf._core.reactor.observation", failed)
    assert quiet.filter(before) and before.levelname == "ERROR"
    stopped.set()
    ours = record("kubesched.run", failed)
    other = record("kopf.objects", "Handler 'on_profile' failed permanently")
    assert quiet.filter(ours) and ours.levelname == "ERROR"
    assert quiet.filter(other) and other.levelname == "ERROR"
    logger = logging.getLogger("kopf._core.reactor.observation")
    level = logger.level
    try:
        logger.setLevel(logging.INFO)  # DEBUG not logged: the line is dropped
        assert not quiet.filter(record("kopf._core.reactor.observation", failed))
        logger.setLevel(logging.DEBUG)
        after = record("kopf._core.reactor.observation", failed)
        assert quiet.filter(after) and (after.levelno, after.levelname) == (10, "DEBUG")
    finally:
        logger.setLevel(level)


def test_kopfs_warning_about_kinds_not_served_reads_as_info() -> None:
    """Without the SchedulingProfile CRD (a setting kubesched supports: the built-in
    profiles serve), Kopf's warning at its start is an INFO line; kubesched said so first.
    Kopf's other warnings, and that line from another logger, keep their level."""
    quiet = kopf_runner._KopfLineLevels(asyncio.Event())
    unresolved = (
        "Unresolved resources cannot be served (try creating their CRDs): "
        "Selector(group='kubesched.dev', version='v1alpha1', any_name='schedulingprofiles')"
    )

    def record(name: str, msg: str) -> logging.LogRecord:
        return logging.LogRecord(name, logging.WARNING, __file__, 1, msg, None, None)

    logger = logging.getLogger("kopf._core.reactor.observation")
    level = logger.level
    try:
        logger.setLevel(logging.INFO)
        kopfs = record("kopf._core.reactor.observation", unresolved)
        assert quiet.filter(kopfs) and (kopfs.levelno, kopfs.levelname) == (20, "INFO")
        logger.setLevel(logging.WARNING)  # INFO not logged: the line is dropped
        assert not quiet.filter(record("kopf._core.reactor.observation", unresolved))
    finally:
        logger.setLevel(level)
    ambiguous = record("kopf._core.reactor.observation", "Ambiguous resources will not be served")
    ours = record("kubesched.run", unresolved)
    for kept in (ambiguous, ours):
        assert quiet.filter(kept) and kept.levelname == "WARNING"
