"""The SchedulingProfile CRD: generated from the pydantic models and checked in as
generated; structural (every node typed, bounded, no $ref or anyOf); spec field names
equal to a KubeSchedulerConfiguration profile's; sample objects fit the schema."""

from __future__ import annotations

import pathlib
import re
from typing import Any

import pytest
import yaml

from kubesched.api import crdgen

ROOT = pathlib.Path(__file__).resolve().parents[3]
CRD = yaml.safe_load(crdgen.render(crdgen.SCHEDULING_PROFILE))
VERSION = CRD["spec"]["versions"][0]
SCHEMA = VERSION["schema"]["openAPIV3Schema"]


def test_the_checked_in_crd_is_the_generator_output() -> None:
    path = ROOT / "crds" / "schedulingprofiles.kubesched.dev.yaml"
    assert path.read_text() == crdgen.render(crdgen.SCHEDULING_PROFILE), (
        "run `python -m kubesched.api.crdgen`"
    )


def test_check_mode_reports_a_stale_file(tmp_path: pathlib.Path) -> None:
    assert crdgen.write_all(tmp_path, [crdgen.SCHEDULING_PROFILE]) != []
    assert crdgen.write_all(tmp_path, [crdgen.SCHEDULING_PROFILE], check=True) == []
    (tmp_path / "schedulingprofiles.kubesched.dev.yaml").write_text("stale")
    assert crdgen.main(["--out", str(tmp_path), "--check"]) == 1


def walk(node: Any, path: str = "") -> list[str]:
    """Everything that would make the schema non-structural or unbounded."""
    bad: list[str] = []
    if not isinstance(node, dict):
        return bad
    for forbidden in ("$ref", "$defs", "anyOf", "oneOf", "allOf", "additionalProperties"):
        if forbidden in node and not (
            forbidden == "additionalProperties" and isinstance(node[forbidden], dict)
        ):
            bad.append(f"{path}: {forbidden}")
    if node.get("x-kubernetes-preserve-unknown-fields"):
        return bad
    t = node.get("type")
    if t is None:
        bad.append(f"{path}: no type")
    if t == "string" and not {"maxLength", "enum"} & set(node) and path.count(".") > 1:
        bad.append(f"{path}: unbounded string")
    if t == "array" and "maxItems" not in node:
        bad.append(f"{path}: unbounded list")
    if t in ("integer", "number") and not {"minimum", "maximum"} <= set(node):
        bad.append(f"{path}: unbounded number")
    if "exclusiveMinimum" in node and not isinstance(node["exclusiveMinimum"], bool):
        bad.append(f"{path}: exclusiveMinimum must be a boolean (OpenAPI v3.0)")
    for k, v in (node.get("properties") or {}).items():
        bad += walk(v, f"{path}.{k}")
    if "items" in node:
        bad += walk(node["items"], f"{path}[]")
    return bad


def test_the_schema_is_structural_and_bounded() -> None:
    assert walk(SCHEMA) == []
    args = SCHEMA["properties"]["spec"]["properties"]["pluginConfig"]["items"]["properties"]["args"]
    assert args == {
        "type": "object",
        "description": args["description"],
        "x-kubernetes-preserve-unknown-fields": True,
    }


def test_names_scope_status_and_printer_columns() -> None:
    names = CRD["spec"]["names"]
    assert CRD["metadata"]["name"] == "schedulingprofiles.kubesched.dev"
    assert CRD["spec"]["scope"] == "Cluster"
    # scheduler-plugins: pg/pgs/eq/eqs; Volcano: pg/vcjob/vj/q/...; KubeArmor: ksp.
    assert not {"ksp", "pg", "pgs", "eq", "eqs", "q", "vj", "sp"} & set(names["shortNames"])
    assert names["categories"] == ["kubesched"]
    assert VERSION["name"] == "v1alpha1" and VERSION["subresources"] == {"status": {}}
    cols = {c["name"]: c["jsonPath"] for c in VERSION["additionalPrinterColumns"]}
    assert cols == {
        "Scheduler": ".status.schedulerName",
        "Ready": '.status.conditions[?(@.type=="Ready")].status',
        "Reason": '.status.conditions[?(@.type=="Ready")].reason',
        "Active": ".status.activeGeneration",
        "Age": ".metadata.creationTimestamp",
    }


# KubeSchedulerConfiguration v1 KubeSchedulerProfile's fields (k8s.io/kube-scheduler
# config/v1/types.go) and Plugins' extension points: a profile pastes as is.
KUBE_PROFILE_FIELDS = {"schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig"}
KUBE_EXTENSION_POINTS = {
    "preEnqueue",
    "queueSort",
    "preFilter",
    "filter",
    "postFilter",
    "preScore",
    "score",
    "reserve",
    "permit",
    "preBind",
    "bind",
    "postBind",
    "multiPoint",
}


def test_spec_fields_are_kube_scheduler_profile_fields() -> None:
    spec = SCHEMA["properties"]["spec"]["properties"]
    assert set(spec) == KUBE_PROFILE_FIELDS | {"backoff"}
    assert set(spec["plugins"]["properties"]) == KUBE_EXTENSION_POINTS
    pset = spec["plugins"]["properties"]["score"]["properties"]
    assert set(pset) == {"enabled", "disabled"}
    assert set(pset["enabled"]["items"]["properties"]) == {"name", "weight"}
    assert set(spec["pluginConfig"]["items"]["properties"]) == {"name", "args"}


def test_status_has_kep_1623_conditions_and_the_chain() -> None:
    status = SCHEMA["properties"]["status"]["properties"]
    assert {"observedGeneration", "activeGeneration", "conditions", "activePlugins"} <= set(status)
    cond = status["conditions"]["items"]
    assert set(cond["required"]) == {"type", "status", "reason", "message", "lastTransitionTime"}
    assert set(cond["properties"]) == set(cond["required"]) | {"observedGeneration"}
    assert status["conditions"]["x-kubernetes-list-map-keys"] == ["type"]
    assert set(status["activePlugins"]["properties"]) == KUBE_EXTENSION_POINTS - {"multiPoint"}


def rules(node: dict[str, Any]) -> list[str]:
    return [r["rule"] for r in node.get("x-kubernetes-validations", [])]


def test_cel_rules_where_they_catch_mistakes_early() -> None:
    spec = SCHEMA["properties"]["spec"]["properties"]
    plugins = spec["plugins"]
    assert any("size(self.queueSort.enabled) <= 1" in r for r in rules(plugins))
    weight_rules = [r for r in rules(plugins) if "p.weight" in r]
    # every point but score and multiPoint
    assert len(weight_rules) == len(KUBE_EXTENSION_POINTS) - 2
    assert not any("self.score" in r or "self.multiPoint" in r for r in weight_rules)
    assert any("p.name != '*'" in r for r in rules(plugins["properties"]["filter"]))
    assert any("maxSeconds" in r for r in rules(spec["backoff"]))
    pct = spec["percentageOfNodesToScore"]
    assert (pct["minimum"], pct["maximum"]) == (0, 100)
    # Every CEL rule only names fields that exist where it is attached.
    for node in (plugins, plugins["properties"]["filter"], spec["backoff"]):
        for rule in rules(node):
            for field in re.findall(r"self\.(\w+)", rule):
                assert field in node["properties"], (rule, field)


# -- sample objects against the schema ------------------------------------------------------------


def conforms(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """A small structural validator: types, bounds, required, unknown fields."""
    if value is None:
        return [] if schema.get("nullable") else [f"{path}: null"]
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return [] if isinstance(value, dict) else [f"{path}: not an object"]
    t = schema["type"]
    ok = {
        "object": isinstance(value, dict),
        "array": isinstance(value, list),
        "string": isinstance(value, str),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        "boolean": isinstance(value, bool),
    }[t]
    if not ok:
        return [f"{path}: not {t}"]
    errs: list[str] = []
    if t == "object":
        props = schema.get("properties")
        for k in schema.get("required", []):
            if k not in value:
                errs.append(f"{path}.{k}: required")
        for k, v in value.items():
            if props is None:
                if "additionalProperties" in schema:  # else: metadata, not checked here
                    errs += conforms(v, schema["additionalProperties"], f"{path}.{k}")
            elif k not in props:
                errs.append(f"{path}.{k}: unknown field")
            else:
                errs += conforms(v, props[k], f"{path}.{k}")
    elif t == "array":
        if len(value) > schema["maxItems"]:
            errs.append(f"{path}: too many items")
        for i, v in enumerate(value):
            errs += conforms(v, schema["items"], f"{path}[{i}]")
    elif t == "string":
        if len(value) > schema.get("maxLength", 1 << 30):
            errs.append(f"{path}: too long")
        if "enum" in schema and value not in schema["enum"]:
            errs.append(f"{path}: not in enum")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errs.append(f"{path}: does not match pattern")
    else:
        if value < schema.get("minimum", value) or value > schema.get("maximum", value):
            errs.append(f"{path}: out of range")
    return errs


def sample(spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "kubesched.dev/v1alpha1",
        "kind": "SchedulingProfile",
        "metadata": {"name": "p"},
        "spec": spec,
    }
    if status is not None:
        obj["status"] = status
    return obj


BINPACK = {
    "schedulerName": "binpack",
    "percentageOfNodesToScore": 50,
    "plugins": {
        "multiPoint": {"enabled": [{"name": "NodeResourcesFit", "weight": 5}]},
        "score": {"disabled": [{"name": "NodeResourcesBalancedAllocation"}]},
    },
    "pluginConfig": [
        {
            "name": "NodeResourcesFit",
            "args": {
                "scoringStrategy": {
                    "type": "MostAllocated",
                    "resources": [{"name": "cpu", "weight": 1}],
                }
            },
        }
    ],
    "backoff": {"initialSeconds": 0.5, "maxSeconds": 5},
}


def test_sample_objects_fit_the_schema() -> None:
    from kubesched.profile_status import reconcile

    _, status = reconcile(BINPACK, 1, {}, None)
    assert conforms(sample(BINPACK, status), SCHEMA) == []
    assert conforms(sample({}), SCHEMA) == []


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ({"percentageOfNodesToScore": 101}, ".spec.percentageOfNodesToScore: out of range"),
        ({"plugins": {"filters": {}}}, ".spec.plugins.filters: unknown field"),
        ({"plugins": {"score": {"enabled": [{"weight": 1}]}}}, "name: required"),
        ({"schedulerName": "Not_A_Name"}, ".spec.schedulerName: does not match pattern"),
        ({"pluginConfig": [{"name": "x", "args": []}]}, "args: not an object"),
    ],
    ids=["percentage", "typo", "no-name", "scheduler-name", "args-not-object"],
)
def test_structurally_invalid_samples_are_refused(spec: dict[str, Any], error: str) -> None:
    errs = conforms(sample(spec), SCHEMA)
    assert any(error in e for e in errs), errs
