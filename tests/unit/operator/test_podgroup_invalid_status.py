"""An invalid PodGroup spec (one the CRD schema let through) is a status and an Event, not
silence: Pending, PodGroupScheduled=False InvalidSpec, the message naming the field."""

from __future__ import annotations

import asyncio

import pytest

from tests.unit.operator.test_podgroup_handlers import Setup, group, pod

pytestmark = pytest.mark.looptime


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"minMember": 0}, "spec.minMember"),
        ({"minMember": 2, "scheduleTimeoutSeconds": -5}, "spec.scheduleTimeoutSeconds"),
        ({"minMember": 2, "minResources": {"cpu": "1.2.3"}}, "spec.minResources"),
        ({"minMember": 2, "unknownKey": 1}, "spec.unknownKey"),
    ],
)
async def test_an_invalid_spec_is_reported_on_status_and_as_a_warning(
    spec: dict[str, object], field: str
) -> None:
    s = Setup()
    g = group()
    g["spec"] = spec
    s.put("PodGroup", g)
    s.put("Pod", pod("a"))
    await asyncio.sleep(1)
    ((_, status),) = s.api.patches
    (cond,) = status["conditions"]
    assert status["phase"] == "Pending"
    assert (cond["status"], cond["reason"]) == ("False", "InvalidSpec")
    assert cond["message"].startswith(field) and status["message"] == cond["message"]
    assert status["observedGeneration"] == cond["observedGeneration"] == 1
    (event,) = s.api.events
    assert (event["reason"], event["event_type"]) == ("InvalidSpec", "Warning")
    assert field in event["message"]

    s.api.put("PodGroup", {**g, "status": status})  # the watch brings the write back
    assert await s.writer.sync("ns/g") is False  # nothing changed: nothing written
