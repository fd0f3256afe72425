"""Scenario files: every error names file, document and field; defaulting as the API server."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from kubesched.simulator.scenario import (
    SUPPORTED_KINDS,
    ScenarioError,
    load_scenarios,
)

NODE = """\
apiVersion: v1
kind: Node
metadata: {name: node-1}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
"""
POD = """\
apiVersion: v1
kind: Pod
metadata: {name: web-1}
spec:
  containers: [{name: c, image: nginx, resources: {requests: {cpu: 500m}}}]
"""
HIGH = """\
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
"""
NOW = datetime(2025, 1, 1, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Files are named relative to the working directory, so messages read "scenario.yaml".
    monkeypatch.chdir(tmp_path)


def write(name: str, *docs: str) -> str:
    Path(name).write_text("---\n".join(docs))
    return name


def load(*docs: str) -> list[dict[str, Any]]:
    return load_scenarios([write("scenario.yaml", *docs)], now=NOW)


def by_name(objs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(o for o in objs if o["metadata"]["name"] == name)


ERRORS = [
    pytest.param(
        [NODE, "kind: Pod\n  bad: x\n"],
        "scenario.yaml document 1: invalid YAML at line 7, column 6: "
        "mapping values are not allowed here",
        id="unparsable-yaml-with-line",
    ),
    pytest.param(
        ["- a\n- b\n"],
        "scenario.yaml document 0: expected a Kubernetes object (a mapping), got list",
        id="not-a-mapping",
    ),
    pytest.param(
        [NODE, "kind: Pod\nmetadata: {name: p}\n"],
        "scenario.yaml document 1: apiVersion: required",
        id="missing-apiVersion",
    ),
    pytest.param(
        ["apiVersion: v1\nmetadata: {name: p}\n"],
        "scenario.yaml document 0: kind: required",
        id="missing-kind",
    ),
    pytest.param(
        ["apiVersion: v1\nkind: Node\nmetadata: {labels: {a: b}}\n"],
        "scenario.yaml document 0 (Node): metadata.name: required",
        id="missing-metadata-name",
    ),
    pytest.param(
        ["apiVersion: v1\nkind: Node\n"],
        "scenario.yaml document 0 (Node): metadata.name: required",
        id="missing-metadata",
    ),
    pytest.param(
        [NODE, NODE.replace("node-1", "node-2"), POD.replace("500m", "lots")],
        "scenario.yaml document 2 (Pod default/web-1): "
        "spec.containers[0].resources.requests.cpu: quantities must match the regular "
        "expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': 'lots'",
        id="invalid-pod-quantity",
    ),
    pytest.param(
        [NODE.replace("8Gi", "8 GB")],
        "scenario.yaml document 0 (Node node-1): status.allocatable.memory: quantities must "
        "match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': '8 GB'",
        id="invalid-node-quantity",
    ),
    pytest.param(
        ["apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: web}\n"],
        "scenario.yaml document 0 (CronJob web): kind: unsupported kind 'CronJob' "
        "(supported: Namespace, Node, Pod, PriorityClass, PodDisruptionBudget, Service, "
        "ReplicationController, ReplicaSet, StatefulSet, Deployment, Job, DaemonSet, "
        "PersistentVolumeClaim, PersistentVolume, StorageClass, CSINode, CSIDriver, "
        "CSIStorageCapacity, DeviceClass, ResourceSlice, ResourceClaim, ResourceClaimTemplate, DeviceTaintRule, "
        "LimitRange, RuntimeClass, SchedulingProfile, "
        "PodGroup, Workload)",
        id="unknown-kind",
    ),
    pytest.param(
        [
            "apiVersion: kubesched.dev/v1alpha1\nkind: PodGroup\n"
            "metadata: {name: train}\nspec: {minMember: 0}\n"
        ],
        "scenario.yaml document 0 (PodGroup default/train): spec.minMember: "
        "Input should be greater than or equal to 1",
        id="invalid-pod-group",
    ),
    pytest.param(
        [
            "apiVersion: kubesched.dev/v1alpha1\nkind: SchedulingProfile\nmetadata: {name: p}\n"
            "spec: {pluginConfig: [{name: NodeResourcesFit, args: {scoringStrategy: {type: X}}}]}\n"
        ],
        "scenario.yaml document 0 (SchedulingProfile p): spec.pluginConfig[0].args."
        "scoringStrategy.type: Input should be 'LeastAllocated', 'MostAllocated' or "
        "'RequestedToCapacityRatio'",
        id="invalid-scheduling-profile",
    ),
    pytest.param(
        [
            "apiVersion: kubesched.dev/v1alpha1\nkind: SchedulingProfile\nmetadata: {name: a}\n",
            "apiVersion: kubesched.dev/v1alpha1\nkind: SchedulingProfile\nmetadata: {name: b}\n"
            "spec: {schedulerName: kubesched}\n",
        ],
        "scenario.yaml document 1 (SchedulingProfile b): spec.schedulerName: 'kubesched' is "
        "already served by SchedulingProfile 'a' (scenario.yaml document 0) "
        "(SchedulerNameConflict)",
        id="scheduler-name-conflict",
    ),
    pytest.param(
        [HIGH.replace("scheduling.k8s.io/v1", "v1")],
        "scenario.yaml document 0 (PriorityClass high): apiVersion: PriorityClass is served "
        "as scheduling.k8s.io/v1, got 'v1'",
        id="wrong-apiVersion",
    ),
    pytest.param(
        [NODE, POD, POD],
        "scenario.yaml document 2 (Pod default/web-1): metadata.name: duplicate Pod "
        "default/web-1 (first defined in scenario.yaml document 1)",
        id="duplicate-object",
    ),
    pytest.param(
        [NODE, POD.replace("spec:\n", "spec:\n  priorityClassName: gold\n")],
        "scenario.yaml document 1 (Pod default/web-1): spec.priorityClassName: "
        "no PriorityClass named 'gold'",
        id="missing-priority-class",
    ),
    pytest.param(
        [
            HIGH + "globalDefault: true\n",
            HIGH.replace("high", "low").replace("1000", "1") + "globalDefault: true\n",
        ],
        "scenario.yaml document 1 (PriorityClass low): globalDefault: PriorityClass 'high' "
        "is already the global default; only one may be",
        id="two-global-defaults",
    ),
    pytest.param(
        [HIGH.replace("value: 1000\n", "")],
        "scenario.yaml document 0 (PriorityClass high): value: required, an integer (got None)",
        id="priority-class-without-value",
    ),
    pytest.param(
        [HIGH.replace("1000", "2000000000")],
        "scenario.yaml document 0 (PriorityClass high): value: at most 1000000000 for "
        "user-defined classes, got 2000000000",
        id="priority-class-too-high",
    ),
    pytest.param(
        [HIGH, POD.replace("spec:\n", "spec:\n  priorityClassName: high\n  priority: 7\n")],
        "scenario.yaml document 1 (Pod default/web-1): spec.priority: 7 contradicts "
        "PriorityClass 'high' (value 1000); leave spec.priority out",
        id="priority-contradicts-class",
    ),
    pytest.param(
        [POD.replace("spec:\n", "spec:\n  nodeName: node-9\n")],
        "scenario.yaml document 0 (Pod default/web-1): spec.nodeName: no Node named 'node-9' "
        "in the scenario",
        id="bound-to-missing-node",
    ),
    pytest.param(
        [POD.replace("web-1", "Web_1")],
        "scenario.yaml document 0 (Pod default/Web_1): metadata.name: invalid name 'Web_1': a "
        "lowercase RFC 1123 subdomain (a-z, 0-9, '-', '.'; starting and ending with a letter "
        "or digit)",
        id="invalid-name",
    ),
    pytest.param(
        [NODE + "spec: {taints: [{key: gpu, effect: Sometimes}]}\n"],
        "scenario.yaml document 0 (Node node-1): spec.taints[0].effect: must be one of "
        "NoSchedule, PreferNoSchedule, NoExecute",
        id="invalid-taint-effect",
    ),
    pytest.param(
        ["apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: team}\nspec: {}\n"],
        "scenario.yaml document 0 (Pod team/p): spec.containers: required (at least one container)",
        id="pod-without-containers",
    ),
    pytest.param(
        [POD.replace("image: nginx, ", "")],
        "scenario.yaml document 0 (Pod default/web-1): spec.containers[0].image: required",
        id="container-without-image",
    ),
    pytest.param(
        [POD.replace("spec:\n", "spec:\n  resourceClaims: [{name: gpu}]\n")],
        "scenario.yaml document 0 (Pod default/web-1): spec.resourceClaims[0]: Invalid value: "
        "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`",
        id="dra-claim-without-source",
    ),
    pytest.param(
        [
            "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: gpu}\n"
            "spec: {selectors: [{cel: {expression: 'device.driver =='}}]}\n"
        ],
        "scenario.yaml document 0 (DeviceClass gpu): spec.selectors[0].cel.expression: "
        "compilation failed: ERROR: <input>:1:17: Syntax error: mismatched input '<EOF>' "
        "expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, "
        "NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n | device.driver ==\n"
        " | ................^",
        id="dra-selector-does-not-compile",
    ),
    pytest.param(
        [
            "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: s}\n"
            "spec: {driver: d, nodeName: n, pool: {name: n, generation: 1, "
            "resourceSliceCount: 1}, devices: [{name: gpu-0}, {name: gpu-0}]}\n"
        ],
        'scenario.yaml document 0 (ResourceSlice s): spec.devices[1].name: Duplicate value: "gpu-0"',
        id="dra-duplicate-device",
    ),
    pytest.param(
        [
            "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web}\n"
            "spec: {minAvailable: 1, maxUnavailable: 1}\n"
        ],
        "scenario.yaml document 0 (PodDisruptionBudget default/web): spec: minAvailable and "
        "maxUnavailable cannot both be set",
        id="pdb-min-and-max",
    ),
    pytest.param(
        [
            "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web}\n"
            "spec: {minAvailable: half}\n"
        ],
        "scenario.yaml document 0 (PodDisruptionBudget default/web): spec.minAvailable: must "
        "be a non-negative integer or a percentage, got 'half'",
        id="pdb-bad-min-available",
    ),
    pytest.param(
        [
            "apiVersion: v1\nkind: List\nitems:\n"
            "- {apiVersion: v1, kind: Node, metadata: {name: n}}\n"
            "- {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: []}}\n"
        ],
        "scenario.yaml document 0 items[1] (Pod default/p): spec.containers: required (at "
        "least one container)",
        id="error-inside-a-list",
    ),
    pytest.param(
        [
            "apiVersion: scheduling.k8s.io/v1beta1\nkind: Workload\nmetadata: {name: job}\n"
            "spec: {podGroupTemplates: [{name: w, schedulingPolicy: {}}]}\n"
        ],
        "scenario.yaml document 0 (Workload default/job): spec.podGroupTemplates[0]."
        "schedulingPolicy: exactly one of basic or gang must be set",
        id="workload-template-without-policy",
    ),
    pytest.param(
        [
            "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {name: g}\n"
            "spec: {schedulingPolicy: {gang: {minCount: 0}}}\n"
        ],
        "scenario.yaml document 0 (PodGroup default/g): spec.schedulingPolicy.gang.minCount: "
        "Input should be greater than or equal to 1",
        id="upstream-podgroup-min-count",
    ),
    pytest.param(
        [
            "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: g}\n"
            "spec: {minMember: 2, minResources: {cpu: lots}}\n"
        ],
        "scenario.yaml document 0 (PodGroup default/g): spec.minResources: cpu: not a "
        "quantity: 'lots'",
        id="scheduler-plugins-podgroup-quantity",
    ),
    pytest.param(
        [
            "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: g}\n",
            "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: g}\n",
        ],
        "scenario.yaml document 1 (PodGroup default/g): metadata.name: duplicate PodGroup "
        "default/g (first defined in scenario.yaml document 0)",
        id="duplicate-podgroup-same-api",
    ),
    pytest.param(
        ["apiVersion: v1\nkind: Pod\nmetadata: {name: q}\nspec: [1, 2]\n"],
        "scenario.yaml document 0 (Pod default/q): spec: expected an object, got list",
        id="pod-spec-a-list",
    ),
]


def test_podgroups_of_the_same_name_in_different_apis_are_different_objects() -> None:
    docs = [
        f"apiVersion: {api}\nkind: PodGroup\nmetadata: {{name: g}}\n"
        for api in ("kubesched.dev/v1alpha1", "scheduling.x-k8s.io/v1alpha1")
    ]
    docs.append(
        "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {name: g}\n"
        "spec: {schedulingPolicy: {basic: {}}}\n"
    )
    objs = load(*docs)
    assert len({o["metadata"]["uid"] for o in objs}) == 3


@pytest.mark.parametrize(("docs", "message"), ERRORS)
def test_bad_input_names_file_document_and_field(docs: list[str], message: str) -> None:
    with pytest.raises(ScenarioError) as e:
        load(*docs)
    assert str(e.value) == message


def test_empty_documents_count_and_unclosed_brackets_point_at_their_start() -> None:
    text = "# header\n---\n---\n# only a comment\n---\n" + NODE + "spec: {unschedulable: true\n"
    Path("scenario.yaml").write_text(text)
    with pytest.raises(ScenarioError) as e:
        load_scenarios(["scenario.yaml"])
    assert str(e.value) == (
        "scenario.yaml document 2: invalid YAML at line 11, column 1: expected ',' or '}', "
        "but got '<stream end>' (while parsing a flow mapping that starts at line 10, column 7)"
    )


def test_duplicates_are_found_across_files() -> None:
    a = write("a.yaml", NODE)
    b = write("b.yaml", POD.replace("web-1", "other"), NODE)
    with pytest.raises(ScenarioError) as e:
        load_scenarios([a, b])
    assert str(e.value) == (
        "b.yaml document 1 (Node node-1): metadata.name: duplicate Node node-1 "
        "(first defined in a.yaml document 0)"
    )


def test_missing_file_is_named() -> None:
    with pytest.raises(ScenarioError) as e:
        load_scenarios(["nope.yaml"])
    assert str(e.value) == "nope.yaml: cannot read: No such file or directory"


def test_one_bad_file_fails_the_whole_load() -> None:
    good = write("good.yaml", NODE, POD)
    bad = write("bad.yaml", "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n")
    with pytest.raises(ScenarioError, match=r"^bad\.yaml document 0 \(Secret s\): kind: "):
        load_scenarios([good, bad])


def test_supported_kinds_table() -> None:
    assert {k: v.api_versions for k, v in SUPPORTED_KINDS.items()} == {
        "Namespace": ("v1",),
        "Node": ("v1",),
        "Pod": ("v1",),
        "PriorityClass": ("scheduling.k8s.io/v1",),
        "PodDisruptionBudget": ("policy/v1",),
        "Service": ("v1",),
        "ReplicationController": ("v1",),
        "ReplicaSet": ("apps/v1",),
        "StatefulSet": ("apps/v1",),
        "Deployment": ("apps/v1",),
        "Job": ("batch/v1",),
        "DaemonSet": ("apps/v1",),
        "PersistentVolumeClaim": ("v1",),
        "PersistentVolume": ("v1",),
        "StorageClass": ("storage.k8s.io/v1",),
        "CSINode": ("storage.k8s.io/v1",),
        "CSIDriver": ("storage.k8s.io/v1",),
        "CSIStorageCapacity": ("storage.k8s.io/v1",),
        "DeviceClass": ("resource.k8s.io/v1",),
        "ResourceSlice": ("resource.k8s.io/v1",),
        "ResourceClaim": ("resource.k8s.io/v1",),
        "ResourceClaimTemplate": ("resource.k8s.io/v1",),
        "DeviceTaintRule": ("resource.k8s.io/v1",),
        "LimitRange": ("v1",),
        "RuntimeClass": ("node.k8s.io/v1",),
        "SchedulingProfile": ("kubesched.dev/v1alpha1",),
        "PodGroup": (
            "kubesched.dev/v1alpha1",
            "scheduling.k8s.io/v1beta1",
            "scheduling.x-k8s.io/v1alpha1",
        ),
        "Workload": ("scheduling.k8s.io/v1beta1",),
    }


# --- defaulting --------------------------------------------------------------------------


def test_objects_come_back_in_document_order_with_lists_expanded_and_empties_skipped() -> None:
    a = write(
        "a.yaml",
        "",
        NODE,
        "apiVersion: v1\nkind: List\nitems:\n"
        "- {apiVersion: v1, kind: Namespace, metadata: {name: team}}\n"
        "- {apiVersion: v1, kind: Node, metadata: {name: node-2}}\n",
    )
    b = write("b.yaml", POD, "\n")
    objs = load_scenarios([a, b], now=NOW)
    assert [(o["kind"], o["metadata"]["name"]) for o in objs] == [
        ("Node", "node-1"),
        ("Namespace", "team"),
        ("Node", "node-2"),
        ("Pod", "web-1"),
    ]


def test_metadata_is_defaulted_like_the_api_server() -> None:
    objs = load(
        NODE,
        POD,
        POD.replace("web-1", "web-2").replace("{name: web-2}", "{name: web-2, uid: mine}"),
    )
    node, pod1, pod2 = objs
    assert "namespace" not in node["metadata"]
    assert pod1["metadata"]["namespace"] == "default"
    assert [o["metadata"]["resourceVersion"] for o in objs] == ["1", "2", "3"]
    assert [o["metadata"]["creationTimestamp"] for o in objs] == [
        "2024-12-31T23:59:57Z",
        "2024-12-31T23:59:58Z",
        "2024-12-31T23:59:59Z",
    ]
    assert pod2["metadata"]["uid"] == "mine"
    assert len(pod1["metadata"]["uid"]) == 36
    # Deterministic: the same scenario gets the same uids.
    assert load(NODE, POD)[1]["metadata"]["uid"] == pod1["metadata"]["uid"]


def test_cluster_scoped_objects_lose_a_namespace() -> None:
    (node,) = load(NODE.replace("{name: node-1}", "{name: node-1, namespace: x}"))
    assert "namespace" not in node["metadata"]


def test_generate_name_gets_a_deterministic_suffix() -> None:
    pod = POD.replace("{name: web-1}", "{generateName: web-}")
    objs = load(pod, pod)
    assert [o["metadata"]["name"] for o in objs] == ["web-00000", "web-00001"]


@pytest.mark.parametrize(
    ("scheduler_name", "expected"),
    [
        pytest.param(None, "kubesched", id="missing"),
        pytest.param("default-scheduler", "kubesched", id="default-scheduler"),
        pytest.param("kubesched", "kubesched", id="kubesched"),
        pytest.param("gang", "gang", id="another-profile"),
    ],
)
def test_scheduler_name(scheduler_name: str | None, expected: str) -> None:
    pod = (
        POD
        if scheduler_name is None
        else POD.replace("spec:\n", f"spec:\n  schedulerName: {scheduler_name}\n")
    )
    assert load(pod)[0]["spec"]["schedulerName"] == expected


def test_pod_phase_and_node_defaults() -> None:
    bound = POD.replace("web-1", "db-0").replace("spec:\n", "spec:\n  nodeName: node-1\n")
    node = NODE.replace("allocatable", "capacity")
    objs = load(node, POD, bound)
    assert objs[0]["status"]["allocatable"] == {"cpu": "4", "memory": "8Gi", "pods": "110"}
    assert objs[0]["metadata"]["labels"] == {"kubernetes.io/hostname": "node-1"}
    assert objs[1]["status"]["phase"] == "Pending"
    assert objs[2]["status"]["phase"] == "Running"


def test_yaml_values_become_json_data() -> None:
    pod = POD.replace("{name: web-1}", "{name: web-1, annotations: {since: 2024-05-01}}")
    (obj,) = load(pod)
    assert obj["metadata"]["annotations"] == {"since": "2024-05-01"}
    orjson.dumps(obj)
