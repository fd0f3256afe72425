"""`kubesched explain` on a DRA scenario: per node, kube's reason and then which claim and
request the node cannot satisfy, and why."""

from __future__ import annotations

import pathlib

import orjson
import pytest

from kubesched import cli

SCENARIOS = pathlib.Path(__file__).resolve().parent.parent / "scenarios" / "dra"


def test_explain_names_the_request_and_what_excludes_the_devices(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = SCENARIOS / "one-gpu-two-pods.yaml"
    code = cli.main(["explain", "--scenario", str(path), "default/second", "--output", "json"])
    assert code == 0
    doc = orjson.loads(capsys.readouterr().out)
    assert doc["message"] == "0/2 nodes are available: 2 cannot allocate all claims."
    reasons = {n["node"]: n["reasons"] for n in doc["rejected"]}
    claim = "default/second-gpu-"
    assert reasons["node-1"][0] == "cannot allocate all claims"
    assert reasons["node-1"][1].startswith(f"claim {claim}")
    assert reasons["node-1"][1].endswith(
        ", request gpu: wants 1 of class gpu.example.com; the node has 1 device(s): "
        "0 not selected, 1 in use, 0 with a taint not tolerated, 0 free"
    )
    assert reasons["node-2"][1].endswith(
        "the node has 0 device(s): 0 not selected, 0 in use, 0 with a taint not tolerated, 0 free"
    )


def test_explain_shows_why_the_extended_resource_claim_fails_per_node(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = SCENARIOS / "extended-resource.yaml"
    code = cli.main(["explain", "--scenario", str(path), "default/late", "--output", "json"])
    assert code == 0
    doc = orjson.loads(capsys.readouterr().out)
    assert doc["message"] == (
        "0/3 nodes are available: 1 Insufficient example.com/gpu, 2 cannot allocate all claims."
    )
    reasons = {n["node"]: n["reasons"] for n in doc["rejected"]}
    assert reasons["node-1"] == [
        "cannot allocate all claims",
        "claim default/<extended-resources>, request container-0-request-0: wants 1 of class "
        "gpu.example.com; the node has 2 device(s): 0 not selected, 2 in use, 0 with a taint "
        "not tolerated, 0 free",
    ]
    assert reasons["node-3"] == ["Insufficient example.com/gpu"]
