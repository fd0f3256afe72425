"""One node during preemption's what-if (SelectVictimsOnNode).

kube-scheduler runs Filter on a candidate node twice per question: with the pods nominated
to it at equal or higher priority added (they will land there), then without them (they may
not). Its dry run asks that question once for the node with every lower-priority pod removed
and once more per pod it tries to reprieve. Adding the nominated pods afresh each time (a
clone of the node and the cycle state, every pod's PreFilter AddPod) cost more than the
Filter calls themselves once many preemptors wait nominated for their victims to go.

``DryRunNode`` keeps the second view alive instead: built at the first question from the node
as it is then (exactly what a fresh addition would build), and kept in step by applying every
later removal and reprieve to both views. The answers are the same; the nominated pods are
added once per node.

Filter plugins that read only the Node object (``filter_reads_node_only``: NodeName,
NodeUnschedulable, TaintToleration, NodeAffinity) answer alike whatever the dry run removes
or gives back: once the node passed the whole Filter, they are not asked again there.
"""

from __future__ import annotations

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import Handle
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.status import Status
from kubesched.framework.types import Pod


class DryRunNode:
    """``node_info`` and ``state`` are the dry run's own clones; they are changed in place."""

    __slots__ = (
        "_exact",
        "_h",
        "_n_info",
        "_n_state",
        "_pod",
        "_skip",
        "_started",
        "node_info",
        "state",
    )

    def __init__(self, handle: Handle, state: CycleState, pod: Pod, node_info: NodeInfo) -> None:
        self._h = handle
        self._pod = pod
        self.state = state
        self.node_info = node_info
        self._n_state: CycleState | None = None
        self._n_info: NodeInfo | None = None
        self._started = False
        self._skip: frozenset[str] | None = None
        """Once the node passed the whole Filter: PreFilter's skip set and the node-only
        Filter plugins (None: run all but PreFilter's skip set)."""
        # False once the kept view cannot be trusted (a PreFilter extension failed on it):
        # from then on every question is answered the long way, as the framework does.
        self._exact = True

    def remove(self, p: Pod) -> Status | None:
        self.node_info.remove_pod(p)
        s = self._h.run_pre_filter_extension_remove_pod(self.state, self._pod, p, self.node_info)
        if s is None and self._n_info is not None and self._n_state is not None:
            self._n_info.remove_pod(p)
            if self._h.run_pre_filter_extension_remove_pod(
                self._n_state, self._pod, p, self._n_info
            ):
                self._drop_view()
        return s

    def add(self, p: Pod) -> Status | None:
        self.node_info.add_pod(p)
        s = self._h.run_pre_filter_extension_add_pod(self.state, self._pod, p, self.node_info)
        if s is None and self._n_info is not None and self._n_state is not None:
            self._n_info.add_pod(p)
            if self._h.run_pre_filter_extension_add_pod(self._n_state, self._pod, p, self._n_info):
                self._drop_view()
        return s

    def filter(self) -> Status | None:
        """Does the pod fit now? kube-scheduler's two passes (with, then without, the
        nominated pods); the first pass's failure is the answer."""
        h = self._h
        if not self._started:
            self._start()
        if not self._exact:
            return h.run_filter_plugins_with_nominated_pods(self.state, self._pod, self.node_info)
        skip = self._skip
        if self._n_info is None or self._n_state is None:
            status = h.run_filter(self.state, self._pod, self.node_info, skip)
        else:
            status = h.run_filter(self._n_state, self._pod, self._n_info, skip)
            if status is None:
                status = h.run_filter(self.state, self._pod, self.node_info, skip)
        if status is None and skip is None:
            self._skip = h.skip_with_node_filters(self.state)
        return status

    def _start(self) -> None:
        self._started = True
        added, state, info, error = self._h.add_nominated_pods(
            self.state, self._pod, self.node_info
        )
        if added:
            self._n_state, self._n_info = state, info
        elif error is not None:
            # An AddPod failed: the long way asks again each time and answers that Error.
            self._exact = False

    def _drop_view(self) -> None:
        self._n_state = self._n_info = None
        self._exact = False
