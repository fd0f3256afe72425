"""Pod and Node views: what the scheduler reads, and errors that name the bad field."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.framework.resources import Resource
from kubesched.framework.types import Node, ObjectError, Pod, Taint, Toleration
from tests.builders import make_node, make_pod


def test_pod_view_reads_the_scheduling_fields() -> None:
    raw = (
        make_pod("web", "shop")
        .uid("u1")
        .req(cpu="500m", memory="1Gi")
        .priority(10)
        .nominated("n2")
        .label("app", "web")
        .node_selector(disk="ssd")
        .toleration("dedicated", "gpu", "NoSchedule")
        .host_port(8080)
        .gate("wait")
        .obj()
    )
    pod = Pod(raw)
    assert pod.key == "shop/web"
    assert pod.uid == "u1"
    assert pod.requests == Resource(milli_cpu=500, memory=2**30)
    assert pod.priority == 10
    assert pod.nominated_node_name == "n2"
    assert pod.scheduler_name == "kubesched"
    assert pod.labels == {"app": "web"}
    assert pod.node_selector == {"disk": "ssd"}
    assert [(t.key, t.value, t.effect) for t in pod.tolerations] == [
        ("dedicated", "gpu", "NoSchedule")
    ]
    assert pod.host_ports == [("0.0.0.0", "TCP", 8080)]
    assert pod.scheduling_gates == ["wait"]
    assert pod.images == ["pause"]


def test_pod_defaults() -> None:
    pod = Pod({"metadata": {"name": "p"}})
    assert (pod.namespace, pod.uid, pod.priority, pod.phase) == (
        "default",
        "default/p",
        0,
        "Pending",
    )
    assert pod.scheduler_name == "default-scheduler"
    assert pod.preemption_policy == "PreemptLowerPriority"


def test_assigned_to_copies_without_touching_the_original() -> None:
    pod = make_pod("p").pod()
    placed = pod.assigned_to("n1")
    assert (placed.node_name, pod.node_name) == ("n1", "")
    assert placed.uid == pod.uid


def test_node_view_reads_allocatable_taints_and_images() -> None:
    node = (
        make_node("n1")
        .alloc(cpu="8", memory="16Gi", **{"nvidia.com/gpu": "2"})
        .taint("dedicated", "gpu", "NoSchedule")
        .unschedulable()
        .image("nginx:1", 500)
        .node()
    )
    assert node.allocatable == Resource(
        milli_cpu=8000, memory=16 * 2**30, allowed_pods=110, scalar={"nvidia.com/gpu": 2}
    )
    assert [repr(t) for t in node.taints] == ["dedicated=gpu:NoSchedule"]
    assert node.unschedulable
    assert node.images == [(["nginx:1"], 500)]


def _pod(spec: dict[str, Any], meta: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "p", **(meta or {})}, "spec": spec}


def _node(
    spec: dict[str, Any], status: dict[str, Any] | None = None, **meta: Any
) -> dict[str, Any]:
    return {"metadata": {"name": "n", **meta}, "spec": spec, "status": status or {}}


POD_ERRORS: list[tuple[str, dict[str, Any], str]] = [
    ("no-name", {"metadata": {}}, "metadata.name: required"),
    (
        "bad-quantity-in-container",
        _pod(
            {"containers": [{"name": "a"}, {"name": "b", "resources": {"requests": {"cpu": "1x"}}}]}
        ),
        "spec.containers[1].resources.requests.cpu: quantities must match",
    ),
    (
        "bad-toleration-operator",
        _pod({"tolerations": [{"key": "k", "operator": "In"}]}),
        "spec.tolerations[0].operator: must be Equal, Exists, Lt or Gt, got 'In'",
    ),
    (
        "non-string-label",
        _pod({}, {"labels": {"tier": 1}}),
        "metadata.labels: keys and values must be strings, got 'tier': 1",
    ),
    (
        "non-string-node-selector",
        _pod({"nodeSelector": {"zone": None}}),
        "spec.nodeSelector: keys and values must be strings",
    ),
    (
        "host-port-out-of-range",
        _pod({"containers": [{"name": "a", "ports": [{"containerPort": 1, "hostPort": 70000}]}]}),
        "spec.containers[0].ports[0].hostPort: must be 1-65535",
    ),
    (
        "host-port-not-a-number",
        _pod({"containers": [{"name": "a", "ports": [{"containerPort": 1, "hostPort": "80"}]}]}),
        "spec.containers[0].ports[0].hostPort: must be 1-65535",
    ),
    ("priority-not-int", _pod({"priority": "high"}), "spec.priority: must be an integer"),
    ("containers-not-a-list", _pod({"containers": {"a": 1}}), "spec.containers: expected a list"),
    ("spec-not-an-object", {"metadata": {"name": "p"}, "spec": []}, "spec: expected an object"),
]


@pytest.mark.parametrize(
    ("raw", "message"), [c[1:] for c in POD_ERRORS], ids=[c[0] for c in POD_ERRORS]
)
def test_malformed_pods_name_the_field(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ObjectError) as exc:
        Pod(raw)
    assert str(exc.value).startswith(message)


NODE_ERRORS: list[tuple[str, dict[str, Any], str]] = [
    (
        "bad-taint-effect",
        _node({"taints": [{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "Never"}]}),
        "spec.taints[1].effect: must be one of NoSchedule, PreferNoSchedule, NoExecute",
    ),
    (
        "taint-without-key",
        _node({"taints": [{"effect": "NoSchedule"}]}),
        "spec.taints[0].key: required",
    ),
    (
        "bad-allocatable",
        _node({}, {"allocatable": {"memory": "lots"}}),
        "status.allocatable.memory: quantities must match",
    ),
    (
        "non-string-label",
        _node({}, labels={"a": ["b"]}),
        "metadata.labels: keys and values must be strings",
    ),
    (
        "bad-image-size",
        _node({}, {"images": [{"names": ["x"], "sizeBytes": "big"}]}),
        "status.images[0].sizeBytes:",
    ),
]


@pytest.mark.parametrize(
    ("raw", "message"), [c[1:] for c in NODE_ERRORS], ids=[c[0] for c in NODE_ERRORS]
)
def test_malformed_nodes_name_the_field(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ObjectError) as exc:
        Node(raw)
    assert str(exc.value).startswith(message)


# kube's v1.Toleration.ToleratesTaint: (id, toleration, taint, tolerated)
TOLERATION_CASES: list[tuple[str, Toleration, Taint, bool]] = [
    (
        "equal-match",
        Toleration("k", "Equal", "v", "NoSchedule"),
        Taint("k", "v", "NoSchedule"),
        True,
    ),
    (
        "equal-wrong-value",
        Toleration("k", "Equal", "x", "NoSchedule"),
        Taint("k", "v", "NoSchedule"),
        False,
    ),
    (
        "equal-empty-value-vs-value",
        Toleration("k", "Equal", "", ""),
        Taint("k", "v", "NoSchedule"),
        False,
    ),
    ("empty-operator-is-equal", Toleration("k", "", "v", ""), Taint("k", "v", "NoExecute"), True),
    (
        "exists-any-value",
        Toleration("k", "Exists", "", ""),
        Taint("k", "whatever", "NoSchedule"),
        True,
    ),
    (
        "exists-wrong-key",
        Toleration("k", "Exists", "", ""),
        Taint("other", "", "NoSchedule"),
        False,
    ),
    ("empty-effect-matches-all", Toleration("k", "Exists"), Taint("k", "", "NoExecute"), True),
    (
        "effect-mismatch",
        Toleration("k", "Exists", "", "NoSchedule"),
        Taint("k", "", "PreferNoSchedule"),
        False,
    ),
    (
        "empty-key-exists-tolerates-everything",
        Toleration("", "Exists"),
        Taint("any", "v", "NoExecute"),
        True,
    ),
    (
        "empty-key-exists-with-effect",
        Toleration("", "Exists", "", "NoSchedule"),
        Taint("any", "v", "NoExecute"),
        False,
    ),
    # kube-scheduler v1.37 without the alpha TaintTolerationComparisonOperators gate:
    # Lt/Gt are valid operators that tolerate nothing.
    ("lt-tolerates-nothing", Toleration("k", "Lt", "10"), Taint("k", "5", "NoSchedule"), False),
    ("gt-tolerates-nothing", Toleration("k", "Gt", "1"), Taint("k", "5", "NoSchedule"), False),
]


@pytest.mark.parametrize(
    ("toleration", "taint", "tolerated"),
    [c[1:] for c in TOLERATION_CASES],
    ids=[c[0] for c in TOLERATION_CASES],
)
def test_toleration_tolerates(toleration: Toleration, taint: Taint, tolerated: bool) -> None:
    assert toleration.tolerates(taint) is tolerated


def test_toleration_with_comparison_operator_parses() -> None:
    t = Toleration.from_dict({"key": "k", "operator": "Gt", "value": "3"})
    assert (t.operator, t.tolerates(Taint("k", "5", "NoSchedule"))) == ("Gt", False)


def test_toleration_from_dict_defaults_operator_to_equal() -> None:
    t = Toleration.from_dict({"key": "k", "value": "v"})
    assert t.operator == "Equal"
    assert t.tolerates(Taint("k", "v", "NoSchedule"))


def test_pods_carrying_the_same_tolerations_each_read_their_own() -> None:
    # Tolerations seen before are shared between views; a field the API server would
    # have refused (a number, a boolean) is still read per pod, as written.
    usual = {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}
    first = make_pod("a").spec(tolerations=[usual]).pod()
    second = make_pod("b").spec(tolerations=[{"key": "k", "value": "1"}, usual]).pod()
    assert repr_of(first.tolerations) == [
        ("node.kubernetes.io/not-ready", "Exists", "", "NoExecute")
    ]
    assert repr_of(second.tolerations) == [
        ("k", "Equal", "1", ""),
        ("node.kubernetes.io/not-ready", "Exists", "", "NoExecute"),
    ]
    one = make_pod("c").spec(tolerations=[{"key": "k", "value": 1}]).pod()
    true = make_pod("d").spec(tolerations=[{"key": "k", "value": True}]).pod()
    assert repr_of(one.tolerations) == [("k", "Equal", "1", "")]
    assert repr_of(true.tolerations) == [("k", "Equal", "True", "")]
    assert not true.tolerations[0].tolerates(Taint("k", "1", "NoSchedule"))
    with pytest.raises(ObjectError, match=r"spec\.tolerations\[1\]\.operator"):
        make_pod("e").spec(tolerations=[usual, {**usual, "operator": "In"}]).pod()


def repr_of(tolerations: list[Toleration]) -> list[tuple[str, str, str, str]]:
    return [(t.key, t.operator, t.value, t.effect) for t in tolerations]
