"""The implicit claim of extended resources backed by DRA: its requests and the pod's
request mappings (kube's createRequestsAndMappings), and what each node needs."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.framework.dra.extended import extended_resource_classes
from kubesched.framework.types import Pod
from kubesched.plugins.dynamic_resources.extended import (
    CANNOT_FIT,
    STALE,
    ExtendedClaim,
    requests_and_mappings,
)
from tests.builders import make_node
from tests.unit.dra.test_extended import cls

GPU, NIC = "example.com/gpu", "example.com/nic"
CLASSES = extended_resource_classes([cls("gpu", GPU), cls("nic", NIC)])


def ctr(name: str, requests: dict[str, str], *, sidecar: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "resources": {"requests": dict(requests)}}
    if sidecar:
        out["restartPolicy"] = "Always"
    return out


def gpu(n: str) -> dict[str, str]:
    return {GPU: n}


def pod(containers: list[dict[str, Any]], inits: list[dict[str, Any]] | None = None) -> Pod:
    spec: dict[str, Any] = {"containers": containers}
    if inits:
        spec["initContainers"] = inits
    return Pod({"metadata": {"name": "p", "uid": "u"}, "spec": spec})


def req(name: str, count: int, cls_name: str = "gpu") -> tuple[str, str, int]:
    return name, cls_name, count


def m(container: str, request: str, resource: str = GPU) -> tuple[str, str, str]:
    return container, resource, request


@pytest.mark.parametrize(
    ("p", "resources", "want_requests", "want_mappings"),
    [
        pytest.param(
            pod([ctr("c", {"cpu": "1", **gpu("2")})]),
            [GPU],
            [req("container-0-request-1", 2)],
            [m("c", "container-0-request-1")],
            id="one-container-index-among-its-sorted-requests",
        ),
        pytest.param(
            pod([ctr("a", gpu("1")), ctr("b", gpu("2"))]),
            [GPU],
            [req("container-0-request-0", 1), req("container-1-request-0", 2)],
            [m("a", "container-0-request-0"), m("b", "container-1-request-0")],
            id="a-request-per-container",
        ),
        pytest.param(
            pod([ctr("a", {GPU: "1", NIC: "3"})]),
            [NIC, GPU],
            [req("container-0-request-0", 1), req("container-0-request-1", 3, "nic")],
            [m("a", "container-0-request-0"), m("a", "container-0-request-1", NIC)],
            id="two-resources-two-classes",
        ),
        pytest.param(
            pod([ctr("a", {GPU: "1", NIC: "3"})]),
            [GPU],
            [req("container-0-request-0", 1)],
            [m("a", "container-0-request-0")],
            id="only-the-resources-asked-for",
        ),
        pytest.param(
            pod([ctr("c", gpu("1"))], [ctr("i", gpu("2"))]),
            [GPU],
            [req("container-0-request-0", 1), req("container-1-request-0", 1)],
            [
                m("c", "container-1-request-0"),
                m("i", "container-1-request-0"),
                m("i", "container-0-request-0"),
            ],
            id="init-reuses-the-later-container-and-asks-the-rest",
        ),
        pytest.param(
            pod([ctr("c", gpu("2"))], [ctr("i", gpu("1"))]),
            [GPU],
            [req("container-1-request-0", 2)],
            [m("c", "container-1-request-0"), m("i", "container-1-request-0")],
            id="init-covered-by-the-later-container",
        ),
        pytest.param(
            pod([ctr("c", {"cpu": "1"})], [ctr("i0", gpu("1")), ctr("i1", gpu("2"))]),
            [GPU],
            [req("container-1-request-0", 2)],
            [m("i0", "container-1-request-0"), m("i1", "container-1-request-0")],
            id="init-containers-share-the-largest",
        ),
        pytest.param(
            pod(
                [ctr("c", gpu("1"))],
                [ctr("s", gpu("1"), sidecar=True), ctr("i", gpu("2"))],
            ),
            [GPU],
            [
                req("container-0-request-0", 1),
                req("container-1-request-0", 1),
                req("container-2-request-0", 1),
            ],
            [
                m("s", "container-0-request-0"),
                m("c", "container-2-request-0"),
                m("i", "container-2-request-0"),
                m("i", "container-1-request-0"),
            ],
            id="a-sidecar-before-it-is-not-reused",
        ),
        pytest.param(
            pod([ctr("c", gpu("500m"))]), [GPU], [], [], id="not-a-whole-number-asks-nothing"
        ),
    ],
)
def test_requests_and_mappings(
    p: Pod,
    resources: list[str],
    want_requests: list[tuple[str, str, int]],
    want_mappings: list[tuple[str, str, str]],
) -> None:
    requests, mappings = requests_and_mappings(p, resources, CLASSES)
    assert [
        (r["name"], r["exactly"]["deviceClassName"], r["exactly"]["count"]) for r in requests
    ] == want_requests
    assert {r["exactly"]["allocationMode"] for r in requests} <= {"ExactCount"}
    assert [(x["containerName"], x["resourceName"], x["requestName"]) for x in mappings] == (
        want_mappings
    )


def claim(requests: dict[str, int], stale: bool = False) -> ExtendedClaim:
    raw = {"metadata": {"name": "<extended-resources>", "namespace": "default", "uid": "x"}}
    return ExtendedClaim(raw, requests, CLASSES, stale=stale)


@pytest.mark.parametrize(
    ("requests", "alloc", "stale", "want_dra", "reason"),
    [
        pytest.param({GPU: 1}, {}, False, [GPU], None, id="none-on-the-node"),
        pytest.param({GPU: 1}, {GPU: "0"}, False, [GPU], None, id="zero-on-the-node"),
        pytest.param({GPU: 1}, {GPU: "4"}, False, None, None, id="device-plugin-serves-it"),
        pytest.param(
            {GPU: 1, "example.com/fpga": 1}, {}, False, None, CANNOT_FIT, id="unserved-missing"
        ),
        pytest.param(
            {GPU: 1, "example.com/fpga": 1},
            {"example.com/fpga": "1"},
            False,
            [GPU],
            None,
            id="unserved-from-a-device-plugin",
        ),
        pytest.param({GPU: 1}, {}, True, None, STALE, id="stale-claim"),
    ],
)
def test_for_node(
    requests: dict[str, int],
    alloc: dict[str, str],
    stale: bool,
    want_dra: list[str] | None,
    reason: str | None,
) -> None:
    p = pod([ctr("c", {k: str(v) for k, v in requests.items()})])
    ni = make_node("n").alloc(cpu="4", **alloc).info()
    variant, got_reason = claim(requests, stale).for_node(p, ni)
    assert got_reason == reason
    if want_dra is None:
        assert variant is None
        return
    assert variant is not None
    assert [r.exactly.device_class_name for r in variant.claim.requests if r.exactly] == [
        CLASSES.class_for(x) for x in want_dra
    ]
