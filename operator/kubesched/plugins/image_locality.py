"""ImageLocality: prefer nodes that already hold the pod's container images.

Score (kube-scheduler's formula, integer results as Go computes them):

- each image of the pod's init containers, containers and (since v1.37) image volumes
  (``spec.volumes[].image.reference``) present on the node adds
  ``int(size * num_nodes_with_image / total_nodes)`` (a float product truncated, as Go's
  ``int64(float64(size) * spread)``), so images on many nodes count less
  (the "node heating" damper). ``size`` is the image's, not the node's: as in
  kube-scheduler's cache, the size the first node holding the image reported, for every
  node (the cache, ``_add_images``);
- the sum is clamped to ``[23 MiB, 1000 MiB * number_of_images]`` (init and regular
  containers and image volumes counted) and scaled linearly to 0..100, truncating.

Image names are matched as kube-scheduler matches them: a name without a tag or digest
gets ``:latest`` (``nginx`` == ``nginx:latest``), and the result is looked up verbatim
among the names the node reports. Like kube-scheduler, registry defaults are *not*
expanded: ``nginx`` does not match a node reporting only
``docker.io/library/nginx:latest`` (kube's own TODO); we keep that so placements
match kube-scheduler's.

No NormalizeScore (scores are already 0..100); kube-scheduler's default weight is 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from kubesched.framework.cycle_state import CycleState, StateKey
from kubesched.framework.interface import MAX_NODE_SCORE, Handle, ScorePlugin, VectorScorePlugin
from kubesched.framework.nodeinfo import ImageState, NodeInfo
from kubesched.framework.registry import NoArgs
from kubesched.framework.status import Status
from kubesched.framework.types import Pod

if TYPE_CHECKING:
    import numpy.typing as npt

    from kubesched.framework.snapshot import Snapshot

__all__ = [
    "MAX_CONTAINER_THRESHOLD",
    "MIN_THRESHOLD",
    "NAME",
    "ImageLocality",
    "calculate_priority",
    "new",
    "normalized_image_name",
    "scaled_image_score",
]

NAME = "ImageLocality"

MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB

_STATE_KEY: StateKey[tuple[list[str], int]] = StateKey("Images" + NAME)


def normalized_image_name(name: str) -> str:
    """Append ``:latest`` when the name has no tag after its last ``/`` (and no digest)."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


def scaled_image_score(state: ImageState, total_nodes: int) -> int:
    spread = float(state.num_nodes) / float(total_nodes)
    return int(float(state.size) * spread)


def calculate_priority(sum_scores: int, num_containers: int) -> int:
    max_threshold = MAX_CONTAINER_THRESHOLD * num_containers
    if sum_scores < MIN_THRESHOLD:
        sum_scores = MIN_THRESHOLD
    elif sum_scores > max_threshold:
        sum_scores = max_threshold
    return MAX_NODE_SCORE * (sum_scores - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)


def pod_images(pod: Pod) -> tuple[list[str], int]:
    """(normalized image names of init containers, containers, then image volumes; the
    number of them)."""
    names: list[str] = []
    count = 0
    for key in ("initContainers", "containers"):
        for c in pod.spec.get(key) or ():
            count += 1
            img = c.get("image") if isinstance(c, Mapping) else None
            names.append(normalized_image_name(img if isinstance(img, str) else ""))
    for v in pod.spec.get("volumes") or ():
        source = v.get("image") if isinstance(v, Mapping) else None
        if not isinstance(source, Mapping):
            continue
        count += 1
        ref = source.get("reference")
        names.append(normalized_image_name(ref if isinstance(ref, str) else ""))
    return names, count


def sum_image_scores(
    image_states: Mapping[str, ImageState], images: list[str], total_nodes: int
) -> int:
    total = 0
    for img in images:
        st = image_states.get(img)
        if st is not None:
            total += scaled_image_score(st, total_nodes)
    return total


class ImageLocality(ScorePlugin, VectorScorePlugin):
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    def _images(self, state: CycleState, pod: Pod) -> tuple[list[str], int]:
        cached: tuple[list[str], int] | None = state.get(_STATE_KEY)
        if cached is None:
            cached = pod_images(pod)
            state.write(_STATE_KEY, cached)
        return cached

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        images, count = self._images(state, pod)
        total_nodes = len(self.handle.snapshot)
        if not node_info.image_states or count == 0 or total_nodes == 0:
            return 0, None
        s = sum_image_scores(node_info.image_states, images, total_nodes)
        return calculate_priority(s, count), None

    def score_vector(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.int64] | None:
        images, count = self._images(state, pod)
        out = np.zeros(len(rows), dtype=np.int64)
        total_nodes = len(snapshot)
        if count == 0 or total_nodes == 0:
            return out
        infos = snapshot.node_infos
        with_images = np.flatnonzero(snapshot.has_images[rows])
        for j in with_images.tolist():
            states: dict[str, Any] = infos[int(rows[j])].image_states
            out[j] = calculate_priority(sum_image_scores(states, images, total_nodes), count)
        return out

    def normalize_score(
        self, state: CycleState, pod: Pod, scores: npt.NDArray[np.int64]
    ) -> Status | None:
        return None


def new(args: NoArgs, handle: Handle) -> ImageLocality:
    return ImageLocality(handle)
