"""LimitRanger admission on scenario pods: quantities written as kube writes them, the
LimitRange's own defaults, the defaults a pod's containers get, and the pod sums checked."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.framework.types import ObjectError
from kubesched.simulator.limit_ranges import (
    ANNOTATION,
    Quantity,
    admit,
    canonical,
    default_limit_range,
    validate_limit_range,
)
from kubesched.simulator.scenario import ScenarioError, load_scenarios

JSON = dict[str, Any]


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ("0.5", "500m"),
        ("1500m", "1500m"),
        ("2000m", "2"),
        ("1000", "1k"),
        ("12000", "12k"),
        ("1.5Gi", "1536Mi"),
        ("1024Ki", "1Mi"),
        ("1000Ki", "1000Ki"),
        ("0.5Ki", "512"),
        ("0", "0"),
        ("1e3", "1e3"),
        ("100M", "100M"),
    ],
)
def test_quantities_are_written_as_kube_writes_them(text: str, written: str) -> None:
    assert canonical(Quantity.parse(text)) == written


def test_a_sum_keeps_the_format_of_its_first_term() -> None:
    assert canonical(Quantity.parse("1Gi") + Quantity.parse("512Mi")) == "1536Mi"
    assert canonical(Quantity.parse("1") + Quantity.parse("1.5")) == "2500m"


def limit_range(*items: JSON, name: str = "lr") -> JSON:
    lr: JSON = {"metadata": {"name": name}, "spec": {"limits": list(items)}}
    validate_limit_range(lr)
    default_limit_range(lr)
    return lr


def test_a_container_item_defaults_its_limit_from_max_and_its_request_from_it() -> None:
    lr = limit_range({"type": "Container", "max": {"cpu": "2"}, "min": {"memory": "64Mi"}})
    (item,) = lr["spec"]["limits"]
    assert item["default"] == {"cpu": "2"}
    assert item["defaultRequest"] == {"cpu": "2", "memory": "64Mi"}


def pod(*containers: JSON) -> JSON:
    return {"metadata": {"name": "p"}, "spec": {"containers": list(containers)}}


def test_a_stated_limit_is_the_request_not_the_default_request() -> None:
    p = pod({"name": "c", "resources": {"limits": {"cpu": "1"}}})
    admit(p, [limit_range({"type": "Container", "defaultRequest": {"cpu": "100m"}})])
    assert p["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1"}
    assert ANNOTATION not in p["metadata"].get("annotations", {})


def test_each_range_fills_what_is_still_missing_and_the_last_writes_the_annotation() -> None:
    first = limit_range({"type": "Container", "defaultRequest": {"cpu": "100m"}}, name="a")
    second = limit_range(
        {"type": "Container", "defaultRequest": {"cpu": "300m", "memory": "1Gi"}}, name="b"
    )
    p = pod({"name": "c"})
    admit(p, [first, second])
    assert p["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "100m", "memory": "1Gi"}
    assert p["metadata"]["annotations"][ANNOTATION] == (
        "LimitRanger plugin set: memory request for container c"
    )


def test_a_pod_item_counts_sidecars_and_the_largest_init_container() -> None:
    lr = limit_range({"type": "Pod", "max": {"cpu": "3"}})
    spec = pod({"name": "app", "resources": {"limits": {"cpu": "1"}}})
    spec["spec"]["initContainers"] = [
        {"name": "side", "restartPolicy": "Always", "resources": {"limits": {"cpu": "1"}}},
        {"name": "setup", "resources": {"limits": {"cpu": "1500m"}}},
    ]
    # app + side = 2; setup runs beside side: 2500m; the larger is 2500m, within 3
    admit(spec, [lr])
    spec["spec"]["initContainers"][1]["resources"] = {"limits": {"cpu": "2100m"}}
    with pytest.raises(ObjectError) as e:
        admit(spec, [lr])
    assert str(e.value) == "spec: maximum cpu usage per Pod is 3, but limit is 3100m"


def test_a_scenario_pod_gets_its_namespace_defaults_and_others_do_not(tmp_path: Any) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        "apiVersion: v1\nkind: LimitRange\nmetadata: {name: d, namespace: team}\n"
        "spec: {limits: [{type: Container, defaultRequest: {cpu: 200m}}]}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: team}\n"
        "spec: {containers: [{name: c, image: i}]}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: q}\n"
        "spec: {containers: [{name: c, image: i}]}\n"
    )
    p, q = [o for o in load_scenarios([str(path)]) if o["kind"] == "Pod"]
    assert p["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "200m"}
    assert not q["spec"]["containers"][0].get("resources")


def test_a_refused_scenario_pod_names_its_document(tmp_path: Any) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        "apiVersion: v1\nkind: LimitRange\nmetadata: {name: d}\n"
        "spec: {limits: [{type: Container, max: {cpu: '1'}}]}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
        "spec: {containers: [{name: c, image: i, resources: {limits: {cpu: '2'}}}]}\n"
    )
    with pytest.raises(ScenarioError) as e:
        load_scenarios([str(path)])
    assert str(e.value).endswith(
        "document 1 (Pod default/p): spec: maximum cpu usage per Container is 1, but limit is 2"
    )


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ({"type": "Node"}, "spec.limits[0].type: Unsupported value: 'Node'"),
        ({"type": "Container", "max": {"cpu": "x"}}, "spec.limits[0].max.cpu: "),
    ],
)
def test_a_malformed_range_is_named_by_its_field(item: JSON, message: str) -> None:
    with pytest.raises(ObjectError) as e:
        validate_limit_range({"spec": {"limits": [item]}})
    assert str(e.value).startswith(message)
