"""The README's DRA example is the objects of tests/scenarios/dra/gpu-from-template.yaml,
and `kubesched simulate` places its pod where kube-scheduler would (node-b, the node
with the GPU), with the claim created from the template and allocated there."""

from __future__ import annotations

import pathlib

import orjson
import pytest
import yaml

from kubesched import cli

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
SCENARIO = ROOT / "tests" / "scenarios" / "dra" / "gpu-from-template.yaml"


def readme_example() -> list[dict[str, object]]:
    text = (ROOT / "README.md").read_text()
    section = text.split("### Devices (Dynamic Resource Allocation)", 1)[1]
    block = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    return [d for d in yaml.safe_load_all(block) if d]


def test_the_readme_example_is_the_scenarios_objects() -> None:
    scenario = [d for d in yaml.safe_load_all(SCENARIO.read_text()) if d]
    example = readme_example()
    assert [d["kind"] for d in example] == ["DeviceClass", "ResourceClaimTemplate", "Pod"]
    for doc in example:
        assert doc in scenario, f"{doc['kind']} of the README differs from the scenario's"


def test_simulate_runs_the_readme_example(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the README's objects, after the scenario's nodes and ResourceSlice
    scenario = [d for d in yaml.safe_load_all(SCENARIO.read_text()) if d]
    cluster = [d for d in scenario if d["kind"] in ("Node", "ResourceSlice")]
    path = tmp_path / "readme.yaml"
    path.write_text(yaml.safe_dump_all([*cluster, *readme_example()]))
    assert cli.main(["simulate", "--scenario", str(path), "--output", "json"]) == 0
    pods = orjson.loads(capsys.readouterr().out)["pods"]
    assert [(p["name"], p["node"]) for p in pods] == [("trainer", "node-b")]


EXTENDED = ROOT / "tests" / "scenarios" / "dra" / "extended-resource.yaml"


def readme_extended_example() -> list[dict[str, object]]:
    text = (ROOT / "README.md").read_text()
    section = text.split("### Devices (Dynamic Resource Allocation)", 1)[1]
    block = section.split("```yaml\n", 2)[2].split("```", 1)[0]
    return [d for d in yaml.safe_load_all(block) if d]


def test_simulate_runs_the_readme_extended_resource_example(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = [d for d in yaml.safe_load_all(EXTENDED.read_text()) if d]
    example = readme_extended_example()
    assert [d["kind"] for d in example] == ["DeviceClass", "Pod"]
    for doc in example:
        assert doc in scenario, f"{doc['kind']} of the README differs from the scenario's"
    # the README's objects, after the scenario's classes, nodes and slice
    cluster = [d for d in scenario if d["kind"] in ("PriorityClass", "Node", "ResourceSlice")]
    path = tmp_path / "readme.yaml"
    path.write_text(yaml.safe_dump_all([*cluster, *example]))
    assert cli.main(["simulate", "--scenario", str(path), "--output", "json"]) == 0
    pods = orjson.loads(capsys.readouterr().out)["pods"]
    assert [(p["name"], p["node"]) for p in pods] == [("two", "node-1")]
