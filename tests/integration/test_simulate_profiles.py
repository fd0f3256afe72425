"""``kubesched simulate`` with SchedulingProfiles in the scenario: their schedulerNames
are served, and an invalid profile stops the run with file, document and field."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from kubesched.cli import main

NODES = """\
apiVersion: v1
kind: Node
metadata: {name: node-1}
status: {allocatable: {cpu: "8", memory: 16Gi, pods: "10"}}
---
apiVersion: v1
kind: Node
metadata: {name: node-2}
status: {allocatable: {cpu: "8", memory: 16Gi, pods: "10"}}
"""

PODS = "".join(
    f"""---
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  schedulerName: {scheduler}
  containers: [{{name: c, image: app, resources: {{requests: {{cpu: "1"}}}}}}]
"""
    for name, scheduler in (("a", "pack"), ("b", "pack"), ("c", "nobody"))
)

PROFILE = """\
---
apiVersion: kubesched.dev/v1alpha1
kind: SchedulingProfile
metadata: {name: pack}
spec:
  schedulerName: pack
  pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: %s}}
"""


def test_a_scenario_profile_serves_its_scheduler_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(NODES + PROFILE % "MostAllocated" + PODS)
    assert main(["simulate", "--scenario", str(scenario), "--output", "json", "--seed", "1"]) == 0
    pods = {p["name"]: p for p in orjson.loads(capsys.readouterr().out)["pods"]}
    assert pods["a"]["node"] is not None and pods["a"]["node"] == pods["b"]["node"]
    assert pods["c"]["status"] == "Waiting"
    assert pods["c"]["message"] == "no profile serves schedulerName 'nobody'"


def test_an_invalid_scenario_profile_names_file_document_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(NODES + PROFILE % "Most" + PODS)
    assert main(["simulate", "--scenario", str(scenario)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"kubesched: error: {scenario} document 2 (SchedulingProfile pack): "
        "spec.pluginConfig[0].args.scoringStrategy.type: Input should be 'LeastAllocated'"
    ), err
