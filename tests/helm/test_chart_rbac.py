"""helm/kubesched's ClusterRole: exactly the documented least privilege (the e2e test
tests/e2e/test_helm_install.py shows each rule is needed), nothing granted on
everything, every kind the operator reads listable and watchable, extra rules appended."""

from __future__ import annotations

from kubesched.cluster.kinds import KINDS, Reader
from tests.helm.chart import (
    JSON,
    Helm,
    of_kind,
    scheduler_binding,
    scheduler_role,
)

#: The ClusterRole, rule by rule: (apiGroups, resources, verbs). Each is needed by a named
#: e2e test (tests/e2e/test_helm_install.py::test_each_rule_is_needed).
EXPECTED_CLUSTER_RULES = [
    ([""], ["pods"], ["list", "watch"]),
    ([""], ["pods/binding"], ["create"]),
    ([""], ["pods/status"], ["patch"]),
    ([""], ["pods"], ["delete"]),
    (["events.k8s.io"], ["events"], ["create"]),
    (
        [""],
        [
            "nodes",
            "namespaces",
            "services",
            "replicationcontrollers",
            "persistentvolumeclaims",
            "persistentvolumes",
        ],
        ["list", "watch"],
    ),
    (["apps"], ["replicasets", "statefulsets"], ["list", "watch"]),
    (
        ["storage.k8s.io"],
        ["storageclasses", "csinodes", "csidrivers", "csistoragecapacities"],
        ["list", "watch"],
    ),
    (["policy"], ["poddisruptionbudgets"], ["list", "watch"]),
    (["scheduling.k8s.io"], ["priorityclasses"], ["list", "watch"]),
    (["resource.k8s.io"], ["deviceclasses", "resourceslices", "resourceclaims"], ["list", "watch"]),
    (["resource.k8s.io"], ["devicetaintrules"], ["list", "watch"]),
    (["resource.k8s.io"], ["resourceclaims"], ["update"]),
    (["resource.k8s.io"], ["resourceclaims"], ["create"]),
    (["resource.k8s.io"], ["resourceclaims"], ["delete"]),
    (["resource.k8s.io"], ["resourceclaims/status"], ["update", "patch"]),
    (["resource.k8s.io"], ["resourceclaims/binding"], ["update", "patch"]),
    ([""], ["persistentvolumes"], ["update"]),
    ([""], ["persistentvolumeclaims"], ["update"]),
    (["kubesched.dev"], ["podgroups"], ["list", "watch", "patch"]),
    (["kubesched.dev"], ["podgroups/status"], ["patch"]),
    (["scheduling.k8s.io"], ["podgroups", "workloads"], ["list", "watch"]),
    (["scheduling.k8s.io"], ["podgroups/status"], ["patch"]),
    (["scheduling.x-k8s.io"], ["podgroups"], ["list", "watch"]),
    (["scheduling.x-k8s.io"], ["podgroups/status"], ["patch"]),
    (["kubesched.dev"], ["schedulingprofiles"], ["get", "list", "watch", "patch"]),
    (["kubesched.dev"], ["schedulingprofiles/status"], ["patch"]),
]


def rules_of(role: JSON) -> list[tuple[list[str], list[str], list[str]]]:
    return [(r["apiGroups"], r["resources"], r["verbs"]) for r in role["rules"]]


def grants(rules: list[JSON], group: str, resource: str, verb: str) -> bool:
    return any(
        group in r.get("apiGroups", ())
        and resource in r.get("resources", ())
        and verb in r.get("verbs", ())
        for r in rules
    )


# -- RBAC --------------------------------------------------------------------------------------


def test_cluster_role_is_exactly_the_least_privilege(helm: Helm) -> None:
    objects = helm.template()
    assert rules_of(scheduler_role(objects)) == EXPECTED_CLUSTER_RULES
    binding = scheduler_binding(objects)
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "ks-kubesched", "namespace": "kubesched"}
    ]


def test_nothing_is_granted_on_everything(helm: Helm) -> None:
    objects = helm.template(values={"replicaCount": 2, "rbac": {"debugReader": True}})
    for role in of_kind(objects, "ClusterRole") + of_kind(objects, "Role"):
        for rule in role["rules"]:
            for field in ("apiGroups", "resources", "verbs", "nonResourceURLs"):
                assert "*" not in rule.get(field, ()), rule
            assert not {"secrets", "configmaps"} & set(rule.get("resources", ())), rule
            assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"]), rule


def test_every_kind_the_operator_reads_is_listable_and_watchable(helm: Helm) -> None:
    """The table of kinds (cluster.kinds.KINDS) against the ClusterRole: a kind ``run``
    watches or lists without a rule here would fail with 403 in a real cluster, and a rule
    for a kind only ``explain`` reads (with the user's credentials) is more than needed."""
    rules = scheduler_role(helm.template())["rules"]
    for k in KINDS:
        group = k.group_version.rpartition("/")[0]
        if k.reader is Reader.RUN:
            for verb in ("list", "watch"):
                assert grants(rules, group, k.plural, verb), f"{verb} {k.plural} ({group!r})"
        elif k.reader is Reader.EXPLAIN:
            assert not grants(rules, group, k.plural, "list"), f"list {k.plural}: not needed"
        else:
            assert grants(rules, group, k.plural, "list"), f"list {k.plural} ({group!r})"


def test_extra_cluster_rules_are_appended(helm: Helm) -> None:
    extra = {"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["list", "watch"]}
    rules = scheduler_role(helm.template(values={"rbac": {"extraClusterRules": [extra]}}))["rules"]
    assert rules[:-1] == [
        {"apiGroups": g, "resources": r, "verbs": v} for g, r, v in EXPECTED_CLUSTER_RULES
    ]
    assert rules[-1] == extra
