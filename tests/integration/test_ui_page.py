"""The web view's endpoints (/ui/, /ui/api/state, /ui/api/explain) on the metrics server,
and ``simulate --html``, over the scenario behind docs/ui-*.png (docs/ui-demo.yaml)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from kubesched.cli import main
from kubesched.operator.server import make_app
from kubesched.profile_status import ProfileBook
from kubesched.simulator.engine import scenario_profiles
from kubesched.simulator.scenario import prepare, read_documents
from kubesched.ui import web
from tests.integration.harness import Harness, running

DEMO = Path(__file__).parents[2] / "docs" / "ui-demo.yaml"


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    profiles, objects = scenario_profiles(prepare(read_documents(str(DEMO))))
    h = Harness(profiles=profiles)
    h.apply(*objects)
    async with running(h):
        await h.wait_for(lambda: "FailedScheduling" in h.reasons("shop/zone-a-cache"))
        await h.wait_for(lambda: "FailedScheduling" in h.reasons("ml/gpu-train-0"))
        await h.wait_for(lambda: h.node_of("ml/train-2") is not None)
    yield h


@pytest.fixture
async def client(harness: Harness) -> AsyncIterator[TestClient[Any, Any]]:
    app = make_app(scheduler=harness.sched, ready=lambda: True, leading=lambda: True)
    async with TestClient(TestServer(app)) as c:
        yield c


async def test_the_page_is_served_whole_and_polls_its_state(
    client: TestClient[Any, Any],
) -> None:
    resp = await client.get("/ui/")
    assert resp.status == 200
    assert resp.content_type == "text/html"
    page = await resp.text()
    assert '"api/state"' in page  # the script polls, relative to /ui/
    assert "/*JS*/" not in page and "/*CSS*/" not in page
    redirect = await client.get("/ui", allow_redirects=False)
    assert (redirect.status, redirect.headers["Location"]) == (302, "/ui/")


async def test_state_has_queues_gangs_and_profiles(client: TestClient[Any, Any]) -> None:
    resp = await client.get("/ui/api/state")
    assert resp.status == 200
    state = await resp.json()
    counts = state["queues"]["counts"]
    assert (counts["unschedulable"], counts["gated"]) == (8, 4)
    unsched = {p["pod"]: p for p in state["queues"]["pods"]["unschedulable"]}
    assert unsched["shop/zone-a-cache"]["reason"].startswith("0/14 nodes are available: ")
    gated = {p["pod"]: p["reason"] for p in state["queues"]["pods"]["gated"]}
    assert gated["shop/awaiting-quota"] == "waiting for scheduling gates: [example.com/quota]"
    gangs = {g["name"]: g for g in state["gangs"]}
    assert {n: (g["bound"], g["waiting"], g["missing"], g["status"]) for n, g in gangs.items()} == {
        "ml/train": (3, 0, 0, "Scheduled"),
        "ml/gpu-train": (0, 6, 0, "Blocked"),
        "ml/eval": (0, 3, 1, "Waiting"),
    }
    assert gangs["ml/gpu-train"]["blocker"].startswith('pod group "ml/gpu-train": 2/6 members fit')
    profiles = {p["schedulerName"]: p for p in state["profiles"]}
    assert set(profiles) == {"kubesched", "kubesched-binpack"}
    score = {c["point"]: c["plugins"] for c in profiles["kubesched-binpack"]["chain"]}["score"]
    assert score[0] == "NodeResourcesFit:5"
    assert profiles["kubesched"]["source"] == "default plugins"
    assert state["queues"]["history"][-1]["unschedulable"] == 8


async def test_explain_is_a_heat_map_and_score_bars(client: TestClient[Any, Any]) -> None:
    resp = await client.get("/ui/api/explain/shop/zone-a-cache")
    assert resp.status == 200
    view = await resp.json()
    by_node = {c["node"]: c["plugin"] for c in view["cells"]}
    assert by_node["node-b1"] == "NodeAffinity"
    assert by_node["node-b2"] == "NodeUnschedulable"
    assert by_node["gpu-1"] == "TaintToleration"
    assert by_node["node-a1"] == "NodeResourcesFit"
    member = await (await client.get("/ui/api/explain/ml/gpu-train-0")).json()
    assert [c["node"] for c in member["cells"] if c["feasible"]] == ["gpu-1", "gpu-2"]
    assert "TaintToleration" in [b["plugin"] for b in member["bars"]]
    assert member["podGroup"]["podGroup"] == "ml/gpu-train"


async def test_explain_of_an_unknown_pod_says_so(client: TestClient[Any, Any]) -> None:
    resp = await client.get("/ui/api/explain/shop/nope")
    assert resp.status == 404
    assert (await resp.json()) == {"error": "pod shop/nope not found"}


def _embedded_state(page: str) -> Any:
    m = re.search(r'<script id="embedded-state" type="application/json">(.*?)</script>', page, re.S)
    assert m is not None
    return json.loads(m.group(1))


def test_simulate_html_writes_a_self_contained_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "ui.html"
    assert main(["simulate", "--scenario", str(DEMO), "--html", str(out)]) == 0
    assert "9/21 pods scheduled, 8 unschedulable, 4 waiting" in capsys.readouterr().out
    page = out.read_text()
    assert "<script src" not in page and "<link" not in page  # nothing to fetch
    state = _embedded_state(page)
    assert state["source"] == f"simulation of {DEMO}"
    exp = state["explanations"]["shop/render-farm"]
    assert exp["message"].startswith("0/14 nodes are available: ")
    assert {g["name"]: g["status"] for g in state["gangs"]}["ml/eval"] == "Waiting"


def test_simulate_html_into_a_missing_directory_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "no" / "ui.html"
    assert main(["simulate", "--scenario", str(DEMO), "--html", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == f"kubesched: error: --html {out}: No such file or directory\n"


async def test_queue_sizes_are_sampled_whether_or_not_anyone_looks(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(web, "SAMPLE_EVERY", 0.01)
    app = make_app(scheduler=harness.sched, ready=lambda: True, leading=lambda: True)
    async with TestClient(TestServer(app)) as c:
        for _ in range(100):  # a request adds no sample (only the first, when none)
            await asyncio.sleep(0.05)
            state = await (await c.get("/ui/api/state")).json()
            if len(state["queues"]["history"]) >= 3:
                break
    history = state["queues"]["history"]
    assert len(history) >= 3
    assert {(s["unschedulable"], s["gated"]) for s in history} == {(8, 4)}
    assert [s["t"] for s in history] == sorted(s["t"] for s in history)


async def test_profiles_show_the_schedulingprofiles_ready_condition() -> None:
    h = Harness()
    book = ProfileBook(h.sched)
    book.apply(
        "binpacking",
        {"schedulerName": "kubesched-binpack", "plugins": {"score": {"disabled": [{"name": "*"}]}}},
        1,
    )
    book.apply(
        "typo",
        {"schedulerName": "other", "plugins": {"filter": {"enabled": [{"name": "NodeAfinity"}]}}},
        1,
    )
    app = make_app(
        scheduler=h.sched, ready=lambda: True, leading=lambda: True, profile_book=lambda: book
    )
    async with TestClient(TestServer(app)) as c:
        state = await (await c.get("/ui/api/state")).json()
    profiles = {p["source"]: p for p in state["profiles"]}
    assert set(profiles) == {
        "default plugins",
        "SchedulingProfile binpacking",
        "SchedulingProfile typo",
    }
    served = profiles["SchedulingProfile binpacking"]
    assert (served["schedulerName"], served["ready"]) == ("kubesched-binpack", True)
    assert "score" not in [c["point"] for c in served["chain"]]
    typo = profiles["SchedulingProfile typo"]
    assert (typo["ready"], typo["chain"]) == (False, [])
    assert "NodeAfinity" in typo["message"], typo["message"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kubeconfig", "/nonexistent"], "kubeconfig /nonexistent (--kubeconfig): no such file"),
        (["--port", "x"], "argument --port: not a whole number: 'x' (see kubesched ui --help)"),
        (["--refresh", "0"], "argument --refresh: must be positive: '0' (see kubesched ui --help)"),
    ],
)
def test_kubesched_ui_bad_input_is_one_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ui", *args]) == 2
    assert capsys.readouterr().err == f"kubesched: error: {message}\n"


def test_kubesched_ui_without_an_api_server_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {}}]\n"
    )
    assert main(["ui", "--kubeconfig", str(kubeconfig), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kubesched: error: cannot reach the API server at http://127.0.0.1:1")
    assert err.count("\n") == 1
