"""ImageLocality scores, hand-computed from kube-scheduler's formula:

sum   = sum over the pod's (init) container and image-volume images on the node of
        int(size * nodes_with_image / total_nodes)
score = 100 * (clamp(sum, 23Mi, 1000Mi * images) - 23Mi) // (1000Mi * images - 23Mi)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kubesched.backend.cache import Cache
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.registry import NoArgs
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.types import Pod
from kubesched.plugins import image_locality
from tests.builders import NodeBuilder, make_node, make_pod
from tests.unit.plugins.fakes import FakeHandle

MB = 1024 * 1024


def cluster(*nodes: NodeBuilder) -> Snapshot:
    """A snapshot whose image states count nodes per image, as the cache does."""
    cache = Cache()
    for n in nodes:
        cache.add_node(n.node())
    return cache.update_snapshot()


def scores(snap: Snapshot, pod: Pod) -> dict[str, int]:
    pl = image_locality.new(NoArgs(), FakeHandle(snap))
    state = CycleState()
    out = {}
    for ni in snap.node_infos:
        s, st = pl.score(state, pod, ni)
        assert st is None
        out[ni.name] = s
    rows = np.arange(len(snap), dtype=np.intp)
    vec = pl.score_vector(state, pod, snap, rows)
    assert vec is not None
    assert dict(zip([ni.name for ni in snap.node_infos], vec.tolist(), strict=True)) == out
    return out


def pod_with(*images: str, init: tuple[str, ...] = (), volumes: tuple[str, ...] = ()) -> Pod:
    b = make_pod("p").image(images[0])
    for img in images[1:]:
        b.container(img)
    for i, ref in enumerate(volumes):
        b.volume(f"v{i}", image={"reference": ref, "pullPolicy": "IfNotPresent"})
    obj: dict[str, Any] = b.obj()
    if init:
        obj["spec"]["initContainers"] = [
            {"name": f"i{i}", "image": img} for i, img in enumerate(init)
        ]
    return Pod(obj)


@pytest.mark.parametrize(
    ("nodes", "pod", "expected"),
    [
        pytest.param(
            [
                make_node("n1")
                .image("gcr.io/40:latest", 40 * MB)
                .image("gcr.io/300:latest", 300 * MB),
                make_node("n2").image("gcr.io/300:latest", 300 * MB),
            ],
            pod_with("gcr.io/40", "gcr.io/300"),
            # n1: 40Mi*1/2 + 300Mi*2/2 = 320Mi -> 100*297/1977 = 15
            # n2: 300Mi -> 100*277/1977 = 14
            {"n1": 15, "n2": 14},
            id="two-containers-spread",
        ),
        pytest.param(
            [make_node("n1").image("small:1", 10 * MB)],
            pod_with("small:1"),
            {"n1": 0},
            id="below-min-threshold",
        ),
        pytest.param(
            [make_node("n1").image("huge:1", 3000 * MB)],
            pod_with("huge:1"),
            {"n1": 100},
            id="clamped-to-max-threshold",
        ),
        pytest.param(
            [make_node("n1").image("app:1", 500 * MB), make_node("n2")],
            pod_with("app:1"),
            # 500Mi*1/2 = 250Mi -> 100*227/977 = 23
            {"n1": 23, "n2": 0},
            id="one-of-two-nodes",
        ),
        pytest.param(
            [make_node("n1").image("big:latest", 500 * MB)],
            pod_with("pause", init=("big",)),
            # init image counts; 2 containers: 100*(500-23)/(2000-23) = 24
            {"n1": 24},
            id="init-container-image",
        ),
        pytest.param(
            [make_node(f"n{i}").image("img:v", 250 * MB) for i in (1, 2)] + [make_node("n3")],
            pod_with("img:v"),
            # int(262144000 * (2/3)) = 174762666 -> 100*(174762666-24117248)//(1024458752) = 14
            {"n1": 14, "n2": 14, "n3": 0},
            id="float-spread-truncated",
        ),
        pytest.param(
            [make_node("n1").image("nginx:latest", 500 * MB)],
            pod_with("nginx"),
            {"n1": 48},  # 100*(500-23)//(1000-23)
            id="untagged-means-latest",
        ),
        pytest.param(
            [make_node("n1").image("docker.io/library/nginx:latest", 500 * MB)],
            pod_with("nginx"),
            {"n1": 0},
            id="registry-not-expanded-like-kube",
        ),
        pytest.param(
            [make_node("n1").image("localhost:5000/app:latest", 500 * MB)],
            pod_with("localhost:5000/app"),
            {"n1": 48},  # 100*(500-23)//(1000-23)
            id="registry-port-is-not-a-tag",
        ),
        pytest.param(
            [make_node("n1").image("nginx:1.25", 500 * MB)],
            pod_with("nginx"),
            {"n1": 0},
            id="other-tag-does-not-match",
        ),
        # v1.37: image volumes count as images of the pod.
        pytest.param(
            [make_node("n1").image("model:v1", 500 * MB)],
            pod_with("pause", volumes=("model:v1",)),
            {"n1": 24},  # 2 images: 100*(500-23)//(2000-23)
            id="image-volume-on-node",
        ),
        pytest.param(
            [make_node("n1").image("app:1", 500 * MB)],
            pod_with("app:1", volumes=("model",)),
            {"n1": 24},  # the absent volume image still raises the threshold to 2000Mi
            id="image-volume-absent-counts-in-threshold",
        ),
        pytest.param(
            [make_node("n1").image("model:latest", 500 * MB)],
            pod_with("pause", volumes=("model",)),
            {"n1": 24},
            id="image-volume-reference-normalized",
        ),
    ],
)
def test_score(nodes: list[NodeBuilder], pod: Pod, expected: dict[str, int]) -> None:
    assert scores(cluster(*nodes), pod) == expected


@pytest.mark.parametrize(
    ("name", "normalized"),
    [
        ("nginx", "nginx:latest"),
        ("nginx:1.25", "nginx:1.25"),
        ("gcr.io/a/b", "gcr.io/a/b:latest"),
        ("localhost:5000/a", "localhost:5000/a:latest"),
        ("a@sha256:0123", "a@sha256:0123"),
    ],
)
def test_normalized_image_name(name: str, normalized: str) -> None:
    assert image_locality.normalized_image_name(name) == normalized


def test_calculate_priority_bounds() -> None:
    assert image_locality.calculate_priority(0, 1) == 0
    assert image_locality.calculate_priority(23 * MB, 1) == 0
    assert image_locality.calculate_priority(1000 * MB, 1) == 100
    assert image_locality.calculate_priority(1000 * MB, 2) == 100 * 977 // 1977
