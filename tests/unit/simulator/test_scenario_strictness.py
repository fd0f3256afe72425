"""Scenario files refuse what kube-apiserver refuses (selector operators, requests above
limits, containers as a mapping), and workload controllers create their pods."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubesched.simulator.scenario import ScenarioError, load_scenarios


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def load(*docs: str) -> list[dict[str, Any]]:
    Path("s.yaml").write_text("---\n".join(docs))
    return load_scenarios(["s.yaml"])


def pod(spec: str, name: str = "p") -> str:
    return f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n{spec}"


C = "  containers: [{name: c, image: app}]\n"

REFUSED = [
    pytest.param(
        pod(
            C + "  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: "
            "{nodeSelectorTerms: [{matchExpressions: [{key: zone, operator: Maybe, values: [a]}]}]}}}\n"
        ),
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
        "nodeSelectorTerms[0].matchExpressions[0].operator: must be one of In, NotIn, Exists, "
        "DoesNotExist, Gt, Lt, got 'Maybe'",
        id="node-affinity-operator",
    ),
    pytest.param(
        pod(
            C + "  affinity: {podAntiAffinity: {preferredDuringSchedulingIgnoredDuringExecution: "
            "[{weight: 1, podAffinityTerm: {topologyKey: zone, labelSelector: "
            "{matchExpressions: [{key: app, operator: Maybe}]}}}]}}\n"
        ),
        "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]."
        "podAffinityTerm.labelSelector.matchExpressions[0].operator: must be one of In, NotIn, "
        "Exists, DoesNotExist, got 'Maybe'",
        id="pod-affinity-operator",
    ),
    pytest.param(
        pod(
            C + "  topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, "
            "whenUnsatisfiable: DoNotSchedule, labelSelector: "
            "{matchExpressions: [{key: app, operator: Maybe, values: [a]}]}}]\n"
        ),
        "spec.topologySpreadConstraints[0].labelSelector.matchExpressions[0].operator: must be "
        "one of In, NotIn, Exists, DoesNotExist, got 'Maybe'",
        id="spread-operator",
    ),
    pytest.param(
        pod(
            "  containers: [{name: c, image: app, resources: "
            '{requests: {cpu: "2", memory: 1Gi}, limits: {cpu: "1"}}}]\n'
        ),
        "spec.containers[0].resources.requests.cpu: invalid value '2': must be less than or "
        "equal to cpu limit of 1",
        id="requests-above-limits",
    ),
    pytest.param(
        pod("  containers: {name: c, image: app}\n"),
        "spec.containers: must be a list of containers (each entry '- name: ...'), got a mapping",
        id="containers-as-a-mapping",
    ),
    pytest.param(
        pod(C + "  initContainers: {name: i, image: app}\n"),
        "spec.initContainers: must be a list of containers (each entry '- name: ...'), got a "
        "mapping",
        id="init-containers-as-a-mapping",
    ),
]


@pytest.mark.parametrize(("doc", "message"), REFUSED)
def test_refused_like_the_api_server(doc: str, message: str) -> None:
    with pytest.raises(ScenarioError) as e:
        load(doc)
    assert str(e.value) == f"s.yaml document 0 (Pod default/p): {message}"


def test_requests_equal_to_limits_are_fine() -> None:
    spec = '  containers: [{name: c, image: app, resources: {requests: {cpu: "1"}, limits: {cpu: 1000m}}}]\n'
    assert load(pod(spec))[0]["metadata"]["name"] == "p"


RS = """\
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: web, namespace: team}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: c, image: app}]
"""


def pods(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == "Pod"]


def test_a_replicaset_creates_its_replicas() -> None:
    objs = load(RS)
    rs = objs[0]
    created = pods(objs)
    assert len(created) == 3
    for p in created:
        assert p["metadata"]["name"].startswith("web-") and len(p["metadata"]["name"]) == 9
        assert p["metadata"]["namespace"] == "team"
        assert p["metadata"]["labels"] == {"app": "web"}
        [owner] = p["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
            "ReplicaSet",
            "web",
            rs["metadata"]["uid"],
            True,
        )
    assert [p["metadata"]["name"] for p in pods(load(RS))] == [
        p["metadata"]["name"] for p in created
    ]  # the same names every time


def test_a_deployment_creates_a_replicaset_and_its_pods() -> None:
    objs = load(RS.replace("ReplicaSet", "Deployment").replace("replicas: 3", "replicas: 2"))
    [rs] = [o for o in objs if o["kind"] == "ReplicaSet"]
    h = rs["metadata"]["labels"]["pod-template-hash"]
    assert rs["metadata"]["name"] == f"web-{h}"
    assert rs["spec"]["selector"]["matchLabels"] == {"app": "web", "pod-template-hash": h}
    created = pods(objs)
    assert len(created) == 2
    assert all(p["metadata"]["ownerReferences"][0]["name"] == f"web-{h}" for p in created)


def test_a_statefulset_creates_ordinal_pods_and_their_claims() -> None:
    ss = RS.replace("ReplicaSet", "StatefulSet").replace("replicas: 3", "replicas: 2") + (
        "  volumeClaimTemplates:\n"
        "  - metadata: {name: data}\n"
        "    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n"
    )
    objs = load(ss)
    assert [p["metadata"]["name"] for p in pods(objs)] == ["web-0", "web-1"]
    claims = [o for o in objs if o["kind"] == "PersistentVolumeClaim"]
    assert [c["metadata"]["name"] for c in claims] == ["data-web-0", "data-web-1"]
    assert pods(objs)[1]["spec"]["volumes"] == [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-1"}}
    ]
    assert pods(objs)[1]["metadata"]["labels"]["apps.kubernetes.io/pod-index"] == "1"


def test_a_job_runs_parallelism_pods_at_most_completions() -> None:
    job = (
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n"
        "  parallelism: 4\n  completions: 3\n"
        "  template: {spec: {restartPolicy: Never, containers: [{name: c, image: app}]}}\n"
    )
    created = pods(load(job))
    assert len(created) == 3
    assert all(p["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "j" for p in created)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            ("replicas: 3", "replicas: three"),
            "spec.replicas: must be a non-negative integer, got 'three'",
        ),
        (
            ("labels: {app: web}", "labels: {app: db}"),
            "spec.template.metadata.labels: must match spec.selector",
        ),
        (("      containers: [{name: c, image: app}]\n", "      containers: []\n"), None),
    ],
    ids=["replicas", "selector", "template-pod"],
)
def test_a_bad_controller_is_named(change: tuple[str, str], message: str | None) -> None:
    with pytest.raises(ScenarioError) as e:
        load(RS.replace(*change))
    if message is not None:
        assert str(e.value).startswith(f"s.yaml document 0 (ReplicaSet team/web): {message}")
    else:  # a created pod's problem: at the controller's document, naming the pod
        assert str(e.value).startswith(
            "s.yaml document 0, created by ReplicaSet team/web (Pod team/web-"
        )
        assert str(e.value).endswith("spec.containers: required (at least one container)")
