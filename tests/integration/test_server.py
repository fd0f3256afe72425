"""The HTTP endpoints with aiohttp's test client, over a scheduler on the in-memory cluster."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from kubesched.operator.listen import listen
from kubesched.operator.server import make_app, serve
from tests.builders import make_node, make_pod
from tests.integration.harness import Harness, running


class Flags:
    def __init__(self) -> None:
        self.ready = False
        self.leading = False


@pytest.fixture
def flags() -> Flags:
    return Flags()


@pytest.fixture
async def harness() -> Harness:
    h = Harness()
    h.apply(
        make_node("gpu").taint("dedicated", "gpu").obj(),
        make_node("small").alloc(cpu="1", memory="2Gi").obj(),
        make_pod("big").req(cpu="2").obj(),
        make_pod("ok").obj(),
    )
    return h


@pytest.fixture
async def client(harness: Harness, flags: Flags) -> AsyncIterator[TestClient[Any, Any]]:
    app = make_app(
        scheduler=harness.sched, ready=lambda: flags.ready, leading=lambda: flags.leading
    )
    async with TestClient(TestServer(app)) as c:
        yield c


async def test_healthz(client: TestClient[Any, Any]) -> None:
    resp = await client.get("/healthz")
    assert (resp.status, await resp.text()) == (200, "ok")


@pytest.mark.parametrize(
    ("ready", "leading", "status", "body", "leader_status"),
    [
        (False, False, 503, "caches not synced", 503),
        (True, False, 200, "ok (follower)", 503),
        (True, True, 200, "ok (leader)", 200),
    ],
    ids=["not-synced", "synced-follower", "synced-leader"],
)
async def test_readyz_follows_kube_scheduler(
    client: TestClient[Any, Any],
    flags: Flags,
    ready: bool,
    leading: bool,
    status: int,
    body: str,
    leader_status: int,
) -> None:
    flags.ready, flags.leading = ready, leading
    resp = await client.get("/readyz")
    assert (resp.status, await resp.text()) == (status, body)
    assert (await client.get("/readyz/leader")).status == leader_status
    verbose = await (await client.get("/readyz?verbose")).text()
    assert ("[+]informer-sync ok" in verbose) == ready
    assert ("following" in verbose) == (not leading)


async def test_metrics_text_format(client: TestClient[Any, Any], harness: Harness) -> None:
    async with running(harness):
        await harness.wait_for(lambda: harness.node_of("default/ok") is not None)
    resp = await client.get("/metrics")
    assert resp.status == 200
    assert resp.headers["Content-Type"].startswith("text/plain")
    text = await resp.text()
    assert 'scheduler_schedule_attempts_total{profile="kubesched",result="scheduled"} 1.0' in text
    assert 'scheduler_pending_pods{queue="active"}' in text


async def test_explain_json_and_table(client: TestClient[Any, Any], harness: Harness) -> None:
    async with running(harness):
        await harness.wait_for(lambda: "FailedScheduling" in harness.reasons("default/big"))
    resp = await client.get("/explain/default/big")
    assert resp.status == 200
    doc = await resp.json()
    assert doc["status"] == "Unschedulable"
    assert doc["feasible"] == []
    assert {r["node"]: r["plugin"] for r in doc["rejected"]} == {
        "gpu": "TaintToleration",
        "small": "NodeResourcesFit",
    }
    assert doc["message"].startswith("0/2 nodes are available: ")
    table = await (await client.get("/explain/default/big?output=table")).text()
    assert table.startswith("Pod default/big (profile kubesched): Unschedulable\n")


async def test_explain_unknown_pod_is_404(client: TestClient[Any, Any]) -> None:
    resp = await client.get("/explain/default/nope")
    assert resp.status == 404
    assert (await resp.json()) == {"error": "pod default/nope not found"}


async def test_explain_pod_of_another_scheduler_is_422(
    client: TestClient[Any, Any], harness: Harness
) -> None:
    harness.apply(make_pod("other").scheduler("someone-else").obj())
    resp = await client.get("/explain/default/other")
    assert resp.status == 422
    assert "someone-else" in (await resp.json())["error"]


async def test_serve_binds_and_stops_on_cancel(harness: Harness) -> None:
    bound: list[int] = []
    task = asyncio.create_task(
        serve(
            sockets=listen("127.0.0.1", 0),
            scheduler=harness.sched,
            ready=lambda: True,
            leading=lambda: False,
            started=bound.append,
        )
    )
    for _ in range(100):
        if bound:
            break
        await asyncio.sleep(0.01)
    assert bound and bound[0] > 0
    async with (
        aiohttp.ClientSession() as s,
        s.get(f"http://127.0.0.1:{bound[0]}/readyz") as resp,
    ):
        assert (resp.status, await resp.text()) == (200, "ok (follower)")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
