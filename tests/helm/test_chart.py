"""helm/kubesched rendered by a real helm: lint, names, labels, security, RBAC, options.

What a user installing the chart relies on: two releases never collide, the pods run
restricted, optional objects appear only when they can work, and bad values are refused
before anything is installed (the ClusterRole: test_chart_rbac.py).
"""

from __future__ import annotations

import filecmp
import importlib.metadata
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched import cli
from kubesched.framework.labels import parse_label_selector
from kubesched.operator import run as run_module
from kubesched.operator.settings import Settings
from tests.helm.chart import (
    CHART,
    JSON,
    REPO,
    Helm,
    HelmError,
    deployment_container,
    of_kind,
    one,
    scheduler_role,
)

STANDARD_LABELS = (
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/component",
    "app.kubernetes.io/part-of",
    "helm.sh/chart",
)

CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "SchedulingProfile"}

# -- lint and metadata ----------------------------------------------------------------------


def test_lint_is_clean(helm: Helm) -> None:
    out = helm("lint", "--strict", str(CHART))
    assert "0 chart(s) failed" in out
    assert "[WARNING]" not in out and "[ERROR]" not in out, out


def test_lint_is_clean_with_every_option_on(helm: Helm, tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(
        yaml.safe_dump(
            {
                "replicaCount": 3,
                "metrics": {"serviceMonitor": {"enabled": True}},
                "profiles": [{"name": "pack", "spec": {"percentageOfNodesToScore": 50}}],
            }
        )
    )
    out = helm("lint", "--strict", str(CHART), "-f", str(values))
    assert "[WARNING]" not in out and "[ERROR]" not in out, out


def test_chart_metadata() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2"
    assert chart["kubeVersion"] == ">=1.29.0-0"
    assert chart["appVersion"] == importlib.metadata.version("kubesched")


def test_an_older_cluster_is_refused(helm: Helm) -> None:
    with pytest.raises(HelmError, match="kubeVersion"):
        helm("template", "ks", str(CHART), "--kube-version", "1.28.5")


def test_chart_crds_are_the_repository_crds() -> None:
    top, chart = REPO / "crds", CHART / "crds"
    names = sorted(p.name for p in top.glob("*.yaml"))
    assert names and names == sorted(p.name for p in chart.glob("*.yaml"))
    _match, mismatch, errors = filecmp.cmpfiles(top, chart, names, shallow=False)
    assert not mismatch and not errors, (
        f"helm/kubesched/crds differ from crds/: {mismatch + errors}; copy crds/*.yaml over"
    )


def test_every_value_is_documented() -> None:
    """Each value (a key with a value on its line) has a comment above it, or sits in a
    block whose comment (``# -- ...``) documents it as one value (the securityContext)."""
    undocumented = []
    stack: list[tuple[int, bool]] = []  # (indent, documented with "# --") of parent keys
    comments: list[str] = []  # the comment block just above
    for line in (CHART / "values.yaml").read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            comments.append(stripped)
            continue
        key = re.match(r"^(\s*)(?:- )?([A-Za-z][\w.-]*):(.*)$", line)
        if key:
            indent, name, rest = len(key.group(1)), key.group(2), key.group(3).strip()
            while stack and stack[-1][0] >= indent:
                stack.pop()
            doc = bool(comments) and comments[0].startswith("# --")
            if rest and not comments and not any(d for _, d in stack):
                undocumented.append(name)
            stack.append((indent, doc))
        comments = []
    assert not undocumented, f"values without a comment: {undocumented}"


# -- names and labels -----------------------------------------------------------------------


def test_every_object_has_the_standard_labels(helm: Helm) -> None:
    objects = helm.template(
        values={"replicaCount": 2, "profiles": [{"name": "p", "spec": {}}]},
        api_versions=["monitoring.coreos.com/v1"],
    )
    assert {o["kind"] for o in objects} >= {
        "Deployment",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Service",
        "PodDisruptionBudget",
        "SchedulingProfile",
    }
    for obj in objects:
        labels = obj["metadata"].get("labels") or {}
        missing = [k for k in STANDARD_LABELS if k not in labels]
        assert not missing, f"{obj['kind']} {obj['metadata']['name']} lacks {missing}"
        assert labels["app.kubernetes.io/instance"] == "ks"
        assert labels["app.kubernetes.io/version"] == importlib.metadata.version("kubesched")


def test_selectors_match_the_pods_and_stay_immutable(helm: Helm) -> None:
    objects = helm.template(values={"replicaCount": 2})
    deploy = one(objects, "Deployment")
    selector = deploy["spec"]["selector"]["matchLabels"]
    # a Deployment's selector is immutable: nothing that changes between versions
    assert selector == {"app.kubernetes.io/name": "kubesched", "app.kubernetes.io/instance": "ks"}
    pod_labels = deploy["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= pod_labels.items()
    assert one(objects, "Service")["spec"]["selector"] == selector
    assert one(objects, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"] == selector


def _names(objects: list[JSON]) -> dict[tuple[str, str | None], str]:
    return {
        (o["kind"], o["metadata"].get("namespace")): o["metadata"]["name"]
        for o in objects
        if o["kind"] != "SchedulingProfile"
    }


def lease_name(objects: list[JSON]) -> str:
    args = deployment_container(objects)["args"]
    (name,) = [a.split("=", 1)[1] for a in args if a.startswith("--lease-name=")]
    return str(name)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (("ks", "team-a"), ("ks", "team-b")),  # same release name, two namespaces
        (("one", "sched"), ("two", "sched")),  # two releases, one namespace
    ],
    ids=["same-name-two-namespaces", "two-names-one-namespace"],
)
def test_two_releases_never_collide(helm: Helm, a: tuple[str, str], b: tuple[str, str]) -> None:
    values = {"replicaCount": 2, "profiles": [{"name": "p", "spec": {}}]}
    first = helm.template(a[0], a[1], values)
    second = helm.template(b[0], b[1], values)
    for obj in first + second:
        if obj["kind"] in CLUSTER_SCOPED:
            assert "namespace" not in obj["metadata"]
        else:
            assert obj["metadata"]["namespace"] in (a[1], b[1])
    clash = set(_names(first).items()) & set(_names(second).items())
    assert not clash, f"both releases create {clash}"
    profiles = {o["metadata"]["name"] for o in of_kind(first + second, "SchedulingProfile")}
    assert len(profiles) == 2
    # cluster-scoped names and the Lease carry the release name and its namespace
    for (release, namespace), objects in ((a, first), (b, second)):
        for name in [lease_name(objects)] + [
            o["metadata"]["name"] for o in objects if o["kind"] in CLUSTER_SCOPED
        ]:
            assert release in name and namespace in name, name


def test_long_names_are_cut_without_colliding(helm: Helm) -> None:
    release, ns = "r" * 50, "n" * 60
    first = helm.template(release, ns + "1", {"replicaCount": 2})
    second = helm.template(release, ns + "2", {"replicaCount": 2})
    for objects in (first, second):
        for obj in objects:
            assert len(obj["metadata"]["name"]) <= 63, obj["metadata"]["name"]
    assert scheduler_role(first)["metadata"]["name"] != scheduler_role(second)["metadata"]["name"]
    for kind in ("ClusterRole", "ClusterRoleBinding"):
        names = [o["metadata"]["name"] for o in of_kind(first + second, kind)]
        assert len(set(names)) == len(names), names
    assert lease_name(first) != lease_name(second)


# -- the pod ----------------------------------------------------------------------------------


def test_the_pod_runs_restricted(helm: Helm) -> None:
    objects = helm.template()
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    c = deployment_container(objects)
    sc = c["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert "privileged" not in sc
    # the only writable place is an emptyDir on /tmp
    (mount,) = c["volumeMounts"]
    assert mount["mountPath"] == "/tmp"
    (volume,) = pod["volumes"]
    assert volume["name"] == mount["name"] and "emptyDir" in volume
    assert pod["serviceAccountName"] == one(objects, "ServiceAccount")["metadata"]["name"]


def test_probes_use_the_operator_endpoints(helm: Helm) -> None:
    c = deployment_container(helm.template(values={"port": 12345}))
    (port,) = c["ports"]
    assert port == {"name": "http-metrics", "containerPort": 12345, "protocol": "TCP"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http-metrics"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http-metrics"}
    assert "--port=12345" in c["args"]


def test_resources_have_real_requests(helm: Helm) -> None:
    requests = deployment_container(helm.template())["resources"]["requests"]
    assert set(requests) == {"cpu", "memory"}
    assert all(str(v) not in ("0", "") for v in requests.values())


def test_namespace_comes_from_the_downward_api(helm: Helm) -> None:
    env = {e["name"]: e for e in deployment_container(helm.template())["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert env["KUBESCHED_IDENTITY"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}


def _settings_from(
    container: JSON, namespace: str, pod: str, monkeypatch: pytest.MonkeyPatch
) -> Settings:
    """What ``kubesched run`` would run with, given the container's args and env (the
    image's ENTRYPOINT is ``kubesched run``)."""
    for e in container["env"]:
        if "value" in e:
            monkeypatch.setenv(e["name"], e["value"])
        else:
            field = e["valueFrom"]["fieldRef"]["fieldPath"]
            monkeypatch.setenv(e["name"], {"metadata.namespace": namespace}.get(field, pod))
    captured: list[Settings] = []

    async def fake_run(*, settings: Settings, **_: Any) -> None:
        captured.append(settings)

    monkeypatch.setattr(run_module, "run", fake_run)
    assert cli.main(["run", *container["args"]]) == 0
    (settings,) = captured
    return settings


def test_one_replica_runs_without_leader_election(
    helm: Helm, monkeypatch: pytest.MonkeyPatch
) -> None:
    objects = helm.template("solo", "sched", {"schedulerName": "solo-sched"})
    deploy = one(objects, "Deployment")
    assert deploy["spec"]["replicas"] == 1
    assert deploy["spec"]["strategy"] == {"type": "Recreate"}  # never two at once
    assert not of_kind(objects, "Role") and not of_kind(objects, "PodDisruptionBudget")
    settings = _settings_from(deployment_container(objects), "sched", "solo-0", monkeypatch)
    assert settings.scheduler_names == ["solo-sched"]
    assert settings.leader_elect is False


def test_replicas_elect_a_leader_on_a_release_scoped_lease(
    helm: Helm, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = {
        "replicaCount": 2,
        "schedulerName": "batch",
        "leaderElection": {
            "enabled": None,
            "leaseDurationSeconds": 20,
            "renewDeadlineSeconds": 12,
            "retryPeriodSeconds": 3,
        },
        "client": {"qps": 80, "burst": 160},
    }
    objects = helm.template("ks", "sched", values)
    settings = _settings_from(deployment_container(objects), "sched", "ks-abc", monkeypatch)
    assert settings.scheduler_names == ["batch"]
    assert settings.leader_elect is True
    assert settings.namespace == "sched"
    assert settings.lease_name == "ks-kubesched-sched" == lease_name(objects)
    assert (settings.lease_duration, settings.renew_deadline, settings.retry_period) == (
        20,
        12,
        3,
    )
    assert (settings.client_qps, settings.client_burst) == (80, 160)
    assert settings.identity == "ks-abc"
    assert settings.port == 10251
    role = one(objects, "Role")
    assert role["metadata"]["namespace"] == "sched"
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["ks-kubesched-sched"],
            "verbs": ["get", "update"],
        },
    ]
    strategy = one(objects, "Deployment")["spec"]["strategy"]
    assert strategy["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}


def test_two_replicas_without_leader_election_are_refused(helm: Helm) -> None:
    with pytest.raises(HelmError, match="needs leader election"):
        helm.template(values={"replicaCount": 2, "leaderElection": {"enabled": False}})


@pytest.mark.parametrize(("replicas", "pdbs"), [(1, 0), (2, 1), (3, 1)])
def test_pod_disruption_budget_only_with_replicas(helm: Helm, replicas: int, pdbs: int) -> None:
    objects = helm.template(values={"replicaCount": replicas})
    found = of_kind(objects, "PodDisruptionBudget")
    assert len(found) == pdbs
    if found:
        assert found[0]["spec"]["maxUnavailable"] == 1


@pytest.mark.parametrize(
    ("enabled", "api", "expected"),
    [(False, False, 0), (True, False, 0), (False, True, 0), (True, True, 1)],
    ids=["off", "on-without-the-api", "api-but-off", "on-with-the-api"],
)
def test_service_monitor_only_when_enabled_and_served(
    helm: Helm, enabled: bool, api: bool, expected: int
) -> None:
    objects = helm.template(
        values={"metrics": {"serviceMonitor": {"enabled": enabled, "interval": "15s"}}},
        api_versions=["monitoring.coreos.com/v1"] if api else [],
    )
    monitors = of_kind(objects, "ServiceMonitor")
    assert len(monitors) == expected
    if monitors:
        (endpoint,) = monitors[0]["spec"]["endpoints"]
        assert endpoint == {
            "port": "http-metrics",
            "path": "/metrics",
            "interval": "15s",
            "scheme": "http",
            # the scheduler refuses unauthenticated scrapes: Prometheus' own token
            "bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
        }
        service = one(objects, "Service")
        assert service["spec"]["ports"][0]["name"] == "http-metrics"


def test_profiles_from_values(helm: Helm) -> None:
    from kubesched.api.profile import ProfileSpec

    objects = helm.template(
        "ks",
        "sched",
        {
            "schedulerName": "mine",
            "profiles": [
                {"name": "pack", "spec": {"percentageOfNodesToScore": 40}},
                {"name": "batch", "spec": {"schedulerName": "mine-batch"}},
            ],
        },
    )
    profiles = {p["metadata"]["name"]: p for p in of_kind(objects, "SchedulingProfile")}
    assert set(profiles) == {"ks-kubesched-sched-pack", "ks-kubesched-sched-batch"}
    pack = profiles["ks-kubesched-sched-pack"]
    assert pack["apiVersion"] == "kubesched.dev/v1alpha1"
    assert pack["spec"] == {"schedulerName": "mine", "percentageOfNodesToScore": 40}
    assert profiles["ks-kubesched-sched-batch"]["spec"]["schedulerName"] == "mine-batch"
    for p in profiles.values():
        ProfileSpec.model_validate(p["spec"])  # what the operator accepts


def _selected(objects: list[JSON], selector: str) -> set[str]:
    sel = parse_label_selector(selector)
    return {
        p["metadata"]["name"]
        for p in of_kind(objects, "SchedulingProfile")
        if sel.matches(p["metadata"]["labels"])
    }


def test_a_release_applies_its_own_profiles_only(
    helm: Helm, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SchedulingProfiles are cluster-scoped: by default a release selects those labelled
    for it (its own ``profiles`` are), and none of another release's, even one of the
    same name in another namespace."""
    values = {"profiles": [{"name": "p", "spec": {}}]}
    first = helm.template("ks", "team-a", values)
    second = helm.template("ks", "team-b", values)
    settings = _settings_from(deployment_container(first), "team-a", "ks-0", monkeypatch)
    assert settings.profile_selector == "kubesched.dev/release=ks-kubesched-team-a"
    (own,) = of_kind(first, "SchedulingProfile")
    assert own["metadata"]["labels"]["kubesched.dev/release"] == "ks-kubesched-team-a"
    assert _selected(first + second, settings.profile_selector) == {own["metadata"]["name"]}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [("", ""), ("env in (prod, staging),!canary", "env in (prod, staging),!canary")],
    ids=["every-profile", "custom"],
)
def test_the_profile_selector_value_reaches_the_operator(
    helm: Helm, monkeypatch: pytest.MonkeyPatch, selector: str, expected: str
) -> None:
    objects = helm.template("ks", "sched", {"profileSelector": selector})
    settings = _settings_from(deployment_container(objects), "sched", "ks-0", monkeypatch)
    assert settings.profile_selector == expected


# -- values.schema.json ------------------------------------------------------------------------

BAD_VALUES: dict[str, Mapping[str, Any]] = {
    "unknown-key": {"replicas": 2},
    "unknown-nested-key": {"leaderElection": {"leaseDuration": 15}},
    "scheduler-name-not-dns": {"schedulerName": "Not_A_Name"},
    "scheduler-name-kube-schedulers": {"schedulerName": "default-scheduler"},
    "zero-replicas": {"replicaCount": 0},
    "replicas-as-string": {"replicaCount": "2"},
    "leader-election-not-bool": {"leaderElection": {"enabled": "yes"}},
    "pull-policy": {"image": {"pullPolicy": "Sometimes"}},
    "log-level": {"logLevel": "verbose"},
    "privilege-escalation": {"securityContext": {"allowPrivilegeEscalation": True}},
    "root": {"podSecurityContext": {"runAsNonRoot": False}},
    "added-capability": {"securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}},
    "privileged": {"securityContext": {"privileged": True}},
    "profile-without-name": {"profiles": [{"spec": {}}]},
    "profile-name-not-dns": {"profiles": [{"name": "Bin Packing"}]},
    "profile-selector-as-map": {"profileSelector": {"kubesched.dev/release": "a"}},
    "service-monitor-interval": {"metrics": {"serviceMonitor": {"interval": "30 seconds"}}},
    "port-out-of-range": {"port": 70000},
    "resource-quantity": {"resources": {"requests": {"cpu": "a lot"}}},
    "digest-not-sha256": {"image": {"digest": "latest"}},
    "extra-arg-not-a-flag": {"extraArgs": ["run"]},
    "extra-env-without-name": {"extraEnv": [{"value": "1"}]},
    "service-account-create-string": {"serviceAccount": {"create": "yes"}},
    "common-label-not-string": {"commonLabels": {"team": 7}},
    "revision-history-negative": {"revisionHistoryLimit": -1},
    "scrape-scheme": {"metrics": {"serviceMonitor": {"scheme": "ftp"}}},
    "scrape-timeout": {"metrics": {"serviceMonitor": {"scrapeTimeout": "soon"}}},
}


@pytest.mark.parametrize("values", BAD_VALUES.values(), ids=BAD_VALUES.keys())
def test_schema_rejects_bad_values(helm: Helm, values: Mapping[str, Any]) -> None:
    with pytest.raises(HelmError, match="values don't meet the specifications of the schema"):
        helm.template(values=values)


def test_schema_accepts_the_defaults_and_a_full_configuration(helm: Helm) -> None:
    helm.template(
        values={
            "schedulerName": "kubesched-gpu",
            "replicaCount": 2,
            "leaderElection": {"enabled": True},
            "image": {"repository": "registry.example/kubesched", "tag": "0.1.0"},
            "imagePullSecrets": [{"name": "regcred"}],
            "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": 2}},
            "podDisruptionBudget": {"maxUnavailable": "50%"},
            "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}],
            "priorityClassName": "system-cluster-critical",
            "metrics": {"serviceMonitor": {"enabled": True, "interval": "1m30s"}},
        }
    )
