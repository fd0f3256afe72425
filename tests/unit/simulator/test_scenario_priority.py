"""Scenario files: priorities as the API server's Priority admission resolves them, for
pods and for Kubernetes' PodGroups."""

from __future__ import annotations

import pytest

from kubesched.simulator.scenario import ScenarioError
from tests.unit.simulator.test_scenario import (  # noqa: F401 (_in_tmp: its autouse fixture)
    HIGH,
    POD,
    _in_tmp,
    by_name,
    load,
)

GLOBAL_DEFAULT = """\
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: standard}
value: 50
globalDefault: true
"""
NEVER = """\
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: batch}
value: 10
preemptionPolicy: Never
"""


def with_spec(line: str) -> str:
    return POD.replace("spec:\n", f"spec:\n  {line}\n")


@pytest.mark.parametrize(
    ("docs", "priority", "policy", "class_name"),
    [
        pytest.param([POD], 0, "PreemptLowerPriority", None, id="no-classes"),
        pytest.param(
            [HIGH, with_spec("priorityClassName: high")],
            1000,
            "PreemptLowerPriority",
            "high",
            id="named-class",
        ),
        pytest.param(
            [with_spec("priorityClassName: high"), HIGH],
            1000,
            "PreemptLowerPriority",
            "high",
            id="class-defined-after-the-pod",
        ),
        pytest.param(
            [NEVER, with_spec("priorityClassName: batch")],
            10,
            "Never",
            "batch",
            id="preemption-policy-from-class",
        ),
        pytest.param(
            [GLOBAL_DEFAULT, POD],
            50,
            "PreemptLowerPriority",
            "standard",
            id="global-default-when-none-named",
        ),
        pytest.param(
            [GLOBAL_DEFAULT, HIGH, with_spec("priorityClassName: high")],
            1000,
            "PreemptLowerPriority",
            "high",
            id="named-class-beats-global-default",
        ),
        pytest.param(
            [GLOBAL_DEFAULT, with_spec("priority: 7")],
            7,
            "PreemptLowerPriority",
            None,
            id="explicit-priority-without-class-is-kept",
        ),
        pytest.param(
            [with_spec("priorityClassName: system-node-critical")],
            2000001000,
            "PreemptLowerPriority",
            "system-node-critical",
            id="built-in-class",
        ),
        pytest.param(
            [with_spec("preemptionPolicy: Never")],
            0,
            "Never",
            None,
            id="explicit-policy-without-class",
        ),
    ],
)
def test_priority_resolution(
    docs: list[str], priority: int, policy: str, class_name: str | None
) -> None:
    pod = next(o for o in load(*docs) if o["kind"] == "Pod")
    assert pod["spec"]["priority"] == priority
    assert pod["spec"]["preemptionPolicy"] == policy
    assert pod["spec"].get("priorityClassName") == class_name


def test_built_in_class_may_be_restated_but_not_changed() -> None:
    builtin = HIGH.replace("high", "system-cluster-critical").replace("1000", "2000000000")
    assert by_name(load(builtin), "system-cluster-critical")["value"] == 2000000000
    with pytest.raises(ScenarioError, match="the built-in class system-cluster-critical has value"):
        load(builtin.replace("2000000000", "5"))
    with pytest.raises(ScenarioError, match="the prefix 'system-' is reserved"):
        load(HIGH.replace("high", "system-mine"))


UPSTREAM_GROUP = """\
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: g}
spec:
  schedulingPolicy: {gang: {minCount: 2}}
"""


@pytest.mark.parametrize(
    ("docs", "priority"),
    [
        pytest.param([UPSTREAM_GROUP], 0, id="no-class"),
        pytest.param([HIGH, UPSTREAM_GROUP + "  priorityClassName: high\n"], 1000, id="named"),
        pytest.param([GLOBAL_DEFAULT, UPSTREAM_GROUP], 50, id="global-default"),
    ],
)
def test_a_kubernetes_podgroup_gets_its_priority_as_the_api_server_gives_it(
    docs: list[str], priority: int
) -> None:
    # kube-scheduler compares it with its pods' (a group whose pods differ is not tried)
    group = next(o for o in load(*docs) if o["kind"] == "PodGroup")
    assert group["spec"]["priority"] == priority


def test_a_kubernetes_podgroup_priority_that_contradicts_its_class_is_refused() -> None:
    with pytest.raises(ScenarioError) as e:
        load(HIGH, UPSTREAM_GROUP + "  priorityClassName: high\n  priority: 5\n")
    assert str(e.value) == (
        "scenario.yaml document 1 (PodGroup default/g): spec.priority: 5 contradicts "
        "PriorityClass 'high' (value 1000); leave spec.priority out"
    )
