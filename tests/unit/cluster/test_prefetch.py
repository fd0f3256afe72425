"""The first LIST made ahead in a thread: the informer delivers its pages and watches from
their resourceVersion without listing again; when the prefetch failed it lists itself."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import yaml

from kubesched.cluster.informer import Informer
from kubesched.cluster.kube import KubeCluster
from kubesched.cluster.prefetch import Prefetch
from tests.unit.cluster.test_informer import FakeAPI, bookmark, fake, pod

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


async def test_the_informer_delivers_the_prefetched_pages_and_watches_from_them(
    fake: tuple[FakeAPI, KubeCluster], tmp_path: Path
) -> None:
    api, cluster = fake
    api.lists.append(([pod("a", 5), pod("b", 6), pod("c", 7)], 9))
    api.watches.append([bookmark(10)])
    prefetch = Prefetch(kubeconfig(tmp_path, cluster), kinds=("Pod",), page_size=2).start()
    informer, seen = await first_listing(api, cluster, prefetch)
    assert seen == [(None, "a"), (None, "b"), (None, "c")]
    # two pages, then the watch from the listing's resourceVersion: no second LIST
    lists = [q for q in api.queries if "watch" not in q]
    assert [q.get("limit") for q in lists] == ["2", "2"]
    assert api.watch_queries()[0]["resourceVersion"] == "9"
    assert informer.lists == 1
    assert await prefetch.take("Pod") is None  # taken once; a relist is the informer's


async def test_a_failed_prefetch_leaves_the_listing_to_the_informer(
    fake: tuple[FakeAPI, KubeCluster], tmp_path: Path
) -> None:
    api, cluster = fake
    api.lists.append(([pod("a", 5)], 9))
    # a token the server refuses (its handler fails the request): the prefetch gives up
    prefetch = Prefetch(kubeconfig(tmp_path, cluster, token="wrong"), kinds=("Pod",)).start()
    assert await prefetch.take("Pod") is None
    prefetch = Prefetch(kubeconfig(tmp_path, cluster, token="wrong"), kinds=("Pod",)).start()
    _, seen = await first_listing(api, cluster, prefetch)
    assert seen == [(None, "a")]
    assert len([q for q in api.queries if "watch" not in q]) == 3  # 2 refused, then its own
