"""NodeResourcesFitArgs: defaults, camelCase aliases and kube-scheduler's validation."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from kubesched.plugins import node_resources_fit as fit
from tests.unit.plugins.test_node_resources_fit import BIN_PACK_SHAPE, GPU, rtcr


# -- Args ----------------------------------------------------------------------------------------
def test_default_args() -> None:
    args = fit.Args()
    assert args.ignored_resources == []
    assert args.ignored_resource_groups == []
    assert args.scoring_strategy.type is fit.ScoringStrategyType.LEAST_ALLOCATED
    assert [(r.name, r.weight) for r in args.scoring_strategy.resources] == [
        ("cpu", 1),
        ("memory", 1),
    ]
    assert args.scoring_strategy.requested_to_capacity_ratio is None


def test_args_camel_case_round_trip() -> None:
    raw = {
        "ignoredResources": [GPU],
        "ignoredResourceGroups": ["vendor.io"],
        "scoringStrategy": {
            "type": "RequestedToCapacityRatio",
            "resources": [{"name": "cpu", "weight": 2}, {"name": "memory", "weight": 0}],
            "requestedToCapacityRatio": {"shape": BIN_PACK_SHAPE},
        },
    }
    args = fit.Args.model_validate(raw)
    assert [(r.name, r.weight) for r in args.scoring_strategy.resources] == [
        ("cpu", 2),
        ("memory", 1),
    ], "weight 0 means the default, 1"
    assert fit.Args.model_validate(args.model_dump(by_alias=True)) == args


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        pytest.param(
            {"ignoredResourceGroups": ["example.com/gpu"]},
            "ignoredResourceGroups",
            id="group-with-slash",
        ),
        pytest.param({"scoringStrategy": {"type": "Random"}}, "type", id="unknown-strategy"),
        pytest.param(
            {"scoringStrategy": {"resources": [{"name": "cpu", "weight": 101}]}},
            "weight",
            id="weight-over-100",
        ),
        pytest.param(
            {"scoringStrategy": {"resources": [{"name": "cpu", "weight": -1}]}},
            "weight",
            id="negative-weight",
        ),
        pytest.param(
            {"scoringStrategy": {"type": "RequestedToCapacityRatio"}},
            "requestedToCapacityRatio: must be specified when type is RequestedToCapacityRatio",
            id="rtcr-without-shape",
        ),
        pytest.param(
            {
                "scoringStrategy": {
                    "type": "MostAllocated",
                    "requestedToCapacityRatio": {"shape": BIN_PACK_SHAPE},
                }
            },
            "requestedToCapacityRatio: must be nil when type is not RequestedToCapacityRatio",
            id="shape-with-another-type-v1.37",
        ),
        pytest.param(rtcr([]), "shape", id="empty-shape"),
        pytest.param(
            rtcr([{"utilization": 50, "score": 1}, {"utilization": 50, "score": 2}]),
            "increasing",
            id="shape-not-increasing",
        ),
        pytest.param(
            rtcr([{"utilization": 101, "score": 1}]), "utilization", id="utilization-over-100"
        ),
        pytest.param(rtcr([{"utilization": 10, "score": 11}]), "score", id="score-over-10"),
        pytest.param({"ignoredResource": []}, "ignoredResource", id="unknown-field"),
    ],
)
def test_invalid_args(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=field):
        fit.Args.model_validate(raw)
