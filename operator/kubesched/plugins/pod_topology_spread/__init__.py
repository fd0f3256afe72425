"""PodTopologySpread: spread matching pods evenly over topology domains.

kube-scheduler v1.37 semantics (pkg/scheduler/framework/plugins/podtopologyspread):

- PreFilter counts, per ``DoNotSchedule`` constraint, the pods in the pod's namespace
  (not terminating) that the constraint's selector matches, per topology domain, over
  the nodes that carry every constraint's topology key and that the constraint's
  ``nodeAffinityPolicy`` (Honor by default: the pod's nodeSelector and required node
  affinity) and ``nodeTaintsPolicy`` (Ignore by default) let count. ``matchLabelKeys``
  values from the pod's labels are ANDed into the selector. No hard constraint: Skip.
- Filter: a node without a topology key is UnschedulableAndUnresolvable ("node(s)
  didn't match pod topology spread constraints (missing required label)"); a node
  where ``matchNum + selfMatch - minMatchNum > maxSkew`` is Unschedulable ("node(s)
  didn't match pod topology spread constraints"). The global minimum is 0 while fewer
  eligible domains than ``minDomains`` exist. AddPod/RemovePod keep the counts right
  for nominated pods and preemption victims (kube's two critical paths included).
- PreScore/Score/NormalizeScore for ``ScheduleAnyway`` constraints: see ``scoring``.
- Pods without constraints get the default ones (Args: System = hostname maxSkew 3 and
  zone maxSkew 5, ScheduleAnyway; or List = ``defaultConstraints``) with a selector
  from the Services selecting the pod and its controlling ReplicationController,
  ReplicaSet or StatefulSet (read from the object store), if that selector is not empty.
- Requeued by assigned pods added/deleted/relabelled in the pod's namespace and by
  nodes added/deleted/relabelled/retainted, with kube's queueing hints.

Differences, on purpose: per-node pod counts and node label domains are memoised
across cycles and refreshed only for nodes whose NodeInfo changed (``rows``), and
Filter/Score also run vectorised over the snapshot; results are the same. The
initial critical paths are the two smallest domains (kube fills them in map order,
which only matters to its approximation after several AddPod calls on one state).
``math.log`` and sums are IEEE float64 as in Go; a score landing within an ulp of .5
could in theory round differently if Go's assembly log differs by an ulp.
"""

from __future__ import annotations

from kubesched.framework.interface import Handle
from kubesched.plugins.pod_topology_spread.args import Args
from kubesched.plugins.pod_topology_spread.plugin import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
    NAME,
    PodTopologySpread,
)

__all__ = [
    "ERR_REASON_CONSTRAINTS_NOT_MATCH",
    "ERR_REASON_NODE_LABEL_NOT_MATCH",
    "NAME",
    "Args",
    "PodTopologySpread",
    "new",
]


def new(args: Args, handle: Handle) -> PodTopologySpread:
    return PodTopologySpread(args, handle)
