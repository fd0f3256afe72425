"""Assertions shared by snapshot and cache tests."""

from __future__ import annotations

import numpy as np

from kubesched.framework.snapshot import Snapshot

COLUMNS = (
    "alloc_cpu",
    "alloc_mem",
    "alloc_eph",
    "alloc_pods",
    "req_cpu",
    "req_mem",
    "req_eph",
    "req_pods",
    "nz_cpu",
    "nz_mem",
    "unschedulable",
    "hard_taints",
    "soft_taints",
)


def assert_same_as_fresh(snap: Snapshot) -> None:
    """``snap`` (maintained incrementally) holds what a snapshot built from scratch over
    the same NodeInfos, in the same order, would hold."""
    infos = list(snap.node_infos)
    fresh = Snapshot(infos)
    assert [ni.name for ni in snap.node_infos] == [ni.name for ni in fresh.node_infos]
    for col in COLUMNS:
        np.testing.assert_array_equal(getattr(snap, col), getattr(fresh, col), err_msg=col)
    for name in set(snap.scalar_alloc) | set(fresh.scalar_alloc):
        np.testing.assert_array_equal(
            snap.scalar_allocatable(name), fresh.scalar_allocatable(name), err_msg=name
        )
    for name in set(snap.scalar_req) | set(fresh.scalar_req):
        np.testing.assert_array_equal(
            snap.scalar_requested(name), fresh.scalar_requested(name), err_msg=name
        )
    assert [ni.index for ni in infos] == list(range(len(infos)))
