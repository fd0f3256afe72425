"""The first LIST made ahead in a thread: the informer delivers its pages and watches from
their resourceVersion without listing again; when the prefetch failed it lists itself."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import TestServer

from kubesched.api.gang_apis import STORE_KINDS, GangAPI
from kubesched.cluster import plain_login
from kubesched.cluster.informer import Informer
from kubesched.cluster.kube import KubeCluster
from kubesched.cluster.prefetch import DOCUMENTS, Prefetch
from kubesched.operator.gang_sources import GangSources
from tests.unit.cluster.test_informer import FakeAPI, bookmark, cluster_of, fake, pod

__all__ = ["fake"]  # the fixture, shared with test_informer


def kubeconfig(tmp_path: Path, cluster: KubeCluster, token: str = "t0ken") -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": cluster.cfg.host}}],
                "users": [{"name": "u", "user": {"token": token}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return str(path)


async def first_listing(
    api: FakeAPI, cluster: KubeCluster, prefetch: Prefetch
) -> tuple[Informer, list[tuple[str | None, str]]]:
    seen: list[tuple[str | None, str]] = []

    def dispatch(kind: str, event_type: str | None, obj: dict[str, Any]) -> None:
        seen.append((event_type, obj["metadata"]["name"]))

    informer = Informer(
        cluster, "Pod", dispatch, prefetched=lambda: prefetch.take("Pod"), backoff_initial=0.01
    )
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 10)
        for _ in range(500):  # the watch request follows the listing
            if api.watch_queries():
                break
            await asyncio.sleep(0.01)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return informer, seen


@pytest.mark.parametrize("process", [False, True], ids=["thread", "child"])
async def test_the_informer_delivers_the_prefetched_pages_and_watches_from_them(
    fake: tuple[FakeAPI, KubeCluster], tmp_path: Path, process: bool
) -> None:
    api, cluster = fake
    api.lists.append(([pod("a", 5), pod("b", 6), pod("c", 7)], 9))
    api.watches.append([bookmark(10)])
    prefetch = Prefetch(
        kubeconfig(tmp_path, cluster), kinds=("Pod",), page_size=2, process=process
    ).start()
    informer, seen = await first_listing(api, cluster, prefetch)
    assert seen == [(None, "a"), (None, "b"), (None, "c")]
    # two pages, then the watch from the listing's resourceVersion: no second LIST
    lists = [q for q in api.queries if "watch" not in q]
    assert [q.get("limit") for q in lists] == ["2", "2"]
    assert api.watch_queries()[0]["resourceVersion"] == "9"
    assert informer.lists == 1
    assert await prefetch.take("Pod") is None  # taken once; a relist is the informer's
    # the login it read reaches kubesched run's process, for its client configuration
    assert prefetch.login == plain_login.parse(prefetch.kubeconfig)
    assert prefetch.login is not None and prefetch.login.token == "Bearer t0ken"


@pytest.mark.parametrize("process", [False, True], ids=["thread", "child"])
async def test_a_failed_prefetch_leaves_the_listing_to_the_informer(
    fake: tuple[FakeAPI, KubeCluster], tmp_path: Path, process: bool
) -> None:
    api, cluster = fake
    api.lists.append(([pod("a", 5)], 9))
    # a token the server refuses (its handler fails the request): the prefetch gives up
    prefetch = Prefetch(
        kubeconfig(tmp_path, cluster, token="wrong"), kinds=("Pod",), process=process
    ).start()
    assert await prefetch.take("Pod") is None
    prefetch = Prefetch(
        kubeconfig(tmp_path, cluster, token="wrong"), kinds=("Pod",), process=process
    ).start()
    _, seen = await first_listing(api, cluster, prefetch)
    assert seen == [(None, "a")]
    assert len([q for q in api.queries if "watch" not in q]) == 3  # 2 refused, then its own


def silent_kubeconfig(tmp_path: Path, port: int) -> str:
    path = tmp_path / "silent-kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return str(path)


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="the child listing is Linux's")
async def test_a_child_still_listing_at_the_close_is_stopped_and_reaped(tmp_path: Path) -> None:
    # a server that accepts and never answers: the child waits in its first LIST
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        kc = silent_kubeconfig(tmp_path, server.getsockname()[1])
        prefetch = Prefetch(kc, kinds=("Pod", "Node"), process=True).start()
        pid = prefetch._pid
        assert pid > 0
        prefetch.close()
        assert await prefetch.take("Pod") is None  # not listed: the taker lists
    for _ in range(500):  # the frames' reader saw the pipe end and reaped the child
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        await asyncio.sleep(0.01)
    else:
        pytest.fail(f"the prefetch child {pid} is still there after close()")


async def test_a_refused_fork_lists_in_a_thread(
    fake: tuple[FakeAPI, KubeCluster], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api, cluster = fake
    api.lists.append(([pod("a", 5)], 9))
    api.watches.append([bookmark(10)])

    def refused() -> int:
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", refused)
    prefetch = Prefetch(kubeconfig(tmp_path, cluster), kinds=("Pod",), process=True).start()
    _, seen = await first_listing(api, cluster, prefetch)
    assert prefetch._pid == 0
    assert seen == [(None, "a")]
    assert len([q for q in api.queries if "watch" not in q]) == 1  # the thread's, taken


FORK_PROBE = """
import threading
from kubesched.cluster.prefetch import can_fork
print(can_fork())
threading.Thread(target=threading.Event().wait, args=(5,), daemon=True).start()
print(can_fork())
"""


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="the child listing is Linux's")
def test_kubesched_run_lists_in_a_child_while_it_has_one_thread() -> None:
    # cli.main starts the listing before any thread: a fresh process can fork; once a
    # thread runs, the listing is a thread's (a lock held there would stay held in a child)
    out = subprocess.run(
        [sys.executable, "-c", FORK_PROBE], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["True", "False"]


@pytest.mark.parametrize("process", [False, True], ids=["thread", "child"])
async def test_an_optional_kind_not_served_is_listed_as_none_without_asking_again(
    fake: tuple[FakeAPI, KubeCluster], tmp_path: Path, process: bool
) -> None:
    # the PodGroup CRD is not installed: the prefetch's 404 is the informer's answer, so
    # the start makes no second round trip for it (a required kind's 404 is not taken)
    api, cluster = fake
    api.lists.append(404)
    prefetch = Prefetch(kubeconfig(tmp_path, cluster), kinds=("PodGroup",), process=process)
    prefetch.start()
    informer = Informer(
        cluster, "PodGroup", lambda *_: None,
        prefetched=lambda: prefetch.take("PodGroup"),
    )  # fmt: skip
    assert await asyncio.wait_for(informer.relist(), 10) is False
    assert informer.served is False and informer.synced.is_set()
    assert [q for q in api.queries if "watch" not in q] == [{"limit": "500"}]  # one LIST
    assert await prefetch.take("PodGroup") is None  # said once; a relist asks the server


@pytest.mark.parametrize("process", [False, True], ids=["thread", "child"])
async def test_the_gang_apis_discovery_is_read_once_at_the_start(
    tmp_path: Path, process: bool
) -> None:
    # the initial sync's discovery of the foreign gang APIs takes the early listing's
    # reads: served (the upstream PodGroup) or not (404), without asking again
    gets: list[str] = []
    plugins = f"/apis/{GangAPI.SCHEDULER_PLUGINS.value}"

    async def document(request: web.Request) -> web.Response:
        gets.append(request.path)
        if request.path == plugins:
            return web.Response(status=404, body=b'{"kind":"Status","code":404}')
        doc = {"kind": "APIResourceList", "resources": [{"name": "podgroups"}]}
        return web.Response(body=orjson.dumps(doc), content_type="application/json")

    app = web.Application()
    for path in DOCUMENTS:
        app.router.add_route("GET", path, document)
    server = TestServer(app)
    await server.start_server()
    cluster = cluster_of(server)
    try:
        prefetch = Prefetch(kubeconfig(tmp_path, cluster), kinds=(), process=process).start()
        sources = GangSources(cluster, lambda *_: None)
        for _ in range(1000):  # the early listing read both
            if len(gets) == len(DOCUMENTS):
                break
            await asyncio.sleep(0.01)
        served = await asyncio.wait_for(sources.discover(prefetch.take_document), 10)
        assert served == {STORE_KINDS[GangAPI.UPSTREAM]}  # its PodGroups; not its Workloads
        assert sorted(gets) == sorted(DOCUMENTS)  # each read once, by the early listing
        assert await sources.discover(prefetch.take_document) == served  # then its own
        assert sorted(gets) == sorted(DOCUMENTS * 2)
    finally:
        await cluster.aclose()
        await cluster.close()
        await server.close()
