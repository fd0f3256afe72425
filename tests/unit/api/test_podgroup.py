"""PodGroup: the model validates what a user writes, the checked-in CRD is the one the
models generate (and is a structural schema), and status reads at a glance."""

from __future__ import annotations

import pathlib
import re
from typing import Any

import pydantic
import pytest
import yaml

from kubesched.api import crdgen
from kubesched.api.podgroup import (
    PodGroup,
    pod_group_name,
    validation_message,
)

NOW = "2025-01-01T00:00:00Z"


def group(min_member: int = 3, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubesched.dev/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "ml", "generation": 2},
        "spec": {"minMember": min_member, **spec},
    }


def pod(name: str, *, node: str = "", phase: str = "Pending") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "pause"}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "uid": name}, "spec": spec, "status": {"phase": phase}}


def test_checked_in_crd_is_the_generated_one() -> None:
    path = pathlib.Path(__file__).resolve().parents[3] / "crds" / "podgroups.kubesched.dev.yaml"
    assert path.read_text() == crdgen.render(crdgen.POD_GROUP), (
        "run `python -m kubesched.api.crdgen`"
    )


def _walk(node: Any, path: str = "") -> list[str]:
    """Places a structural schema forbids: $ref, nullable unions, titles, untyped nodes."""
    bad: list[str] = []
    if isinstance(node, dict):
        for k in ("$ref", "$defs", "title", "const", "allOf"):
            if k in node:
                bad.append(f"{path}.{k}")
        if "anyOf" in node and not node.get("x-kubernetes-int-or-string"):
            bad.append(f"{path}.anyOf")
        if "properties" in node and node.get("type") != "object":
            bad.append(f"{path}: properties without type object")
        if isinstance(node.get("exclusiveMinimum"), int | float) and not isinstance(
            node.get("exclusiveMinimum"), bool
        ):
            bad.append(f"{path}.exclusiveMinimum: must be a boolean in OpenAPI v3.0")
        for k, v in node.items():
            if k == "properties":
                for name, sub in v.items():
                    if "type" not in sub and not sub.get("x-kubernetes-int-or-string"):
                        bad.append(f"{path}.{name}: no type")
                    bad += _walk(sub, f"{path}.{name}")
            elif isinstance(v, dict | list):
                bad += _walk(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            bad += _walk(v, f"{path}[{i}]")
    return bad


def test_crd_is_structural_with_status_printer_columns_and_distinct_short_names() -> None:
    crd = yaml.safe_load(crdgen.render(crdgen.POD_GROUP))
    names = crd["spec"]["names"]
    assert not {"pg", "pgs", "podgroup", "podgroups"} & set(names["shortNames"])
    assert names["categories"] == ["kubesched"]
    assert crd["spec"]["scope"] == "Namespaced"
    version = crd["spec"]["versions"][0]
    assert version["subresources"] == {"status": {}}
    cols = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert cols["MinMember"] == ".spec.minMember"
    assert cols["Phase"] == ".status.phase"
    assert {"Bound", "Running", "Age"} <= set(cols)
    schema = version["schema"]["openAPIV3Schema"]
    assert _walk(schema) == []
    conds = schema["properties"]["status"]["properties"]["conditions"]
    assert conds["x-kubernetes-list-type"] == "map"
    assert conds["x-kubernetes-list-map-keys"] == ["type"]
    spec = schema["properties"]["spec"]["properties"]
    assert spec["minMember"]["minimum"] == 1
    timeout = spec["scheduleTimeoutSeconds"]
    assert (timeout["type"], timeout["minimum"], timeout["exclusiveMinimum"]) == (
        "integer",
        0,
        True,
    )
    assert "maximum" not in spec["scheduleTimeoutSeconds"], "no 15-minute cap"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"minMember": 0}, "spec.minMember: Input should be greater than or equal to 1"),
        ({"minMember": "x"}, "spec.minMember: Input should be a valid integer"),
        ({"scheduleTimeoutSeconds": 0}, "spec.scheduleTimeoutSeconds: Input should be greater"),
        ({"minResources": {"cpu": "lots"}}, "spec.minResources: cpu: not a quantity"),
        ({"minMembers": 2}, "spec.minMembers: Extra inputs are not permitted"),
    ],
    ids=["min-member-zero", "min-member-text", "timeout-zero", "bad-quantity", "typo"],
)
def test_invalid_specs_name_the_field(spec: dict[str, Any], message: str) -> None:
    obj = group()
    obj["spec"] = spec
    with pytest.raises(pydantic.ValidationError) as e:
        PodGroup.model_validate(obj)
    assert validation_message(e.value).startswith(message)


def test_valid_group_and_a_long_timeout() -> None:
    g = PodGroup.model_validate(
        group(8, minResources={"nvidia.com/gpu": 8, "cpu": "16"}, scheduleTimeoutSeconds=7200)
    )
    assert g.spec.min_member == 8
    assert g.spec.schedule_timeout_seconds == 7200


def test_both_labels_name_the_group_ours_first() -> None:
    assert pod_group_name({"kubesched.dev/pod-group": "a"}) == "a"
    assert pod_group_name({"scheduling.x-k8s.io/pod-group": "b"}) == "b"
    both = {"kubesched.dev/pod-group": "a", "scheduling.x-k8s.io/pod-group": "b"}
    assert pod_group_name(both) == "a"
    assert pod_group_name({"app": "x"}) is None


def test_crdgen_writes_into_a_directory(tmp_path: pathlib.Path) -> None:
    crdgen.write_all(tmp_path, [crdgen.POD_GROUP])
    assert (tmp_path / "podgroups.kubesched.dev.yaml").read_text() == crdgen.render(
        crdgen.POD_GROUP
    )
    assert crdgen.write_all(tmp_path, [crdgen.POD_GROUP], check=True) == []


@pytest.mark.parametrize(
    ("text", "valid"),
    [
        ("1.5Gi", True),
        ("100m", True),
        ("2e3", True),
        (".5", True),
        ("1e1.5", False),
        ("5GB", False),
    ],
)
def test_the_crd_and_the_model_accept_the_same_quantities(text: str, valid: bool) -> None:
    """What the API server lets into minResources (the CRD's pattern) is what the model
    (and so the scheduler) accepts: one grammar."""
    crd = yaml.safe_load(crdgen.render(crdgen.POD_GROUP))
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    pattern = spec["properties"]["minResources"]["additionalProperties"]["pattern"]
    assert bool(re.match(pattern, text)) is valid
    obj = group(minResources={"cpu": text})
    if valid:
        PodGroup.model_validate(obj)
    else:
        with pytest.raises(pydantic.ValidationError, match="not a quantity"):
            PodGroup.model_validate(obj)
