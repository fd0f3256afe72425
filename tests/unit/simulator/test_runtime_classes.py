"""RuntimeClass admission on scenario pods: the overhead, node selector and tolerations the
API server writes into a pod naming a class, and the pods it refuses."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.framework.types import ObjectError
from kubesched.simulator.apiserver import admit_pod
from kubesched.simulator.runtime_classes import merge_tolerations, validate_runtime_class
from kubesched.simulator.scenario import ScenarioError, load_scenarios
from tests.unit.simulator.test_apiserver import NOT_READY, UNREACHABLE, pod

JSON = dict[str, Any]

KATA: JSON = {
    "apiVersion": "node.k8s.io/v1",
    "kind": "RuntimeClass",
    "metadata": {"name": "kata"},
    "handler": "kata",
    "overhead": {"podFixed": {"cpu": "250m", "memory": "120Mi"}},
    "scheduling": {
        "nodeSelector": {"sandbox": "true"},
        "tolerations": [{"key": "sandbox", "operator": "Exists", "effect": "NoSchedule"}],
    },
}
RUNC: JSON = {"metadata": {"name": "runc"}, "handler": "runc"}
CLASSES = {"kata": KATA, "runc": RUNC}


def admitted(spec: JSON) -> JSON:
    p = pod(spec)
    admit_pod(p, {}, CLASSES)
    out: JSON = p["spec"]
    return out


def test_the_class_overhead_selector_and_tolerations_are_written_into_the_pod() -> None:
    spec = admitted({"runtimeClassName": "kata", "nodeSelector": {"disk": "ssd"}})
    assert spec["overhead"] == {"cpu": "250m", "memory": "120Mi"}
    assert spec["nodeSelector"] == {"disk": "ssd", "sandbox": "true"}
    # after DefaultTolerationSeconds' two, as the API server orders its admission plugins
    assert spec["tolerations"] == [
        NOT_READY,
        UNREACHABLE,
        {"key": "sandbox", "operator": "Exists", "effect": "NoSchedule"},
    ]


def test_a_class_without_overhead_or_scheduling_changes_nothing() -> None:
    spec = admitted({"runtimeClassName": "runc"})
    assert "overhead" not in spec and "nodeSelector" not in spec
    assert spec["tolerations"] == [NOT_READY, UNREACHABLE]


def test_a_tolerate_everything_class_drops_the_tolerations_it_covers() -> None:
    classes = {"all": {**RUNC, "scheduling": {"tolerations": [{"operator": "Exists"}]}}}
    p = pod({"runtimeClassName": "all"})
    admit_pod(p, {}, classes)
    assert p["spec"]["tolerations"] == [{"operator": "Exists"}]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param(
            {"runtimeClassName": "gvisor"},
            'spec.runtimeClassName: pod rejected: RuntimeClass "gvisor" not found',
            id="missing-class",
        ),
        pytest.param(
            {"runtimeClassName": "kata", "overhead": {"cpu": "1"}},
            "spec.overhead: pod rejected: Pod's Overhead doesn't match RuntimeClass's "
            "defined Overhead",
            id="other-overhead",
        ),
        pytest.param(
            {"overhead": {"cpu": "1"}},
            "spec.overhead: pod rejected: Pod Overhead set without corresponding "
            "RuntimeClass defined Overhead",
            id="overhead-without-class",
        ),
        pytest.param(
            {"runtimeClassName": "runc", "overhead": {"cpu": "1"}},
            "spec.overhead: pod rejected: Pod Overhead set without corresponding "
            "RuntimeClass defined Overhead",
            id="overhead-class-without",
        ),
        pytest.param(
            {"runtimeClassName": "kata", "nodeSelector": {"sandbox": "false"}},
            "spec.nodeSelector: conflict: runtimeClass.scheduling.nodeSelector[sandbox] = "
            "true; pod.spec.nodeSelector[sandbox] = false",
            id="selector-conflict",
        ),
    ],
)
def test_what_the_api_server_refuses_is_refused(spec: JSON, message: str) -> None:
    with pytest.raises(ObjectError) as e:
        admitted(spec)
    assert str(e.value) == message


def test_the_class_overhead_stated_in_other_units_is_accepted() -> None:
    spec = admitted({"runtimeClassName": "kata", "overhead": {"cpu": "0.25", "memory": "120Mi"}})
    assert spec["overhead"] == {"cpu": "250m", "memory": "120Mi"}


T = {"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("first", "second", "merged"),
    [
        pytest.param([T], [T], [T], id="equal-kept-once"),
        pytest.param(
            [T],
            [{"key": "k", "operator": "Exists"}],
            [{"key": "k", "operator": "Exists"}],
            id="exists-covers-equal",
        ),
        pytest.param(
            [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
            [{"key": "k", "operator": "Exists", "effect": "NoExecute"}],
            [
                {"key": "k", "operator": "Exists", "effect": "NoSchedule"},
                {"key": "k", "operator": "Exists", "effect": "NoExecute"},
            ],
            id="other-effects-both-kept",
        ),
        pytest.param(
            [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}],
            [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}],
            [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}],
            id="longer-time-covers-shorter",
        ),
        pytest.param(
            [T],
            [{"key": "k", "value": "v", "effect": "NoSchedule"}],
            [{"key": "k", "value": "v", "effect": "NoSchedule"}],
            # kube's isSuperset: an empty operator covers an Equal one; an Equal one
            # covers only an Equal one, not one whose operator is left empty
            id="empty-operator-covers-equal",
        ),
    ],
)
def test_merge_tolerations_keeps_what_nothing_else_covers(
    first: list[JSON], second: list[JSON], merged: list[JSON]
) -> None:
    assert merge_tolerations(first, second) == merged


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"handler": ""}, "handler: Required value"),
        ({"overhead": {"podFixed": {"cpu": "lots"}}}, "overhead.podFixed.cpu: "),
        ({"scheduling": {"nodeSelector": {"a": 1}}}, "scheduling.nodeSelector: "),
        (
            {"scheduling": {"tolerations": [{"operator": "Equal", "value": "x"}]}},
            "scheduling.tolerations[0].operator: operator must be Exists when `key` is empty",
        ),
    ],
)
def test_a_malformed_class_is_named_by_its_field(change: JSON, message: str) -> None:
    with pytest.raises(ObjectError) as e:
        validate_runtime_class({**KATA, **change})
    assert str(e.value).startswith(message)


def test_a_scenario_pod_naming_a_missing_class_is_refused_with_its_document(
    tmp_path: Any,
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n"
        "  runtimeClassName: kata\n  containers: [{name: c, image: i}]\n"
    )
    with pytest.raises(ScenarioError) as e:
        load_scenarios([str(path)])
    assert 'pod rejected: RuntimeClass "kata" not found' in str(e.value)
    assert "document 0 (Pod default/p)" in str(e.value)
