"""``kubesched explain`` end to end through ``kubesched.cli.main``: scenarios and --server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest

from kubesched.cli import main
from kubesched.operator.server import serve
from tests.builders import make_node, make_pod
from tests.integration.harness import Harness, running

SCENARIO = """\
apiVersion: v1
kind: Node
metadata: {name: gpu}
spec:
  taints: [{key: dedicated, value: gpu, effect: NoSchedule}]
status: {allocatable: {cpu: "8", memory: 32Gi, pods: "10"}}
---
apiVersion: v1
kind: Node
metadata: {name: small}
status: {allocatable: {cpu: "2", memory: 4Gi, pods: "10"}}
---
apiVersion: v1
kind: Node
metadata: {name: big}
status: {allocatable: {cpu: "8", memory: 16Gi, pods: "10"}}
---
apiVersion: v1
kind: Pod
metadata: {name: running, namespace: team}
spec:
  nodeName: small
  containers: [{name: c, image: app, resources: {requests: {cpu: "1"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: team}
spec:
  containers: [{name: c, image: app, resources: {requests: {cpu: "1"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: xlarge, namespace: team}
spec:
  containers: [{name: c, image: app, resources: {requests: {cpu: "8"}}}]
"""


@pytest.fixture
def scenario(tmp_path: Path) -> str:
    path = tmp_path / "scenario.yaml"
    path.write_text(SCENARIO)
    return str(path)


def test_explain_unschedulable_pod_of_a_scenario(
    scenario: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Pods are queued by name, as a scheduler lists them from an API server: "web" lands
    # on the emptier "big" first, so "xlarge" (8 cpu) no longer fits there.
    assert main(["explain", "team/xlarge", "--scenario", scenario, "--output", "json"]) == 0
    doc = orjson.loads(capsys.readouterr().out)
    assert doc["status"] == "Unschedulable"
    assert doc["feasible"] == []
    assert {r["node"]: (r["plugin"], r["code"]) for r in doc["rejected"]} == {
        "gpu": ("TaintToleration", "UnschedulableAndUnresolvable"),
        "small": ("NodeResourcesFit", "UnschedulableAndUnresolvable"),
        "big": ("NodeResourcesFit", "Unschedulable"),
    }
    assert doc["message"] == (
        "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, "
        "2 Insufficient cpu."
    )


def test_explain_before_simulating_shows_scores(
    scenario: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", "team/web", "--scenario", scenario, "--no-simulate"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "Pod team/web (profile kubesched): Pending"
    assert lines[1].startswith("2/3 nodes are available; best: big (score ")
    feasible = lines[lines.index("Feasible nodes (2), best first:") + 2 :][:2]
    assert [line.split()[0] for line in feasible] == ["big", "small"]
    assert "NodeResourcesFit" in lines[lines.index("Feasible nodes (2), best first:") + 1]
    assert any(line.split()[:2] == ["gpu", "TaintToleration"] for line in lines)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["explain", "team/nope"], "pod team/nope not found"),
        (["explain", "not//a/pod"], "expected NAMESPACE/NAME"),
        (["explain", "team/web", "--server", "http://x"], "--server explains on a running"),
    ],
    ids=["missing-pod", "bad-name", "server-and-scenario"],
)
def test_explain_bad_input(
    scenario: str, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main([*argv, "--scenario", scenario]) == 2
    assert message in capsys.readouterr().err


async def test_explain_through_a_running_server(capsys: pytest.CaptureFixture[str]) -> None:
    h = Harness()
    h.apply(
        make_node("gpu").taint("dedicated", "gpu").obj(),
        make_pod("big").req(cpu="64").obj(),
    )
    bound: list[int] = []
    server = asyncio.create_task(
        serve(
            host="127.0.0.1",
            port=0,
            scheduler=h.sched,
            ready=lambda: True,
            leading=lambda: True,
            started=bound.append,
        )
    )
    try:
        async with running(h):
            await h.wait_for(lambda: "FailedScheduling" in h.reasons("default/big"))
            await h.wait_for(lambda: bool(bound))
            url = f"http://127.0.0.1:{bound[0]}"
            code = await asyncio.to_thread(main, ["explain", "default/big", "--server", url])
        assert code == 0
        out = capsys.readouterr().out
        assert out.startswith("Pod default/big (profile kubesched): Unschedulable\n")
        assert "gpu    TaintToleration" in out
        code = await asyncio.to_thread(main, ["explain", "default/gone", "--server", url])
        assert code == 2
        assert "pod default/gone not found" in capsys.readouterr().err
    finally:
        server.cancel()
        await asyncio.gather(server, return_exceptions=True)
