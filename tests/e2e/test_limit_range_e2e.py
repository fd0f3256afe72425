"""LimitRanger admission on the real kube-apiserver: the simulator's scenario loader
(``kubesched.simulator.limit_ranges``) must write into a pod what the API server writes
(defaults, the annotation) and refuse the pods it refuses, in its words."""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kubesched.framework.types import ObjectError
from kubesched.simulator.apiserver import admit_pod
from kubesched.simulator.limit_ranges import default_limit_range, validate_limit_range
from tests.controlplane import ApiError, ControlPlane

JSON = dict[str, Any]

RANGES: list[JSON] = [
    {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "a-containers"},
        "spec": {
            "limits": [
                {
                    "type": "Container",
                    "max": {"cpu": "2", "memory": "1536Mi"},
                    "min": {"cpu": "100m"},
                    "defaultRequest": {"cpu": "0.5"},
                    "maxLimitRequestRatio": {"cpu": "4"},
                }
            ]
        },
    },
    {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "b-pods"},
        "spec": {"limits": [{"type": "Pod", "max": {"memory": "4Gi", "cpu": "3"}}]},
    },
]


@pytest.fixture
def ranged(controlplane: ControlPlane, namespace: str) -> Iterator[tuple[ControlPlane, str]]:
    for lr in RANGES:
        controlplane.api.create(lr, namespace)
    # The API server's LimitRanger reads the ranges from its informer: until both are in,
    # a pod only the second refuses is let through. Wait until each one refuses its probe.
    for case in ("over-max-limit", "pod-sum-over-max"):
        deadline = time.monotonic() + 20
        while not _refused(controlplane, namespace, REFUSED[case]):
            assert time.monotonic() < deadline, f"LimitRanger does not enforce {case} yet"
            time.sleep(0.05)
    yield controlplane, namespace


def _refused(cp: ControlPlane, namespace: str, containers: tuple[JSON, ...]) -> bool:
    """Whether the API server refuses a pod of ``containers`` (a dry run: nothing stored)."""
    path = cp.api.path("v1", "Pod", namespace=namespace)
    try:
        cp.api.request(
            "POST", path, _pod("probe", namespace, *containers), params={"dryRun": "All"}
        )
    except ApiError as e:
        return e.status == 403
    return False


def _ours(namespace: str) -> dict[str, list[JSON]]:
    out = []
    for lr in copy.deepcopy(RANGES):
        validate_limit_range(lr)
        default_limit_range(lr)
        out.append(lr)
    return {namespace: out}


def _pod(name: str, namespace: str, *containers: JSON, init: tuple[JSON, ...] = ()) -> JSON:
    spec: JSON = {"containers": list(containers)}
    if init:
        spec["initContainers"] = list(init)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def _c(name: str, **resources: JSON) -> JSON:
    return {"name": name, "image": "busybox", "resources": resources}


REFUSED: dict[str, tuple[JSON, ...]] = {
    "over-max-limit": (_c("c", limits={"cpu": "3"}),),
    "under-min-request": (_c("c", requests={"cpu": "50m"}, limits={"cpu": "1"}),),
    "ratio": (_c("c", requests={"cpu": "200m"}, limits={"cpu": "1"}),),
    "memory-over-max": (_c("c", limits={"memory": "1.75Gi"}),),
    "pod-sum-over-max": (_c("c1", limits={"cpu": "2"}), _c("c2", limits={"cpu": "1.5"})),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused_by_both_with_the_same_words(ranged: tuple[ControlPlane, str], case: str) -> None:
    cp, namespace = ranged
    pod = _pod(f"refused-{case}", namespace, *REFUSED[case])
    with pytest.raises(ObjectError) as ours:
        admit_pod(copy.deepcopy(pod), {}, None, _ours(namespace))
    with pytest.raises(ApiError) as theirs:
        cp.api.create(pod, namespace)
    assert theirs.value.status == 403, theirs.value.body
    message = theirs.value.body["message"]
    assert message.startswith(f'pods "refused-{case}" is forbidden: ')
    assert str(ours.value).split(": ", 1)[1] == message.split(" is forbidden: ", 1)[1]


def test_an_accepted_pod_is_written_as_the_api_server_writes_it(
    ranged: tuple[ControlPlane, str],
) -> None:
    cp, namespace = ranged
    pod = _pod(
        "accepted",
        namespace,
        _c("bare"),
        _c("limited", limits={"cpu": "600m"}),
        init=(_c("setup", requests={"memory": "100Mi"}),),
    )
    ours = copy.deepcopy(pod)
    admit_pod(ours, {}, None, _ours(namespace))
    stored = cp.api.create(pod, namespace)
    for key in ("containers", "initContainers"):
        mine = [c["resources"] for c in ours["spec"][key]]
        theirs = [c["resources"] for c in stored["spec"][key]]
        assert _normal(mine) == _normal(theirs), key
    annotation = "kubernetes.io/limit-ranger"
    assert (
        ours["metadata"]["annotations"][annotation] == stored["metadata"]["annotations"][annotation]
    )


def _normal(resources: list[JSON]) -> list[JSON]:
    """Quantities as the API server writes them back (``0.5`` is stored as ``500m``)."""
    from kubesched.simulator.limit_ranges import Quantity, canonical

    return [
        {k: {n: canonical(Quantity.parse(q)) for n, q in (v or {}).items()} for k, v in r.items()}
        for r in resources
    ]
