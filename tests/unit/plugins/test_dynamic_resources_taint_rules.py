"""DeviceTaintRules (resource.k8s.io/v1, on by default in 1.37): taints added to the
devices a rule selects, honoured by DynamicResources as taints in the ResourceSlice."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.cluster.memory import MemoryCluster
from kubesched.framework.dra import DeviceTaintRule
from kubesched.framework.interface import ActionType, ClusterEvent, EventResource
from kubesched.framework.types import ObjectError
from kubesched.scheduler.eventhandlers import EventHandlers
from kubesched.scheduler.scheduler import Scheduler
from kubesched.simulator.dra_kinds import validate_taint_rule
from tests.unit.dra.builders import DRIVER, exactly
from tests.unit.plugins.dra_builders import claim, device_class, gpus, kind, pod_with
from tests.unit.plugins.test_dynamic_resources import NODES, plugin, run_filter, unresolvable

NO_FIT = unresolvable("cannot allocate all claims")


def rule(
    name: str = "broken",
    effect: str = "NoSchedule",
    *,
    select: bool = True,
    key: str = "example.com/unhealthy",
    value: str = "true",
    **selector: str,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"taint": {"key": key, "value": value, "effect": effect}}
    if select:
        spec["deviceSelector"] = selector
    return kind("DeviceTaintRule", {"metadata": {"name": name}, "spec": spec})


def tolerate(effect: str = "NoSchedule") -> dict[str, Any]:
    return {"key": "example.com/unhealthy", "operator": "Exists", "effect": effect}


def verdicts(*objs: dict[str, Any], count: int = 1, **req: Any) -> dict[str, Any]:
    pl, _ = plugin(
        device_class(), gpus(2, "n1"), gpus(2, "n2"), claim("c", exactly(count=count, **req)), *objs
    )
    return run_filter(pl, pod_with("c"))[2]


@pytest.mark.parametrize("effect", ["NoSchedule", "NoExecute"])
def test_a_rule_keeps_its_devices_from_requests_that_do_not_tolerate_it(effect: str) -> None:
    tainted = rule(effect=effect, driver=DRIVER, pool="n1")
    assert verdicts(tainted) == {"n1": NO_FIT, "n2": None}
    assert verdicts(tainted, tolerations=[tolerate(effect)]) == {"n1": None, "n2": None}
    # a toleration of the other effect does not help
    other = "NoExecute" if effect == "NoSchedule" else "NoSchedule"
    assert verdicts(tainted, tolerations=[tolerate(other)]) == {"n1": NO_FIT, "n2": None}


def test_a_rule_naming_one_device_leaves_its_neighbours_usable() -> None:
    one = rule(pool="n1", device="gpu-0")
    assert verdicts(one) == {"n1": None, "n2": None}
    assert verdicts(one, count=2) == {"n1": NO_FIT, "n2": None}


@pytest.mark.parametrize(
    "harmless",
    [
        rule(driver="other.example.com"),  # another driver's devices
        rule(pool="n3"),
        rule(device="gpu-7"),
        rule(select=False),  # no deviceSelector: selects nothing
        rule(effect="None"),  # informational
    ],
    ids=["driver", "pool", "device", "no-selector", "effect-none"],
)
def test_rules_that_do_not_select_or_do_not_prevent_change_nothing(
    harmless: dict[str, Any],
) -> None:
    assert verdicts(harmless, count=2) == {"n1": None, "n2": None}


def test_an_empty_selector_taints_every_device() -> None:
    assert verdicts(rule()) == {"n1": NO_FIT, "n2": NO_FIT}


def test_removing_or_changing_a_rule_frees_the_devices_for_the_next_pod() -> None:
    pl, memory = plugin(device_class(), gpus(1, "n1"), claim("c"), rule(pool="n1"))
    assert run_filter(pl, pod_with("c"))[2]["n1"] == NO_FIT
    memory.apply(rule(pool="n2"))  # now on the other node's devices
    assert run_filter(pl, pod_with("c"))[2] == {"n1": None, "n2": NO_FIT}
    memory.delete("DeviceTaintRule", "broken")
    assert run_filter(pl, pod_with("c"))[2] == {"n1": None, "n2": NO_FIT}  # n2 has no devices


def test_explain_names_the_taint_and_the_rule() -> None:
    pl, _ = plugin(device_class(), gpus(2, "n1"), claim("c"), rule(pool="n1", device="gpu-1"))
    pl2, _ = plugin(
        device_class(), gpus(2, "n1"), claim("c", exactly(count=2)), rule(pool="n1", device="gpu-1")
    )
    pod = pod_with("c")
    state, _, by_node = run_filter(pl2, pod)
    assert by_node["n1"] == NO_FIT
    assert pl2.explain_filter(state, pod, NODES[0]) == [
        "claim default/c, request req: wants 2 of class gpu; the node has 2 device(s): "
        "0 not selected, 0 in use, 1 with a taint not tolerated "
        "(example.com/unhealthy=true:NoSchedule from DeviceTaintRule broken), 1 free"
    ]
    assert run_filter(pl, pod)[2]["n1"] is None


@pytest.mark.parametrize(
    ("obj", "error"),
    [
        (
            {"metadata": {"name": "r"}, "spec": {"deviceSelector": {}}},
            "spec.taint: required",
        ),
        (
            {"metadata": {"name": "r"}, "spec": {"taint": {"key": "k", "effect": "Evict"}}},
            'spec.taint.effect: Unsupported value: "Evict": supported values: "None", '
            '"NoSchedule", "NoExecute"',
        ),
        (
            {"metadata": {"name": "r"}, "spec": {"taint": {"effect": "NoSchedule"}}},
            "spec.taint.key: required",
        ),
        (
            {
                "metadata": {"name": "r"},
                "spec": {
                    "taint": {"key": "k", "effect": "NoSchedule"},
                    "deviceSelector": {"pool": 3},
                },
            },
            "spec.deviceSelector.pool: expected a string",
        ),
    ],
)
def test_malformed_rules_are_refused_naming_the_field(obj: dict[str, Any], error: str) -> None:
    with pytest.raises(ObjectError, match=error.replace("(", r"\(")):
        validate_taint_rule(obj)
    with pytest.raises(ObjectError):
        DeviceTaintRule.from_dict(obj)


def test_a_malformed_rule_in_the_store_is_ignored_not_fatal() -> None:
    bad = kind("DeviceTaintRule", {"metadata": {"name": "bad"}, "spec": {}})
    assert verdicts(bad) == {"n1": None, "n2": None}


def _events(*changes: tuple[str, dict[str, Any] | None, dict[str, Any]]) -> list[ClusterEvent]:
    cluster = MemoryCluster()
    cluster.apply(kind("ResourceSlice", gpus(1, "n1")))
    sched = Scheduler(cluster, cluster)
    seen: list[ClusterEvent] = []
    sched.queues.move_all_to_active_or_backoff = (  # type: ignore[method-assign]
        lambda event, *a, **kw: seen.append(event)
    )
    handlers = EventHandlers(sched)
    for event_type, old, new in changes:
        handlers.on_event("DeviceTaintRule", event_type, new, old)
    return seen


def test_rule_changes_requeue_as_slice_updates_only_when_they_touch_a_device() -> None:
    slice_update = ClusterEvent(EventResource.RESOURCE_SLICE, ActionType.UPDATE_OTHER)
    on_n1, elsewhere = rule(pool="n1"), rule(pool="n9")
    assert _events(("ADDED", None, on_n1)) == [slice_update]
    assert _events(("DELETED", None, on_n1)) == [slice_update]
    assert _events(("MODIFIED", on_n1, elsewhere)) == [slice_update]  # n1's devices untainted
    assert _events(("ADDED", None, elsewhere), ("DELETED", None, elsewhere)) == []
    assert _events(("ADDED", None, rule(select=False))) == []
