"""DefaultBinder: binds the pod by creating its ``pods/binding`` subresource."""

from __future__ import annotations

from kubesched.framework.cluster_port import ClusterError
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import BindPlugin, Handle
from kubesched.framework.registry import NoArgs
from kubesched.framework.status import Code, Status
from kubesched.framework.types import Pod

__all__ = ["NAME", "DefaultBinder", "new"]

NAME = "DefaultBinder"


class DefaultBinder(BindPlugin):
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self._handle = handle

    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        """Any failure of the write (pod gone, already bound, API error) is an Error status;
        the scheduler unreserves, forgets the assumed pod and retries with backoff."""
        try:
            await self._handle.cluster.bind(pod, node_name)
        except ClusterError as e:
            # the API server's message, as kube's client-go error reads (``pods "p" not
            # found``), the request's method and path left to the logs
            return Status(Code.ERROR, e.server_message or str(e), plugin=NAME, error=e)
        except Exception as e:
            return Status.as_error(e, plugin=NAME)
        return None


def new(args: NoArgs, handle: Handle) -> DefaultBinder:
    return DefaultBinder(handle)
