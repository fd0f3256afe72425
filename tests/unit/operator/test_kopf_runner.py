"""run_kopf: Kopf started through kopf.spawn_tasks and stopped through its stop flag ends
its own tasks and nobody else's (kopf.operator would cancel every task created after its
start: the scheduler's, the HTTP server's, the caller's)."""

from __future__ import annotations

import asyncio
from typing import Any

import kopf
from aiohttp import web
from aiohttp.test_utils import TestServer

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
