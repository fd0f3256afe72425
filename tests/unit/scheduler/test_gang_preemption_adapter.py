"""The gang preemption adapter's own rules (the victims are tested in
tests/unit/plugins/test_gang_preemption.py, the whole flow in
tests/integration/test_gang_preemption.py)."""

from __future__ import annotations

import pytest

from kubesched.api.gangs import GangAPI, GangSpec
from kubesched.framework.types import Pod
from kubesched.scheduler.gang_preemption import preemptor_priority
from tests.builders import make_pod


def spec(priority: int | None) -> GangSpec:
    return GangSpec(GangAPI.UPSTREAM, "scheduling.k8s.io/ns/g", "ns", "g", 2, priority=priority)


@pytest.mark.parametrize(
    ("gang", "members", "expected"),
    [
        (5, [100, 100], 5),  # the PodGroup's spec.priority decides
        (None, [100, 100], 100),
        (None, [100, 7], 7),  # the lowest member: never evicts what a member could not
        (None, [], 0),
    ],
    ids=["gang-priority", "members-agree", "lowest-member", "no-members"],
)
def test_preemptor_priority(gang: int | None, members: list[int], expected: int) -> None:
    pods = [Pod(make_pod(f"m{i}").priority(p).obj()) for i, p in enumerate(members)]
    assert preemptor_priority(spec(gang), pods) == expected
