"""A ``Scheduled`` Event, as a bind records it, for the tests of the Event writers."""

from __future__ import annotations

from kubesched.cluster.kube import KubeCluster
from kubesched.framework.types import Pod


async def record_scheduled(cluster: KubeCluster, pod: Pod) -> None:
    """Queue one ``Scheduled`` Event about ``pod`` (message ``m``)."""
    await cluster.record_event(
        pod,
        event_type="Normal",
        reason="Scheduled",
        action="Binding",
        message="m",
        reporting_controller="kubesched",
    )
