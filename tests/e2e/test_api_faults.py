"""A slow or failing API server at Bind (issue 9, item 5), with the real kube-apiserver
behind a fault-injecting proxy (:mod:`tests.controlplane.faultproxy`).

``kubesched run`` runs in-process with a kubeconfig that points at the proxy and a 2 s
request timeout. Each test injects faults into POSTs to ``pods/<name>/binding`` and
checks what a user would: every pod ends bound exactly once (one Binding reached the
server, one ``Scheduled`` event, no pod lost), the retries show in /metrics, and the
cache equals the API at the end (``tests/e2e/cachecheck.py``), with no pod both
assumed and queued at any sampled moment.
"""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kubesched.operator.run import Runtime
from tests.controlplane import ControlPlane
from tests.controlplane.faultproxy import FaultProxy
from tests.e2e.cachecheck import assert_cache_matches_api, fetch_cache
from tests.e2e.proxied import BINDING, fault_proxy, kubesched_via
from tests.e2e.support import call, events_for, eventually
from tests.e2e.test_run import label, pod_body, read_pod

pytestmark = pytest.mark.timeout(150)

JSON = dict[str, Any]
REQUEST_TIMEOUT = 2.0


@pytest.fixture
async def proxy(controlplane: ControlPlane) -> AsyncIterator[FaultProxy]:
    async with fault_proxy(controlplane) as fp:
        yield fp


@pytest.fixture
async def kubesched(controlplane: ControlPlane, proxy: FaultProxy) -> AsyncIterator[Runtime]:
    async with kubesched_via(proxy, controlplane, request_timeout=REQUEST_TIMEOUT) as rt:
        yield rt


def metric(url: str, name: str, code: str) -> float:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as r:
        text = r.read().decode()
    prefix = f'{name}{{code="{code}"}} '
    for line in text.splitlines():
        if line.startswith(prefix):
            return float(line[len(prefix) :])
    return 0.0


class NeverBothAssumedAndQueued:
    """Samples /debug/cache while a test runs."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.both: list[str] = []
        self.samples = 0
        self.assumed_seen = 0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            dump = await call(fetch_cache, self.url)
            assumed = {a["pod"] for a in dump["assumed"]}
            self.both += sorted(assumed & {p["pod"] for p in dump["pending"]})
            self.samples += 1
            self.assumed_seen += bool(assumed)
            await asyncio.sleep(0.1)

    def __enter__(self) -> NeverBothAssumedAndQueued:
        self._task = asyncio.create_task(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()


async def create_pods(cp: ControlPlane, namespace: str, names: list[str]) -> list[str]:
    """Two nodes of their own (a fresh label) and pods that select them; the nodes."""
    pool = label()
    prefix = f"faults-{pool['e2e.kubesched.dev/pool']}-"
    nodes: list[str] = await call(cp.create_nodes, 2, labels=pool, prefix=prefix)
    for name in names:
        await call(cp.api.create, pod_body(name, namespace, selector=pool))
    return nodes


async def all_bound(cp: ControlPlane, namespace: str, names: list[str], within: float) -> None:
    def bound() -> bool:
        return all(
            (read_pod(cp, namespace, n) or {}).get("spec", {}).get("nodeName") for n in names
        )

    await eventually(bound, within=within, what=f"pods {names} bound")


async def assert_bound_exactly_once(cp: ControlPlane, namespace: str, names: list[str]) -> None:
    for name in names:

        def scheduled_events(n: str = name) -> list[JSON]:
            return [e for e in events_for(cp, namespace, n) if e["reason"] == "Scheduled"]

        await eventually(scheduled_events, within=20, what=f"a Scheduled event for {name}")
        await asyncio.sleep(0)
        assert len(await call(scheduled_events)) == 1, name


async def test_500s_at_bind_are_retried_and_counted(
    controlplane: ControlPlane, namespace: str, kubesched: Runtime, proxy: FaultProxy
) -> None:
    cp, url = controlplane, f"http://127.0.0.1:{kubesched.port}"
    names = [f"p{i}" for i in range(3)]
    # 3 failures over 3 pods: even if one pod draws them all, its 4th call binds it.
    proxy.fail_next("POST", BINDING, times=3, status=500)
    with NeverBothAssumedAndQueued(url) as watch:
        await create_pods(cp, namespace, names)
        await all_bound(cp, namespace, names, within=60)
        await call(assert_cache_matches_api, url, cp.api, namespace=namespace, within=30)
    await assert_bound_exactly_once(cp, namespace, names)
    assert [what for _, _, what in proxy.log] == ["500"] * 3
    assert await call(metric, url, "kubesched_bind_retries_total", "500") == 3
    assert await call(metric, url, "kubesched_bind_request_errors_total", "500") == 3
    assert watch.samples > 0 and watch.both == []
    for name in names:
        assert not [
            e
            for e in await call(events_for, cp, namespace, name)
            if e["reason"] == "FailedScheduling"
        ]


async def test_429_with_retry_after_is_honoured(
    controlplane: ControlPlane, namespace: str, kubesched: Runtime, proxy: FaultProxy
) -> None:
    cp, url = controlplane, f"http://127.0.0.1:{kubesched.port}"
    proxy.fail_next("POST", BINDING, times=2, status=429, retry_after=2)
    with NeverBothAssumedAndQueued(url) as watch:
        loop = asyncio.get_running_loop()
        start = loop.time()
        await create_pods(cp, namespace, ["slow"])
        await all_bound(cp, namespace, ["slow"], within=60)
        took = loop.time() - start
        await call(assert_cache_matches_api, url, cp.api, namespace=namespace, within=30)
    assert took >= 4.0  # two Retry-After waits of 2 s: never sooner
    await assert_bound_exactly_once(cp, namespace, ["slow"])
    assert await call(metric, url, "kubesched_bind_retries_total", "429") == 2
    assert watch.both == []


async def test_a_bind_hanging_past_the_client_timeout_is_retried(
    controlplane: ControlPlane, namespace: str, kubesched: Runtime, proxy: FaultProxy
) -> None:
    """The proxy holds the request past the client's timeout and never forwards it: the
    server sees only the retry."""
    cp, url = controlplane, f"http://127.0.0.1:{kubesched.port}"
    proxy.hang_next("POST", BINDING, times=1, seconds=REQUEST_TIMEOUT + 3)
    with NeverBothAssumedAndQueued(url) as watch:
        await create_pods(cp, namespace, ["hung"])
        await all_bound(cp, namespace, ["hung"], within=60)
        await call(assert_cache_matches_api, url, cp.api, namespace=namespace, within=30)
    await assert_bound_exactly_once(cp, namespace, ["hung"])
    await eventually(
        lambda: [what for *_, what in proxy.log] == ["hang", "dropped"],
        within=20,
        what="the proxy dropping the request the client gave up on",
    )
    assert await call(metric, url, "kubesched_bind_request_errors_total", "timeout") == 1
    assert await call(metric, url, "kubesched_bind_retries_total", "timeout") == 1
    assert watch.assumed_seen > 0 and watch.both == []


async def test_a_bind_that_landed_but_timed_out_here_is_not_bound_twice(
    controlplane: ControlPlane, namespace: str, kubesched: Runtime, proxy: FaultProxy
) -> None:
    """The proxy forwards the bind (the server binds the pod) and then holds the answer
    past the client's timeout: the retry gets 409 "already assigned" to our node, which
    is our own bind -- a success, not a conflict, not a requeue."""
    cp, url = controlplane, f"http://127.0.0.1:{kubesched.port}"
    proxy.hang_next("POST", BINDING, times=1, seconds=REQUEST_TIMEOUT + 3, forward=True)
    with NeverBothAssumedAndQueued(url) as watch:
        await create_pods(cp, namespace, ["landed"])
        await all_bound(cp, namespace, ["landed"], within=60)
        await eventually(
            lambda: metric(url, "kubesched_bind_request_errors_total", "409") == 1,
            within=30,
            what="the retry's 409",
        )
        await call(assert_cache_matches_api, url, cp.api, namespace=namespace, within=30)
    await assert_bound_exactly_once(cp, namespace, ["landed"])
    assert kubesched.scheduler.stats.scheduled == 1
    events = await call(events_for, cp, namespace, "landed")
    assert not [e for e in events if e["reason"] == "FailedScheduling"]
    assert watch.both == []


async def test_retries_exhausted_requeue_with_an_event_then_bind(
    controlplane: ControlPlane, namespace: str, kubesched: Runtime, proxy: FaultProxy
) -> None:
    cp, url = controlplane, f"http://127.0.0.1:{kubesched.port}"
    proxy.fail_next("POST", BINDING, times=5, status=503)
    with NeverBothAssumedAndQueued(url) as watch:
        await create_pods(cp, namespace, ["unlucky"])
        await all_bound(cp, namespace, ["unlucky"], within=90)
        await call(assert_cache_matches_api, url, cp.api, namespace=namespace, within=30)
    # written apart from the bind (asynchronously): waited for, not read once
    failed = await eventually(
        lambda: [
            e for e in events_for(cp, namespace, "unlucky") if e["reason"] == "FailedScheduling"
        ],
        within=20,
        what="a FailedScheduling event for unlucky",
    )
    assert failed[0]["note"].startswith('running Bind plugin "DefaultBinder": '), failed
    await assert_bound_exactly_once(cp, namespace, ["unlucky"])
    assert await call(metric, url, "kubesched_bind_request_errors_total", "503") == 5
    assert await call(metric, url, "kubesched_bind_retries_total", "503") == 4  # 3 + 1
    assert watch.both == []
