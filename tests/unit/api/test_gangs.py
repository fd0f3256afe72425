"""The one gang model: each API's PodGroup parsed, a pod's gang by precedence, keys that
never collide, and invalid specs named by field."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.api.gangs import (
    STORE_KINDS,
    WORKLOAD_STORE_KIND,
    GangAPI,
    InvalidGang,
    TopologyConstraint,
    gang_key,
    parse_gang,
    parse_key,
    pod_ref,
    refs_for,
    resolve,
    store_kind,
)

OURS, UP, X = (STORE_KINDS[a] for a in GangAPI)


def obj(api: GangAPI, name: str = "train", ns: str = "ml", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": api.value,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }


def workload(*templates: dict[str, Any], name: str = "job") -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"podGroupTemplates": list(templates)},
    }


# -- parsing ----------------------------------------------------------------------------------------
def test_ours_parses_with_topology() -> None:
    g = parse_gang(
        OURS,
        obj(
            GangAPI.KUBESCHED,
            minMember=4,
            scheduleTimeoutSeconds=30,
            minResources={"cpu": "8"},
            schedulingConstraints={"topology": [{"key": "zone", "mode": "Preferred"}]},
        ),
    )
    assert (g.api, g.key, g.min_member, g.schedule_timeout_seconds) == (
        GangAPI.KUBESCHED,
        "ml/train",
        4,
        30,
    )
    assert g.min_resources == {"cpu": "8"}
    assert g.topology == (TopologyConstraint("zone", "Preferred"),)


@pytest.mark.parametrize(
    ("kind", "api", "spec", "mode"),
    [
        (OURS, GangAPI.KUBESCHED, {"minMember": 2}, "All"),
        (X, GangAPI.SCHEDULER_PLUGINS, {"minMember": 2}, "All"),
        (UP, GangAPI.UPSTREAM, {"schedulingPolicy": {"gang": {"minCount": 2}}}, "Single"),
    ],
    ids=["ours-whole", "scheduler-plugins-whole", "upstream-default-single"],
)
def test_disruption_mode_defaults(kind: str, api: GangAPI, spec: dict[str, Any], mode: str) -> None:
    # Preemption evicts our and scheduler-plugins' gangs whole (neither API can say
    # otherwise); upstream's follows its disruptionMode, Single when left out.
    assert parse_gang(kind, obj(api, **spec)).disruption_mode == mode


def test_scheduler_plugins_parses_min_member_resources_and_timeout() -> None:
    g = parse_gang(
        X,
        obj(
            GangAPI.SCHEDULER_PLUGINS,
            minMember=3,
            minResources={"nvidia.com/gpu": 8},
            scheduleTimeoutSeconds=10,
        ),
    )
    assert (g.key, g.min_member, g.min_resources, g.schedule_timeout_seconds) == (
        "scheduling.x-k8s.io/ml/train",
        3,
        {"nvidia.com/gpu": 8},
        10,
    )
    # minMember 0 or unset gates nothing (scheduler-plugins' reading)
    assert parse_gang(X, obj(GangAPI.SCHEDULER_PLUGINS)).min_member == 1


def test_upstream_gang_policy_and_its_other_fields() -> None:
    g = parse_gang(
        UP,
        obj(
            GangAPI.UPSTREAM,
            schedulingPolicy={"gang": {"minCount": 5}},
            schedulingConstraints={"topology": [{"key": "topology.kubernetes.io/zone"}]},
            disruptionMode={"all": {}},
            priorityClassName="high",
            priority=1000,
            preemptionPolicy="Never",
        ),
    )
    assert (g.key, g.min_member, g.policy, g.disruption_mode) == (
        "scheduling.k8s.io/ml/train",
        5,
        "Gang",
        "All",
    )
    assert g.topology == (TopologyConstraint("topology.kubernetes.io/zone", "Required"),)
    assert (g.priority_class_name, g.priority, g.preemption_policy) == ("high", 1000, "Never")


def test_upstream_basic_policy_is_a_gang_of_one() -> None:
    g = parse_gang(UP, obj(GangAPI.UPSTREAM, schedulingPolicy={"basic": {}}))
    assert (g.min_member, g.policy, g.disruption_mode) == (1, "Basic", "Single")


def test_upstream_policy_from_the_workload_template() -> None:
    wl = workload(
        {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 3}}},
        {"name": "driver", "schedulingPolicy": {"basic": {}}},
    )
    pg = obj(GangAPI.UPSTREAM, workloadRef={"workloadName": "job", "templateName": "workers"})
    g = parse_gang(UP, pg, lambda ns, name: wl if (ns, name) == ("ml", "job") else None)
    assert (g.min_member, g.template) == (3, "job/workers")


@pytest.mark.parametrize(
    ("kind", "spec", "workload_obj", "message"),
    [
        pytest.param(
            UP,
            {"workloadRef": {"workloadName": "job", "templateName": "ps"}},
            workload({"name": "workers", "schedulingPolicy": {"basic": {}}}),
            'spec.workloadRef.templateName: Workload "ml/job" has no podGroupTemplate named '
            '"ps" (it has: "workers")',
            id="workload-without-the-template",
        ),
        pytest.param(
            UP,
            {"workloadRef": {"workloadName": "job", "templateName": "ps"}},
            None,
            'spec.schedulingPolicy: not set, and Workload "ml/job" named by spec.workloadRef '
            "does not exist",
            id="missing-workload",
        ),
        pytest.param(
            UP,
            {"schedulingPolicy": {"basic": {}, "gang": {"minCount": 2}}},
            None,
            "spec.schedulingPolicy: exactly one of basic or gang must be set",
            id="both-policies",
        ),
        pytest.param(
            UP,
            {"schedulingPolicy": {"gang": {"minCount": 0}}},
            None,
            "spec.schedulingPolicy.gang.minCount: Input should be greater than or equal to 1",
            id="min-count-zero",
        ),
        pytest.param(
            X,
            {"minMember": -1},
            None,
            "spec.minMember: Input should be greater than or equal to 0",
            id="x-negative-min-member",
        ),
        pytest.param(
            X,
            {"minMember": 2, "minResources": {"cpu": "lots"}},
            None,
            "spec.minResources: cpu: not a quantity: 'lots'",
            id="x-bad-quantity",
        ),
        pytest.param(
            OURS,
            {"schedulingConstraints": {"topology": [{"key": "zone", "mode": "Sometimes"}]}},
            None,
            "spec.schedulingConstraints.topology[0].mode: Input should be 'Required' or "
            "'Preferred'",
            id="ours-bad-topology-mode",
        ),
    ],
)
def test_invalid_specs_name_the_field(
    kind: str, spec: dict[str, Any], workload_obj: dict[str, Any] | None, message: str
) -> None:
    api = {OURS: GangAPI.KUBESCHED, UP: GangAPI.UPSTREAM, X: GangAPI.SCHEDULER_PLUGINS}[kind]
    with pytest.raises(InvalidGang) as e:
        parse_gang(kind, obj(api, **spec), lambda ns, name: workload_obj)
    assert str(e.value) == message


# -- keys and precedence ------------------------------------------------------------------------------
def test_same_name_in_three_apis_gives_three_keys() -> None:
    keys = {gang_key(api, "ml", "train") for api in GangAPI}
    assert keys == {"ml/train", "scheduling.k8s.io/ml/train", "scheduling.x-k8s.io/ml/train"}
    for api in GangAPI:
        assert parse_key(gang_key(api, "ml", "train")) == (api, "ml", "train")


def test_store_kinds_keep_the_three_podgroups_apart() -> None:
    assert store_kind("kubesched.dev/v1alpha1", "PodGroup") == "PodGroup"
    assert store_kind("scheduling.k8s.io/v1beta1", "PodGroup") == UP
    assert store_kind("scheduling.x-k8s.io/v1alpha1", "PodGroup") == X
    assert store_kind("scheduling.k8s.io/v1beta1", "Workload") == WORKLOAD_STORE_KIND
    assert store_kind("v1", "Pod") == "Pod"


def exists_of(*present: tuple[str, str]) -> Any:
    return lambda kind, ns, name: (kind, name) in present


BOTH_LABELS = {"kubesched.dev/pod-group": "a", "scheduling.x-k8s.io/pod-group": "b"}


@pytest.mark.parametrize(
    ("labels", "spec", "present", "key"),
    [
        pytest.param(
            BOTH_LABELS,
            {"schedulingGroup": {"podGroupName": "up"}},
            (),
            "scheduling.k8s.io/ml/up",
            id="schedulingGroup-wins",
        ),
        pytest.param(BOTH_LABELS, {}, (), "ml/a", id="our-label-before-theirs"),
        pytest.param(
            {"scheduling.x-k8s.io/pod-group": "b"},
            {},
            ((X, "b"), (OURS, "b")),
            "scheduling.x-k8s.io/ml/b",
            id="x-label-their-podgroup",
        ),
        pytest.param(
            {"scheduling.x-k8s.io/pod-group": "b"},
            {},
            ((OURS, "b"),),
            "ml/b",
            id="x-label-falls-back-to-ours",
        ),
        pytest.param(
            {"scheduling.x-k8s.io/pod-group": "b"},
            {},
            (),
            "scheduling.x-k8s.io/ml/b",
            id="x-label-nothing-exists",
        ),
        pytest.param({"app": "x"}, {"schedulingGroup": {}}, (), None, id="no-gang"),
    ],
)
def test_a_pods_gang_by_precedence(
    labels: dict[str, str], spec: dict[str, Any], present: Any, key: str | None
) -> None:
    exists = exists_of(*present)
    ref = pod_ref("ml", labels, spec)
    got = None if ref is None else resolve(ref, exists)
    assert got == key
    if ref is not None and key is not None:
        assert ref in refs_for(key, exists)  # the inverse finds it again


def test_refs_for_is_the_inverse_of_resolve() -> None:
    only_ours = exists_of((OURS, "b"))
    assert refs_for("ml/b", only_ours) == [("label", "ml", "b"), ("x-label", "ml", "b")]
    assert refs_for("scheduling.x-k8s.io/ml/b", only_ours) == []
    theirs_too = exists_of((OURS, "b"), (X, "b"))
    assert refs_for("ml/b", theirs_too) == [("label", "ml", "b")]
    assert refs_for("scheduling.x-k8s.io/ml/b", theirs_too) == [("x-label", "ml", "b")]
