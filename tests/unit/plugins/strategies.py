"""Hypothesis strategies: random nodes (allocatable, pods, taints, cordon, scalar
resources) and random pods, for the vector-equals-scalar property tests."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from hypothesis import strategies as st

from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.types import Pod
from tests.builders import make_node, make_pod

SCALARS = ("example.com/gpu", "vendor.io/fpga", "hugepages-2Mi")
TAINT_KEYS = ("a", "b", "node.kubernetes.io/unschedulable")
TAINT_VALUES = ("", "x", "y")
EFFECTS = ("NoSchedule", "NoExecute", "PreferNoSchedule")
GI = 1024**3

_counter = iter(range(10**9))


@st.composite
def resource_lists(draw: st.DrawFn, *, scale: int = 1) -> dict[str, str]:
    """Requests (``scale`` 1) or allocatable (``scale`` 2), on a coarse grid so that exact
    fits, exact halves and full nodes happen often."""
    out: dict[str, str] = {}
    if draw(st.integers(0, 3)):
        out["cpu"] = f"{draw(st.integers(0, 8 * scale)) * 500}m"
    if draw(st.integers(0, 3)):
        out["memory"] = str(draw(st.integers(0, 8 * scale)) * GI)
    if draw(st.booleans()):
        out["ephemeral-storage"] = str(draw(st.integers(0, 4 * scale)) * GI)
    for name in SCALARS:
        if draw(st.integers(0, 2)) == 0:
            out[name] = str(draw(st.integers(0, 3 * scale)))
    return out


@st.composite
def tolerations(draw: st.DrawFn) -> list[dict[str, str]]:
    out = []
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(("Equal", "Exists")))
        t = {
            "key": draw(st.sampled_from(("", *TAINT_KEYS))),
            "operator": op,
            "effect": draw(st.sampled_from(("", *EFFECTS))),
        }
        if op == "Equal":
            if not t["key"]:
                t["key"] = "a"
            t["value"] = draw(st.sampled_from(TAINT_VALUES))
        out.append({k: v for k, v in t.items() if v})
    return out


@st.composite
def pods(draw: st.DrawFn, node_names: tuple[str, ...] = ()) -> Pod:
    b = make_pod(f"p{next(_counter)}")
    reqs = draw(resource_lists())
    if reqs:
        b.req(**reqs)
    for t in draw(tolerations()):
        b.toleration(**{k: v for k, v in t.items()})
    if node_names and draw(st.integers(0, 3)) == 0:
        b.spec(nodeName=draw(st.sampled_from((*node_names, "elsewhere"))))
    return b.pod()


@st.composite
def node_infos(draw: st.DrawFn, name: str) -> NodeInfo:
    b = make_node(name)
    alloc: dict[str, Any] = draw(resource_lists(scale=2))
    assigned = [draw(pods()) for _ in range(draw(st.integers(0, 3)))]
    # over-committed (fewer allowed than assigned) included; never negative (the API
    # server refuses a negative allocatable, and so do the views)
    alloc["pods"] = str(max(0, len(assigned) + draw(st.integers(-1, 2))))
    b.alloc(**alloc)
    for _ in range(draw(st.integers(0, 3))):
        b.taint(
            draw(st.sampled_from(TAINT_KEYS)),
            draw(st.sampled_from(TAINT_VALUES)),
            draw(st.sampled_from(EFFECTS)),
        )
    if draw(st.integers(0, 3)) == 0:
        b.unschedulable()
    return b.info(*assigned)


@st.composite
def snapshots(draw: st.DrawFn) -> Snapshot:
    n = draw(st.integers(1, 8))
    return Snapshot([draw(node_infos(f"n{i}")) for i in range(n)])


@st.composite
def cases(draw: st.DrawFn) -> tuple[Snapshot, Pod]:
    snap = draw(snapshots())
    pod = draw(pods(tuple(ni.name for ni in snap.node_infos)))
    return snap, pod


def draw_rows(data: st.DataObject, n: int) -> npt.NDArray[np.intp]:
    """A non-empty subset of the snapshot's rows, in random order (what Score sees)."""
    perm = data.draw(st.permutations(range(n)))
    k = data.draw(st.integers(1, n))
    return np.array(perm[:k], dtype=np.intp)
