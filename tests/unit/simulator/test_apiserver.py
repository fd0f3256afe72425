"""What kube-apiserver does to a pod on create, done to scenario pods (and the order a
starting scheduler lists a scenario in)."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from kubesched.cluster.memory import MemoryCluster
from kubesched.framework.types import ObjectError, Pod
from kubesched.simulator.apiserver import admit_pod, default_storage_classes
from kubesched.simulator.engine import list_order, simulate

JSON = dict[str, Any]

NOT_READY = {
    "key": "node.kubernetes.io/not-ready",
    "operator": "Exists",
    "effect": "NoExecute",
    "tolerationSeconds": 300,
}
UNREACHABLE = {**NOT_READY, "key": "node.kubernetes.io/unreachable"}


def pod(spec: JSON | None = None, labels: dict[str, str] | None = None) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "labels": labels or {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "i"}], **(spec or {})},
    }


def spread(**fields: Any) -> JSON:
    c: JSON = {
        "maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "web"}},
    }
    c.update(fields)
    return {k: v for k, v in c.items() if v is not None}


@pytest.mark.parametrize(
    ("given", "added"),
    [
        pytest.param(None, [NOT_READY, UNREACHABLE], id="none-given"),
        pytest.param([{"operator": "Exists"}], [], id="tolerate-everything"),
        pytest.param(
            [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}],
            [UNREACHABLE],
            id="any-effect-of-not-ready",
        ),
        pytest.param(
            [
                {
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                }
            ],
            [NOT_READY],
            id="unreachable-no-execute",
        ),
        pytest.param(
            [
                {
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "effect": "NoSchedule",
                }
            ],
            [NOT_READY, UNREACHABLE],
            id="no-schedule-is-not-enough",
        ),
    ],
)
def test_default_tolerations(given: list[JSON] | None, added: list[JSON]) -> None:
    p = pod({"tolerations": copy.deepcopy(given)} if given is not None else None)
    admit_pod(p, {})
    assert p["spec"]["tolerations"] == (given or []) + added


def test_a_pod_created_on_a_node_gets_its_zone_and_region_labels() -> None:
    node = {
        "metadata": {
            "name": "n1",
            "labels": {
                "topology.kubernetes.io/zone": "z1",
                "topology.kubernetes.io/region": "r1",
                "kubernetes.io/hostname": "n1",
            },
        }
    }
    bound = pod({"nodeName": "n1"}, labels={"app": "web", "topology.kubernetes.io/zone": "old"})
    pending = pod()
    admit_pod(bound, {"n1": node})
    admit_pod(pending, {"n1": node})
    assert bound["metadata"]["labels"] == {
        "app": "web",
        "topology.kubernetes.io/zone": "z1",
        "topology.kubernetes.io/region": "r1",
    }
    assert pending["metadata"]["labels"] == {"app": "web"}


def test_a_binding_copies_the_node_zone_and_region_labels_too() -> None:
    cluster = MemoryCluster()
    zone = {"topology.kubernetes.io/zone": "z1", "topology.kubernetes.io/region": "r1"}
    cluster.apply({"kind": "Node", "metadata": {"name": "n1", "labels": {**zone, "x": "y"}}})
    stored = cluster.apply(pod())
    asyncio.run(cluster.bind(Pod(stored), "n1"))
    assert cluster.objects["Pod"]["default/p"]["metadata"]["labels"] == {"app": "web", **zone}
    assert stored["metadata"]["labels"] == {"app": "web"}, "the old version is left alone"


def test_match_label_keys_are_checked_but_left_for_the_scheduler_to_merge() -> None:
    # Stored merged, the pod could not be created again: the API server would add the
    # same expression twice and refuse it.
    c = spread(matchLabelKeys=["pod-template-hash", "absent"])
    p = pod({"topologySpreadConstraints": [c]}, labels={"app": "web", "pod-template-hash": "a"})
    admit_pod(p, {})
    assert p["spec"]["topologySpreadConstraints"] == [c]
    created_merged = copy.deepcopy(p)
    created_merged["spec"]["topologySpreadConstraints"][0]["labelSelector"]["matchExpressions"] = [
        {"key": "pod-template-hash", "operator": "In", "values": ["a"]}
    ]
    with pytest.raises(ObjectError, match="exists in both matchLabelKeys and labelSelector"):
        admit_pod(created_merged, {})


F = "spec.topologySpreadConstraints"


@pytest.mark.parametrize(
    ("constraints", "message"),
    [
        pytest.param(
            [spread(maxSkew=0)],
            f"{F}[0].maxSkew: Invalid value: 0: must be greater than zero",
            id="max-skew",
        ),
        pytest.param(
            [spread(whenUnsatisfiable="Maybe")],
            f"{F}[0].whenUnsatisfiable: Unsupported value: 'Maybe': supported values: "
            '"DoNotSchedule", "ScheduleAnyway"',
            id="action",
        ),
        pytest.param(
            [spread(), spread(maxSkew=2)],
            f"{F}[0].{{topologyKey, whenUnsatisfiable}}: Duplicate value: "
            '"{topology.kubernetes.io/zone, DoNotSchedule}"',
            id="duplicate",
        ),
        pytest.param(
            [spread(whenUnsatisfiable="ScheduleAnyway", minDomains=2)],
            f"{F}[0].minDomains: Invalid value: 2: can only use minDomains if "
            "whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway",
            id="min-domains-needs-do-not-schedule",
        ),
        pytest.param(
            [spread(minDomains=0)],
            f"{F}[0].minDomains: Invalid value: 0: must be greater than zero",
            id="min-domains-positive",
        ),
        pytest.param(
            [spread(nodeTaintsPolicy="Always")],
            f"{F}[0].nodeTaintsPolicy: Unsupported value: 'Always': supported values: "
            '"Honor", "Ignore"',
            id="policy",
        ),
        pytest.param(
            [spread(labelSelector=None, matchLabelKeys=["app"])],
            f"{F}[0].matchLabelKeys: Forbidden: must not be specified when labelSelector is "
            "not set",
            id="match-label-keys-without-selector",
        ),
        pytest.param(
            [spread(matchLabelKeys=["app"])],
            f"{F}[0].matchLabelKeys[0]: Invalid value: 'app': exists in both matchLabelKeys "
            "and labelSelector",
            id="match-label-key-in-the-selector",
        ),
    ],
)
def test_spread_constraints_the_api_server_refuses(constraints: list[JSON], message: str) -> None:
    with pytest.raises(ObjectError) as e:
        admit_pod(pod({"topologySpreadConstraints": constraints}), {})
    assert str(e.value) == message


def test_a_scheduler_lists_by_kind_then_etcd_key() -> None:
    cluster = MemoryCluster()
    for kind, ns, name in [
        ("Pod", "team", "b"),
        ("Node", None, "node-2"),
        ("Pod", "team", "a"),
        ("Pod", "team-x", "z"),
        ("Service", "team", "s"),
        ("Node", None, "node-10"),
        ("Namespace", None, "team"),
    ]:
        meta = {"name": name, **({"namespace": ns} if ns else {})}
        cluster.apply({"kind": kind, "metadata": meta})
    got = [
        (kind, f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}")
        for kind, o in list_order(cluster)
    ]
    assert got == [
        ("Namespace", "/team"),
        ("Node", "/node-10"),
        ("Node", "/node-2"),
        # "team-x/" sorts before "team/": '-' (0x2d) < '/' (0x2f), as etcd keys do
        ("Pod", "team-x/z"),
        ("Pod", "team/a"),
        ("Pod", "team/b"),
        ("Service", "team/s"),
    ]


def test_a_pending_pod_being_deleted_waits() -> None:
    # kube-scheduler skips it and writes no condition: kubesched run leaves it Pending too.
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"}},
    }
    dying = pod()
    dying["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    dying["spec"]["schedulerName"] = "kubesched"
    [result] = simulate([node, dying], seed=0).pods
    assert (result.node, result.status, result.message) == (
        None,
        "Waiting",
        "the pod is being deleted",
    )


def storage_class(name: str, created: str, default: str | None = "true") -> JSON:
    annotations = {"storageclass.kubernetes.io/is-default-class": default} if default else {}
    return {
        "kind": "StorageClass",
        "metadata": {"name": name, "creationTimestamp": created, "annotations": annotations},
    }


def claim(name: str, **spec: Any) -> JSON:
    return {"kind": "PersistentVolumeClaim", "metadata": {"name": name}, "spec": spec}


def test_claims_without_a_class_get_the_newest_default_class() -> None:
    beta = claim("beta")
    beta["metadata"]["annotations"] = {"volume.beta.kubernetes.io/storage-class": "x"}
    objects = [
        storage_class("old", "2025-01-01T00:00:00Z"),
        storage_class("b-new", "2025-01-02T00:00:00Z"),
        storage_class("a-new", "2025-01-02T00:00:00Z"),
        storage_class("newest-but-not-default", "2025-01-03T00:00:00Z", default="false"),
        claim("none"),
        claim("empty", storageClassName=""),
        claim("named", storageClassName="old"),
        beta,
    ]
    default_storage_classes(objects)
    assert {o["metadata"]["name"]: o["spec"].get("storageClassName") for o in objects[4:]} == {
        "none": "a-new",  # the newest; of two as new, the first by name
        "empty": "",
        "named": "old",
        "beta": None,
    }


def test_pod_level_limits_default_the_requests_no_container_makes() -> None:
    p = pod(
        {
            "resources": {"limits": {"cpu": "3", "memory": "1Gi", "hugepages-2Mi": "2Mi"}},
            "containers": [
                {"name": "c", "image": "i", "resources": {"limits": {"memory": "512Mi"}}}
            ],
        }
    )
    admit_pod(p, {})
    # memory: the container's limit is its request, so the aggregate stands (unwritten)
    assert p["spec"]["resources"]["requests"] == {"cpu": "3", "hugepages-2Mi": "2Mi"}


@pytest.mark.parametrize("host_network", [True, False])
def test_a_host_network_pods_container_ports_are_host_ports(host_network: bool) -> None:
    ports = [{"containerPort": 9100}, {"containerPort": 53, "hostPort": 5353, "protocol": "UDP"}]
    p = pod(
        {
            "hostNetwork": host_network,
            "initContainers": [{"name": "i", "image": "i", "ports": [{"containerPort": 8443}]}],
            "containers": [{"name": "c", "image": "i", "ports": copy.deepcopy(ports)}],
        }
    )
    admit_pod(p, {})
    got = [port.get("hostPort") for port in p["spec"]["containers"][0]["ports"]]
    init = p["spec"]["initContainers"][0]["ports"][0].get("hostPort")
    if host_network:
        assert (got, init) == ([9100, 5353], 8443)  # an explicit hostPort is kept
    else:
        assert (got, init) == ([None, 5353], None)
