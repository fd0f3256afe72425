"""SchedulingGates: a pod that carries ``spec.schedulingGates`` is not scheduled.

PreEnqueue holds such a pod in the gated pool with kube-scheduler's message
``waiting for scheduling gates: [gate1 gate2]`` (Go's ``%v`` of the gate names); the
pod is tried as soon as an update removes its last gate. The queue re-runs PreEnqueue on
every update of a gated pod; the registered event (Pod/UpdatePodSchedulingGatesEliminated
with a hint that checks the updated pod is this pod and has no gates left) is what
kube-scheduler registers, for the queue's event-driven path.
"""

from __future__ import annotations

from kubesched.framework.interface import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EnqueueExtensions,
    EventResource,
    Handle,
    PreEnqueuePlugin,
)
from kubesched.framework.registry import NoArgs
from kubesched.framework.status import Status
from kubesched.framework.types import Pod

__all__ = ["NAME", "SchedulingGates", "gates_message", "new"]

NAME = "SchedulingGates"


def gates_message(gates: list[str]) -> str:
    """``waiting for scheduling gates: [a b]``, as kube-scheduler formats it."""
    return f"waiting for scheduling gates: [{' '.join(gates)}]"


def _gates_eliminated(pod: Pod, old: object, new: object) -> bool:
    """Queueing hint: the update is of this very pod and it has no gates left."""
    if not isinstance(new, Pod) or new.uid != pod.uid:
        return False
    return not new.scheduling_gates


class SchedulingGates(PreEnqueuePlugin, EnqueueExtensions):
    name = NAME

    def pre_enqueue(self, pod: Pod) -> Status | None:
        if not pod.scheduling_gates:
            return None
        return Status.unresolvable(gates_message(pod.scheduling_gates), plugin=NAME)

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED),
                _gates_eliminated,
            )
        ]


def new(args: NoArgs, handle: Handle) -> SchedulingGates:
    return SchedulingGates()
