"""``kubesched explain`` end to end through ``kubesched.cli.main``: scenarios and --server."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from kubesched.cli import main
from kubesched.operator.listen import listen
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
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu."
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
            sockets=listen("127.0.0.1", 0),
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


PROFILE_SCENARIO = """\
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}}
---
apiVersion: kubesched.dev/v1alpha1
kind: SchedulingProfile
metadata: {name: pack}
spec:
  schedulerName: pack
  plugins:
    score:
      disabled: [{name: "*"}]
      enabled: [{name: NodeResourcesFit, weight: 7}]
---
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: team}
spec:
  schedulerName: pack
  containers: [{name: c, image: app, resources: {requests: {cpu: "1"}}}]
"""


def test_explain_uses_the_scenario_profiles(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(PROFILE_SCENARIO)
    argv = ["explain", "team/p", "--scenario", str(path), "--output", "json"]
    assert main([*argv, "--no-simulate"]) == 0
    doc = orjson.loads(capsys.readouterr().out)
    assert (doc["profile"], doc["scorePlugins"]) == ("pack", ["NodeResourcesFit:7"])
    assert [f["node"] for f in doc["feasible"]] == ["n1"]
    assert main(argv) == 0  # scheduled first, as simulate places it
    doc = orjson.loads(capsys.readouterr().out)
    assert (doc["profile"], doc["status"], doc["node"]) == ("pack", "Scheduled", "n1")


def _kubeconfig(tmp_path: Path, port: int) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(
        f"""\
apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "http://127.0.0.1:{port}"}}}}]
users: [{{name: u, user: {{token: t}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
"""
    )
    return str(path)


# A cluster's API as explain reads it: one node, one pending pod of the "pack" profile,
# that profile and a broken one; PriorityClasses forbidden (403), any other kind absent.
_NODE = {
    "metadata": {"name": "n1", "uid": "u-n1", "labels": {"zone": "a"}},
    "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}},
}
_POD = {
    "metadata": {"name": "p", "namespace": "team", "uid": "u-p"},
    "spec": {
        "schedulerName": "pack",
        "priorityClassName": "high",
        "containers": [{"name": "c", "image": "app"}],
    },
    "status": {"phase": "Pending"},
}
_PROFILE = {
    "metadata": {"name": "pack"},
    "spec": {
        "schedulerName": "pack",
        "plugins": {
            "score": {
                "disabled": [{"name": "*"}],
                "enabled": [{"name": "NodeResourcesFit", "weight": 7}],
            }
        },
    },
}
_BROKEN = {
    "metadata": {"name": "broken"},
    "spec": {"plugins": {"score": {"enabled": [{"name": "Nope"}]}}},
}
_SERVED: dict[str, list[dict[str, Any]] | None] = {
    "/api/v1/pods": [_POD],
    "/api/v1/nodes": [_NODE],
    "/apis/kubesched.dev/v1alpha1/schedulingprofiles": [_PROFILE, _BROKEN],
    "/apis/scheduling.k8s.io/v1/priorityclasses": None,  # 403
}


@contextlib.asynccontextmanager
async def _fake_api(asked: list[str]) -> AsyncIterator[int]:
    """An API server on a free port serving ``_SERVED`` to the token ``t``; the paths
    asked for are appended to ``asked``. Yields the port."""
    from aiohttp import web

    async def handle(request: web.Request) -> web.Response:
        asked.append(request.path)
        if request.headers.get("Authorization") != "Bearer t":
            return web.json_response({"message": "no token"}, status=401)
        if request.path not in _SERVED:
            return web.json_response({"message": "the server could not find it"}, status=404)
        items = _SERVED[request.path]
        if items is None:
            return web.json_response({"message": "priorityclasses is forbidden"}, status=403)
        return web.json_response({"metadata": {"resourceVersion": "1"}, "items": items})

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        yield site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    finally:
        await runner.cleanup()


async def _explain_cluster(tmp_path: Path, *args: str) -> tuple[int, list[str]]:
    """``kubesched explain team/p --output json ARGS`` against the fake API: (exit code,
    paths asked)."""
    asked: list[str] = []
    async with _fake_api(asked) as port:
        config = _kubeconfig(tmp_path, port)
        argv = ["explain", "team/p", "--kubeconfig", config, "--output", "json", *args]
        code = await asyncio.to_thread(main, argv)
    return code, asked


async def test_explain_reads_every_kind_and_the_profiles_of_a_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kubesched.cluster.kinds import LIST_PATHS

    code, asked = await _explain_cluster(tmp_path)
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = orjson.loads(out)
    assert (doc["profile"], doc["scorePlugins"]) == ("pack", ["NodeResourcesFit:7"])
    assert [f["node"] for f in doc["feasible"]] == ["n1"]
    wanted = {f"{prefix}/{plural}" for prefix, plural in LIST_PATHS.values()}
    assert wanted | {"/apis/kubesched.dev/v1alpha1/schedulingprofiles"} <= set(asked)
    warnings = err.splitlines()
    assert any(
        w.startswith(
            "kubesched: warning: priorityclasses not read (403 priorityclasses is forbidden)"
        )
        for w in warnings
    ), err
    assert any("SchedulingProfile 'broken' is invalid and serves nothing" in w for w in warnings)


async def test_explain_of_a_cluster_with_a_selector_that_leaves_the_profile_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # As an instance applying other profiles sees the cluster.
    code, _ = await _explain_cluster(tmp_path, "--profile-selector", "team=a")
    assert code == 2
    assert capsys.readouterr().err.endswith(
        "kubesched: error: pod team/p: no profile serves schedulerName 'pack'\n"
    )
