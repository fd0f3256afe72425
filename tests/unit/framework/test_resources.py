"""Pod request arithmetic (k8s.io/component-helpers/resource.PodRequests): what a pod
takes from a node, and the non-zero figures the scoring plugins use."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import pytest

from kubesched.framework.quantity import QuantityError
from kubesched.framework.resources import (
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    Resource,
    pod_request_pair,
    pod_requests,
    status_request_pair,
)
from kubesched.framework.types import Pod
from tests.builders import make_pod

Mi = 2**20
Gi = 2**30


def container(
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    sidecar: bool = False,
) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "c", "image": "i"}
    res: dict[str, Any] = {}
    if requests is not None:
        res["requests"] = requests
    if limits is not None:
        res["limits"] = limits
    if res:
        c["resources"] = res
    if sidecar:
        c["restartPolicy"] = "Always"
    return c


@dataclass
class Case:
    id: str
    spec: dict[str, Any]
    cpu: int
    memory: int = 0
    scalar: dict[str, int] | None = None


CASES = [
    Case("no-containers", {}, 0),
    Case("no-requests", {"containers": [container()]}, 0),
    Case(
        "containers-sum",
        {
            "containers": [
                container({"cpu": "100m", "memory": "100Mi"}),
                container({"cpu": "200m", "nvidia.com/gpu": "1"}),
            ]
        },
        300,
        100 * Mi,
        {"nvidia.com/gpu": 1},
    ),
    Case(
        "init-container-max-wins",
        {
            "containers": [container({"cpu": "300m", "memory": "1Gi"})],
            "initContainers": [container({"cpu": "1", "memory": "100Mi"})],
        },
        1000,
        Gi,
    ),
    Case(
        "init-containers-max-not-sum",
        {
            "containers": [container({"cpu": "100m"})],
            "initContainers": [container({"cpu": "500m"}), container({"cpu": "700m"})],
        },
        700,
    ),
    Case(
        # KEP-753: sidecars run next to the app containers, so they add up...
        "sidecar-adds-to-containers",
        {
            "containers": [container({"cpu": "200m"})],
            "initContainers": [container({"cpu": "100m"}, sidecar=True)],
        },
        300,
    ),
    Case(
        # ...and an init container started after a sidecar runs alongside it: 500 + 100.
        "init-after-sidecar-counts-the-sidecar",
        {
            "containers": [container({"cpu": "200m"})],
            "initContainers": [
                container({"cpu": "100m"}, sidecar=True),
                container({"cpu": "500m"}),
            ],
        },
        600,
    ),
    Case(
        # An init container started before the sidecar does not run with it: max(500, 300).
        "init-before-sidecar-does-not",
        {
            "containers": [container({"cpu": "200m"})],
            "initContainers": [
                container({"cpu": "500m"}),
                container({"cpu": "100m"}, sidecar=True),
            ],
        },
        500,
    ),
    Case(
        # Sidecars 100 + 200 both start before the last init (400): 700 > 100+200+50.
        "two-sidecars-then-init",
        {
            "containers": [container({"cpu": "50m"})],
            "initContainers": [
                container({"cpu": "100m"}, sidecar=True),
                container({"cpu": "250m"}),
                container({"cpu": "200m"}, sidecar=True),
                container({"cpu": "400m"}),
            ],
        },
        700,
    ),
    Case(
        "overhead-on-top",
        {
            "containers": [container({"cpu": "100m", "memory": "10Mi"})],
            "initContainers": [container({"cpu": "1"})],
            "overhead": {"cpu": "250m", "memory": "120Mi"},
        },
        1250,
        130 * Mi,
    ),
    Case(
        "limits-default-the-request",
        {"containers": [container(limits={"cpu": "2", "memory": "1Gi"})]},
        2000,
        Gi,
    ),
    Case(
        "explicit-request-beats-limit",
        {"containers": [container({"cpu": "500m"}, limits={"cpu": "2", "memory": "1Gi"})]},
        500,
        Gi,
    ),
    Case(
        "pod-level-cpu-overrides-aggregate-memory-stays",
        {
            "containers": [container({"cpu": "100m", "memory": "64Mi"})],
            "resources": {"requests": {"cpu": "2"}},
        },
        2000,
        64 * Mi,
    ),
    Case(
        "pod-level-plus-overhead",
        {
            "containers": [container({"cpu": "100m"})],
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
            "overhead": {"cpu": "100m"},
        },
        1100,
        Gi,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_pod_requests(case: Case) -> None:
    r = pod_requests(case.spec)
    assert (r.milli_cpu, r.memory) == (case.cpu, case.memory)
    assert {k: v for k, v in r.scalar.items() if v} == (case.scalar or {})


# (id, container requests, non-zero cpu, non-zero memory)
NON_ZERO_CASES: list[tuple[str, dict[str, Any] | None, int, int]] = [
    ("nothing-requested", None, DEFAULT_MILLI_CPU_REQUEST, DEFAULT_MEMORY_REQUEST),
    ("cpu-only", {"cpu": "250m"}, 250, DEFAULT_MEMORY_REQUEST),
    ("memory-only", {"memory": "1Gi"}, DEFAULT_MILLI_CPU_REQUEST, Gi),
    ("explicit-zero-stays-zero", {"cpu": "0", "memory": "0"}, 0, 0),
    ("other-resource-only", {"example.com/foo": "1"}, 100, 200 * Mi),
]


@pytest.mark.parametrize(
    ("requests", "cpu", "memory"),
    [c[1:] for c in NON_ZERO_CASES],
    ids=[c[0] for c in NON_ZERO_CASES],
)
def test_non_zero_defaults_apply_only_to_absent_keys(
    requests: dict[str, Any] | None, cpu: int, memory: int
) -> None:
    r = pod_requests({"containers": [container(requests)]}, non_zero=True)
    assert (r.milli_cpu, r.memory) == (cpu, memory)


def test_non_zero_defaults_are_per_container() -> None:
    # Two best-effort containers count twice the defaults; a limit counts as a request.
    spec = {"containers": [container(), container(), container(limits={"cpu": "1"})]}
    r = pod_requests(spec, non_zero=True)
    assert r.milli_cpu == 2 * DEFAULT_MILLI_CPU_REQUEST + 1000
    assert r.memory == 3 * DEFAULT_MEMORY_REQUEST
    assert pod_requests(spec) == Resource(milli_cpu=1000)


def test_pod_view_carries_requests_and_non_zero_figures() -> None:
    pod = make_pod("p").req(memory="1Gi").init_container(sidecar=True, cpu="300m").pod()
    assert pod.requests == Resource(milli_cpu=300, memory=Gi)
    # The sidecar states cpu, the app container does not: it gets the 100m default.
    assert (pod.non_zero_cpu, pod.non_zero_memory) == (400, Gi + DEFAULT_MEMORY_REQUEST)


def test_non_zero_defaults_with_init_containers_sidecars_and_overhead() -> None:
    # An init container that states cpu only runs beside a sidecar stating nothing:
    # its non-zero figure is its cpu and the default memory, plus the sidecar's defaults.
    spec = {
        "containers": [container({"cpu": "1", "memory": "1Gi"})],
        "initContainers": [container(sidecar=True), container({"cpu": "2"})],
        "overhead": {"cpu": "100m"},
    }
    d_cpu, d_mem = DEFAULT_MILLI_CPU_REQUEST, DEFAULT_MEMORY_REQUEST
    assert pod_requests(spec) == Resource(milli_cpu=2100, memory=Gi)
    nz = pod_requests(spec, non_zero=True)
    assert (nz.milli_cpu, nz.memory) == (2000 + d_cpu + 100, Gi + d_mem)
    # pod-level requests set both figures
    spec["resources"] = {"requests": {"cpu": "3", "memory": "2Gi"}}
    assert pod_requests(spec) == Resource(milli_cpu=3100, memory=2 * Gi)
    nz = pod_requests(spec, non_zero=True)
    assert (nz.milli_cpu, nz.memory) == (3100, 2 * Gi)


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"containers": [container({"cpu": "lots"})]}, "spec.containers[0].resources.requests.cpu"),
        (
            {"containers": [container()], "initContainers": [container(limits={"memory": "1GB"})]},
            "spec.initContainers[0].resources.requests.memory",
        ),
        ({"overhead": {"cpu": "x"}}, "spec.overhead.cpu"),
        ({"resources": {"requests": {"memory": "?"}}}, "spec.resources.requests.memory"),
    ],
    ids=["container", "init-container-limit", "overhead", "pod-level"],
)
def test_bad_quantities_name_the_field(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(QuantityError) as exc:
        pod_requests(spec)
    assert str(exc.value).startswith(f"{field}: ")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_replicas_figures_are_their_own_and_equal(case: Case) -> None:
    """A spec seen again (the replicas of a workload) gets the same figures as the first
    time, in objects of its own: what one pod's view does to them, another never sees."""
    first = pod_request_pair(copy.deepcopy(case.spec))
    again = pod_request_pair(copy.deepcopy(case.spec))
    assert again == first
    assert all(a is not b for a, b in zip(first, again, strict=True))
    again[0].milli_cpu += 1
    again[1].scalar["example.com/x"] = 1
    assert pod_request_pair(copy.deepcopy(case.spec)) == first


def test_a_quantity_refused_once_is_refused_again() -> None:
    good = {"containers": [container({"cpu": "1"})]}
    assert pod_requests(good).milli_cpu == 1000
    pod_requests({"containers": [{}]})  # no resources: the shape the bad ones imitate
    bad: list[Any] = [
        {"requests": {"cpu": True}},
        {"requests": {"cpu": [1]}},
        {"requests": {"cpu": "lots"}},
        {"requests": []},
        {"limits": []},
        [],
    ]
    for resources in bad:
        for _ in range(2):
            with pytest.raises(QuantityError):
                pod_requests({"containers": [{"resources": resources}]})


# -- an in-place resize in the status (PodRequests with UseStatusResources) ---------------
def resized(
    spec_cpu: str,
    allocated: str | None,
    actuated: str | None,
    *,
    infeasible: bool = False,
    memory: str = "1Gi",
) -> tuple[dict[str, Any], dict[str, Any]]:
    spec = {"containers": [container({"cpu": spec_cpu, "memory": memory})]}
    spec["containers"][0]["name"] = "c"
    cs: dict[str, Any] = {"name": "c"}
    if allocated is not None:
        cs["allocatedResources"] = {"cpu": allocated, "memory": memory}
    if actuated is not None:
        cs["resources"] = {"requests": {"cpu": actuated, "memory": memory}}
    status: dict[str, Any] = {"containerStatuses": [cs]}
    if infeasible:
        status["conditions"] = [{"type": "PodResizePending", "reason": "Infeasible"}]
    return spec, status


def cpu_of(spec: dict[str, Any], status: dict[str, Any]) -> int | None:
    pair = status_request_pair(spec, status)
    return None if pair is None else pair[0].milli_cpu


def test_a_status_that_repeats_the_spec_leaves_the_spec_figures() -> None:
    assert status_request_pair(*resized("1", None, None)) is None
    assert status_request_pair(*resized("1", "1", "1")) is None
    assert status_request_pair({"containers": [container({"cpu": "1"})]}, {}) is None


@pytest.mark.parametrize(
    ("spec_cpu", "allocated", "actuated", "infeasible", "want"),
    [
        pytest.param("1", "3", "3", False, 3000, id="scaled-down-in-spec-not-yet-in-use"),
        pytest.param("3", "3", "1", False, 3000, id="scaled-up-allocated-not-yet-in-use"),
        pytest.param("2", "1", None, False, 2000, id="actuated-falls-back-to-allocated"),
        pytest.param("8", "1", "1", True, 1000, id="infeasible-leaves-the-spec-out"),
        pytest.param("8", "1", "2", True, 2000, id="infeasible-largest-of-the-status"),
    ],
)
def test_the_largest_of_spec_allocated_and_actuated(
    spec_cpu: str, allocated: str, actuated: str | None, infeasible: bool, want: int
) -> None:
    assert cpu_of(*resized(spec_cpu, allocated, actuated, infeasible=infeasible)) == want


def test_a_resize_counts_in_the_pod_view_and_its_non_zero_figure() -> None:
    spec, status = resized("1", "3", "3")
    pod = make_pod("p").obj()
    pod["spec"].update(spec, nodeName="n1")
    pod["status"].update(status)
    view = Pod(pod)
    assert (view.requests.milli_cpu, view.non_zero_cpu) == (3000, 3000)
    # a container that states no memory keeps kube's default in the non-zero figure
    spec2 = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
    status2 = {"containerStatuses": [{"name": "c", "allocatedResources": {"cpu": "2"}}]}
    req, nz = status_request_pair(spec2, status2) or (None, None)
    assert req is not None and nz is not None
    assert (req.milli_cpu, req.memory, nz.memory) == (2000, 0, DEFAULT_MEMORY_REQUEST)


def test_pod_level_status_maps_and_sidecars() -> None:
    # the kubelet's pod-level maps stand for the containers' sum
    spec = {"containers": [container({"cpu": "1"}), container({"cpu": "1"})]}
    status = {
        "allocatedResources": {"cpu": "5"},
        "resources": {"requests": {"cpu": "4"}},
        "containerStatuses": [{"name": "x"}],
    }
    assert cpu_of(spec, status) == 5000
    # pod-level requests in the spec: the largest of the spec's and the status's
    spec_pl = {"resources": {"requests": {"cpu": "2"}}, "containers": [container({"cpu": "1"})]}
    assert (
        cpu_of(spec_pl, {"resources": {"requests": {"cpu": "3"}}, "allocatedResources": {}}) == 3000
    )
    # a sidecar's allocation is found by its name among the init container statuses
    sidecar = container({"cpu": "1"}, sidecar=True)
    sidecar["name"] = "side"
    app = container({"cpu": "1"})
    app["name"] = "app"
    spec_sc = {"initContainers": [sidecar], "containers": [app]}
    status_sc = {"initContainerStatuses": [{"name": "side", "allocatedResources": {"cpu": "2"}}]}
    assert cpu_of(spec_sc, status_sc) == 3000


def test_a_malformed_status_leaves_the_spec_figures() -> None:
    spec, status = resized("1", "3", "3")
    status["containerStatuses"][0]["allocatedResources"] = {"cpu": "lots"}
    assert status_request_pair(spec, status) is None
