"""helm/kubesched: who may read the scheduler's endpoints and make PodGroups, and the
options a platform team expects of a chart (labels, digest, ServiceAccount, extra flags,
scrape settings); lint on the oldest helm 3 still in use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched import cli
from kubesched.operator import run as run_module
from kubesched.operator.settings import Settings
from tests.helm.chart import (
    AUTH_DELEGATOR,
    CHART,
    JSON,
    OLD_HELM_VERSION,
    Helm,
    find_old_helm,
    of_kind,
    one,
    scheduler_binding,
)

EVERY_OPTION: dict[str, Any] = {
    "replicaCount": 3,
    "commonLabels": {"team": "platform", "cost-centre": "42"},
    "rbac": {"debugReader": True},
    "metrics": {"serviceMonitor": {"enabled": True, "scrapeTimeout": "10s"}},
    "profiles": [{"name": "pack", "spec": {"percentageOfNodesToScore": 50}}],
    "image": {"digest": "sha256:" + "a" * 64},
    "extraArgs": ["--watch-engine=kopf"],
    "extraEnv": [{"name": "KUBESCHED_RESYNC_SECONDS", "value": "300"}],
}


def container(objects: list[JSON]) -> JSON:
    (c,) = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    return dict(c)


def role_named(objects: list[JSON], suffix: str) -> JSON:
    (role,) = [r for r in of_kind(objects, "ClusterRole") if r["metadata"]["name"].endswith(suffix)]
    return role


def settings_of(c: JSON, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """What ``kubesched run`` gets from the container's args and env (its ENTRYPOINT)."""
    for e in c["env"]:
        monkeypatch.setenv(e["name"], e.get("value", "ks-0"))
    captured: list[Settings] = []

    async def fake_run(*, settings: Settings, **_: Any) -> None:
        captured.append(settings)

    monkeypatch.setattr(run_module, "run", fake_run)
    assert cli.main(["run", *c["args"]]) == 0
    return captured[0]


# -- the endpoints --------------------------------------------------------------------------


def test_the_scheduler_delegates_its_endpoints_to_the_api_server(
    helm: Helm, monkeypatch: pytest.MonkeyPatch
) -> None:
    objects = helm.template("ks", "sched")
    settings = settings_of(container(objects), monkeypatch)
    assert settings.delegate_auth is True
    assert settings.listen_address == "0.0.0.0"  # the kubelet's probes reach /healthz
    (delegator,) = [
        b for b in of_kind(objects, "ClusterRoleBinding") if b["roleRef"]["name"] == AUTH_DELEGATOR
    ]
    assert delegator["roleRef"]["kind"] == "ClusterRole"
    assert delegator["subjects"] == scheduler_binding(objects)["subjects"]
    assert delegator["subjects"][0]["name"] == one(objects, "ServiceAccount")["metadata"]["name"]


def test_a_prometheus_can_be_granted_metrics_and_only_metrics(helm: Helm) -> None:
    objects = helm.template("ks", "sched")
    reader = role_named(objects, "-metrics-reader")
    assert reader["metadata"]["name"] == "ks-kubesched-sched-metrics-reader"
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    assert not [r for r in of_kind(objects, "ClusterRole") if "debug" in r["metadata"]["name"]]
    debug = role_named(helm.template(values={"rbac": {"debugReader": True}}), "-debug-reader")
    assert debug["rules"] == [
        {"nonResourceURLs": ["/debug/*", "/explain/*", "/ui", "/ui/*"], "verbs": ["get"]}
    ]
    off = helm.template(values={"rbac": {"metricsReader": False}})
    assert not [r for r in of_kind(off, "ClusterRole") if "reader" in r["metadata"]["name"]]


def test_namespace_users_get_podgroups_through_view_and_edit(helm: Helm) -> None:
    objects = helm.template("ks", "sched")
    view, edit = role_named(objects, "-podgroups-view"), role_named(objects, "-podgroups-edit")

    def aggregated_into(role: JSON) -> set[str]:
        prefix = "rbac.authorization.k8s.io/aggregate-to-"
        labels = role["metadata"]["labels"]
        return {k.removeprefix(prefix) for k, v in labels.items() if k.startswith(prefix)}

    assert aggregated_into(view) == {"view", "edit", "admin"}
    assert aggregated_into(edit) == {"edit", "admin"}  # never into view
    assert view["rules"] == [
        {
            "apiGroups": ["kubesched.dev"],
            "resources": ["podgroups", "podgroups/status"],
            "verbs": ["get", "list", "watch"],
        }
    ]
    (rule,) = edit["rules"]
    assert rule["resources"] == ["podgroups"]
    assert {"create", "update", "patch", "delete"} <= set(rule["verbs"])
    # SchedulingProfiles are cluster-wide: no namespace user may change them
    for role in (view, edit):
        assert "schedulingprofiles" not in str(role["rules"])
    off = helm.template(values={"rbac": {"aggregateToDefaultRoles": False}})
    assert not [r for r in of_kind(off, "ClusterRole") if "podgroups" in r["metadata"]["name"]]


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({}, {"interval": "30s", "scheme": "http"}),
        (
            {
                "interval": "1m",
                "scrapeTimeout": "20s",
                "scheme": "https",
                "tlsConfig": {"insecureSkipVerify": True},
                "authorization": {"type": "Bearer", "credentials": {"name": "s", "key": "t"}},
            },
            {
                "interval": "1m",
                "scrapeTimeout": "20s",
                "scheme": "https",
                "tlsConfig": {"insecureSkipVerify": True},
                "authorization": {"type": "Bearer", "credentials": {"name": "s", "key": "t"}},
            },
        ),
    ],
    ids=["defaults", "every-setting"],
)
def test_scrape_settings(helm: Helm, values: JSON, expected: JSON) -> None:
    objects = helm.template(
        values={"metrics": {"serviceMonitor": {"enabled": True, **values}}},
        api_versions=["monitoring.coreos.com/v1"],
    )
    (endpoint,) = one(objects, "ServiceMonitor")["spec"]["endpoints"]
    if "authorization" not in expected:
        expected = {
            **expected,
            "bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
        }
    assert endpoint == {"port": "http-metrics", "path": "/metrics", **expected}


# -- options ----------------------------------------------------------------------------------


def test_common_labels_are_on_every_object(helm: Helm) -> None:
    objects = helm.template(values=EVERY_OPTION, api_versions=["monitoring.coreos.com/v1"])
    assert {o["kind"] for o in objects} == {
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        "PodDisruptionBudget",
        "Role",
        "RoleBinding",
        "SchedulingProfile",
        "Service",
        "ServiceAccount",
        "ServiceMonitor",
    }
    for obj in objects:
        labels = obj["metadata"].get("labels") or {}
        assert labels.get("team") == "platform", f"{obj['kind']} {obj['metadata']['name']}"
        assert labels.get("cost-centre") == "42"
    pod_labels = one(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert pod_labels["team"] == "platform"
    # never in a selector: changing commonLabels must not orphan the pods
    assert "team" not in one(objects, "Deployment")["spec"]["selector"]["matchLabels"]


def test_image_digest_wins_over_the_tag(helm: Helm) -> None:
    digest = "sha256:" + "b" * 64
    values = {"image": {"repository": "reg.example/ks", "tag": "1.0", "digest": digest}}
    assert container(helm.template(values=values))["image"] == f"reg.example/ks@{digest}"
    assert container(helm.template(values={"image": {"tag": "1.0"}}))["image"] == "kubesched:1.0"


def test_revision_history_limit(helm: Helm) -> None:
    assert one(helm.template(), "Deployment")["spec"]["revisionHistoryLimit"] == 10
    objects = helm.template(values={"revisionHistoryLimit": 2})
    assert one(objects, "Deployment")["spec"]["revisionHistoryLimit"] == 2


@pytest.mark.parametrize(
    ("values", "name", "created"),
    [
        ({}, "ks-kubesched", True),
        ({"name": "sched-sa"}, "sched-sa", True),
        ({"create": False, "name": "made-by-me"}, "made-by-me", False),
        ({"create": False}, "default", False),
    ],
    ids=["default", "named", "existing", "namespace-default"],
)
def test_service_account(helm: Helm, values: JSON, name: str, created: bool) -> None:
    objects = helm.template(values={"serviceAccount": {"annotations": {"a": "b"}, **values}})
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == name
    accounts = of_kind(objects, "ServiceAccount")
    assert [a["metadata"]["name"] for a in accounts] == ([name] if created else [])
    if created:
        assert accounts[0]["metadata"]["annotations"] == {"a": "b"}
    for binding in of_kind(objects, "ClusterRoleBinding"):
        assert binding["subjects"][0]["name"] == name


def test_extra_args_and_env_reach_the_operator(helm: Helm, monkeypatch: pytest.MonkeyPatch) -> None:
    c = container(helm.template(values=EVERY_OPTION))
    assert c["args"][-1] == "--watch-engine=kopf"
    settings = settings_of(c, monkeypatch)
    assert settings.watch_engine == "kopf"
    assert settings.resync_seconds == 300
    assert {"name": "KUBESCHED_RESYNC_SECONDS", "value": "300"} in c["env"]


# -- lint on every helm 3 we support ----------------------------------------------------------


def test_lint_is_clean_on_the_oldest_supported_helm(tmp_path: Path) -> None:
    old = find_old_helm()
    assert old("version", "--short").startswith(OLD_HELM_VERSION)
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(EVERY_OPTION))
    for extra in ([], ["-f", str(values)]):
        out = old("lint", "--strict", str(CHART), *extra)
        assert "[WARNING]" not in out and "[ERROR]" not in out, out
        assert "0 chart(s) failed" in out
    # the null defaults (leaderElection.enabled, profileSelector) still mean "derived"
    objects = [d for d in yaml.safe_load_all(old("template", "ks", str(CHART))) if d]
    args = container(objects)["args"]
    assert "--no-leader-elect" in args
    assert "--profile-selector=kubesched.dev/release=ks-kubesched-default" in args
