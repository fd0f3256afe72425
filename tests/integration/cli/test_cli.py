"""``kubesched simulate`` and ``version`` end to end, through ``kubesched.cli.main``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from kubesched import __version__
from kubesched.cli import main

SCENARIO = """\
apiVersion: v1
kind: Node
metadata: {name: small}
status: {allocatable: {cpu: "1", memory: 2Gi, pods: "10"}}
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
  containers: [{name: c, image: app, resources: {requests: {cpu: 500m}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: needs-two-cpus, namespace: team}
spec:
  containers: [{name: c, image: app, resources: {requests: {cpu: "2"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: too-big, namespace: team}
spec:
  containers: [{name: c, image: app, resources: {requests: {cpu: "64"}}}]
"""


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, err = run(capsys, "simulate", "--output", "json", *argv)
    assert (code, err) == (0, "")
    data: dict[str, Any] = orjson.loads(out)
    return data


def test_demo_prints_a_readable_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "simulate")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].split() == ["NAMESPACE", "NAME", "NODE", "STATUS", "MESSAGE"]
    rows = {line.split()[1]: line.split(maxsplit=4) for line in lines[1:] if line.strip()}
    assert rows["train-0"][2:4] == ["gpu-c2", "Scheduled"]
    assert rows["render-farm"][2:4] == ["<none>", "Unschedulable"]
    assert rows["render-farm"][4].startswith("0/6 nodes are available: ")
    assert "untolerated taint(s)" in rows["render-farm"][4]
    assert "1 node(s) were unschedulable" in rows["render-farm"][4]
    assert lines[-1].startswith("19/20 pods scheduled, 1 unschedulable, 0 waiting; 6 nodes; ")
    assert lines[-1].endswith(" pods/s)")


def test_demo_respects_cordon_taint_and_priority(capsys: pytest.CaptureFixture[str]) -> None:
    data = run_json(capsys)
    placed = {p["name"]: p["node"] for p in data["pods"]}
    assert "node-b2" not in placed.values()  # cordoned
    assert [n for n, node in placed.items() if node == "gpu-c2"] == ["train-0"]  # tainted
    assert {"coredns-0", "prometheus-0", "legacy-db-0"}.isdisjoint(placed)  # existing load
    assert all(placed[f"web-{i}"] for i in range(6))


def test_an_error_is_told_apart_from_a_pod_that_fits_nowhere(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # a Kubernetes PodGroup whose members disagree on priority fails with an error (kube's
    # reason SchedulerError), not for want of room
    path = Path(__file__).parents[2] / "scenarios" / "gang" / "upstream-pods-disagree.yaml"
    code, out, _ = run(capsys, "simulate", "--scenario", str(path), "--seed", "0")
    assert code == 0
    lines = out.splitlines()
    rows = {line.split()[1]: line.split(maxsplit=4) for line in lines[1:] if line.strip()}
    assert rows["mixed-0"][2:4] == ["<none>", "SchedulerError"]
    assert rows["mixed-0"][4].startswith("all pods in a single pod group should have the same")
    assert lines[-1].startswith("2/4 pods scheduled, 0 unschedulable, 2 errors, 0 waiting; ")
    data = run_json(capsys, "--scenario", str(path), "--seed", "0")
    assert {p["name"]: p["status"] for p in data["pods"]}["mixed-1"] == "SchedulerError"
    assert (data["summary"]["unschedulable"], data["summary"]["errors"]) == (0, 2)


def test_json_has_exactly_the_documented_shape(capsys: pytest.CaptureFixture[str]) -> None:
    data = run_json(capsys)
    assert set(data) == {"pods", "summary", "preempted", "preemptedBy"}
    assert (data["preempted"], data["preemptedBy"]) == ([], {})
    for p in data["pods"]:
        assert set(p) == {"namespace", "name", "node", "status", "message"}
        assert p["status"] in ("Scheduled", "Unschedulable", "SchedulerError", "Waiting")
        assert (p["node"] is None) == (p["status"] != "Scheduled")
    s = data["summary"]
    assert set(s) == {
        "nodes",
        "pods",
        "scheduled",
        "unschedulable",
        "errors",
        "waiting",
        "seconds",
        "pods_per_second",
    }
    assert (s["nodes"], s["pods"], s["scheduled"], s["unschedulable"], s["errors"]) == (
        6,
        20,
        19,
        1,
        0,
    )
    assert s["waiting"] == 0
    assert s["seconds"] > 0
    assert s["pods_per_second"] == pytest.approx(s["scheduled"] / s["seconds"])


def test_scenario_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "scenario.yaml"
    path.write_text(SCENARIO)
    data = run_json(capsys, "--scenario", str(path))
    assert [(p["namespace"], p["name"], p["node"], p["status"]) for p in data["pods"]] == [
        ("team", "needs-two-cpus", "big", "Scheduled"),
        ("team", "too-big", None, "Unschedulable"),
    ]
    assert data["pods"][1]["message"].startswith("0/2 nodes are available: 2 Insufficient cpu.")
    assert data["summary"]["nodes"] == 2


def test_scenarios_and_workload_combine(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "scenario.yaml"
    path.write_text(SCENARIO)
    argv = ("--scenario", str(path), "--workload", "SchedulingBasic", "--nodes", "3")
    data = run_json(capsys, *argv, "--pods", "5")
    assert data["summary"]["nodes"] == 5
    assert len(data["pods"]) == 7


def test_workload_schedules_every_pod(capsys: pytest.CaptureFixture[str]) -> None:
    data = run_json(capsys, "--workload", "SchedulingBasic", "--nodes", "10", "--pods", "50")
    s = data["summary"]
    assert (s["nodes"], s["pods"], s["scheduled"], s["unschedulable"]) == (10, 50, 50, 0)
    assert [p["name"] for p in data["pods"]] == [f"pod-{i}" for i in range(50)]


def test_seed_makes_placement_reproducible(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ("--workload", "SchedulingBasic", "--nodes", "20", "--pods", "40", "--seed", "7")
    first = run_json(capsys, *argv)["pods"]
    assert run_json(capsys, *argv)["pods"] == first


def test_an_empty_scenario_file_is_an_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("# nothing yet\n---\n")
    code, out, err = run(capsys, "simulate", "--scenario", str(path))
    assert (code, out) == (2, "")
    assert err == f"kubesched: error: {path}: no objects in the file (expected Nodes, Pods, ...)\n"


def test_a_workload_of_nothing_reports_zero_rate(capsys: pytest.CaptureFixture[str]) -> None:
    data = run_json(capsys, "--workload", "SchedulingBasic", "--nodes", "0", "--pods", "0")
    assert data["pods"] == []
    assert data["summary"]["pods_per_second"] == 0


BAD_SCENARIO = SCENARIO.replace('cpu: "2"', "cpu: two")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(
            ["--scenario", "{tmp}/bad.yaml"],
            "kubesched: error: {tmp}/bad.yaml document 3 (Pod team/needs-two-cpus): "
            "spec.containers[0].resources.requests.cpu: quantities must match",
            id="invalid-quantity",
        ),
        pytest.param(
            ["--scenario", "{tmp}/missing.yaml"],
            "kubesched: error: {tmp}/missing.yaml: cannot read: No such file or directory",
            id="missing-file",
        ),
        pytest.param(
            ["--nodes", "5"],
            "kubesched: error: --nodes and --pods size a generated workload",
            id="nodes-without-workload",
        ),
        pytest.param(
            ["--workload", "Nope"], "argument --workload: invalid choice: 'Nope'", id="workload"
        ),
        pytest.param(
            ["--workload", "SchedulingBasic", "--pods", "-1"],
            "argument --pods: must not be negative: -1",
            id="negative-pods",
        ),
        pytest.param(["--output", "xml"], "argument --output: invalid choice", id="output"),
    ],
)
def test_bad_input_exits_2_with_a_message(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], message: str
) -> None:
    (tmp_path / "bad.yaml").write_text(BAD_SCENARIO)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code, out, err = run(capsys, "simulate", *argv)
    assert code == 2
    assert out == ""
    assert message.replace("{tmp}", str(tmp_path)) in err
    assert "Traceback" not in err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "version") == (0, f"kubesched {__version__}\n", "")


def test_no_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys)
    assert out == ""
    assert code == 2
    assert "usage: kubesched" in err


NO_NODES = """\
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default}
spec:
  containers: [{name: c, image: app}]
"""


@pytest.mark.timeout(30)
def test_pods_and_no_nodes_end_unschedulable(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # With no node at all the attempt fails without a plugin's rejection, and such a pod
    # backs off and is retried for ever, as on a cluster where a node may come; a
    # scenario has nothing more to come, so the simulation ends (it used to spin).
    path = tmp_path / "no-nodes.yaml"
    path.write_text(NO_NODES)
    data = run_json(capsys, "--scenario", str(path))
    [pod] = data["pods"]
    assert (pod["name"], pod["node"], pod["status"]) == ("p", None, "Unschedulable")
    # kube-scheduler's ErrNoNodesAvailable, as its event and condition say it
    assert pod["message"] == "no nodes available to schedule pods"


@pytest.mark.timeout(30)
def test_workload_on_zero_nodes_ends(capsys: pytest.CaptureFixture[str]) -> None:
    data = run_json(capsys, "--workload", "SchedulingBasic", "--nodes", "0", "--pods", "5")
    assert data["summary"]["unschedulable"] == 5
    assert {p["status"] for p in data["pods"]} == {"Unschedulable"}
