"""Pod scheduling signatures (KEP-5598, opportunistic batching).

Two pods with the same signature get the same Filter verdict and the same raw Score on
every node in the same state. Each Filter/Score plugin says what it reads from a pod by
returning sign fragments from ``sign_pod`` (a key from the table below and a JSON-able
value); a plugin that cannot promise this for a pod returns an Unschedulable status and
the pod is unbatchable. A profile with a PreFilter/Filter/PreScore/Score plugin that has
no ``sign_pod`` (an out-of-tree plugin) signs no pod at all.

The keys are kube-scheduler's (``k8s.io/kube-scheduler/framework/signers.go``), so
fragments that several plugins share (tolerations, volumes, resources) count once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import orjson

from kubesched.framework.status import Code, Status
from kubesched.framework.types import Pod

if TYPE_CHECKING:
    from kubesched.framework.interface import Plugin
    from kubesched.framework.runtime import PluginChain

__all__ = [
    "HOST_PORTS",
    "IMAGE_NAMES",
    "LABELS",
    "NODE_AFFINITY",
    "NODE_NAME",
    "NODE_SELECTOR",
    "RESOURCES",
    "SCHEDULER_NAME",
    "TOLERATIONS",
    "VOLUMES",
    "PodSigner",
    "SignFragment",
    "SignPlugin",
    "Signer",
    "host_ports_fragment",
    "image_names_fragment",
    "node_affinity_fragments",
    "resources_fragment",
    "signing_plugins",
    "tolerations_fragment",
    "unsignable",
    "volumes_fragment",
]

log = logging.getLogger("kubesched.framework.signature")

SCHEDULER_NAME = "v1.Pod.Spec.SchedulerName"
NODE_NAME = "v1.Pod.Spec.NodeName"
NODE_AFFINITY = "v1.Pod.Spec.Affinity.NodeAffinity"
NODE_SELECTOR = "v1.Pod.Spec.Affinity.NodeSelector"
HOST_PORTS = "v1.Pod.Spec.HostPorts()"
RESOURCES = "v1.Pod.Spec.ContainerRequestsAndOverheads()"
TOLERATIONS = "v1.Pod.Spec.Tolerations"
VOLUMES = "v1.Pod.Spec.Volumes.NonSyntheticSources()"
IMAGE_NAMES = "v1.Pod.Spec.CanonicalImageNames()"
LABELS = "v1.Pod.Labels"

SignFragment = tuple[str, object]
"""(key, JSON-able value; :meth:`PodSigner.sign` refuses a pod whose fragments are not)."""

Signer = Callable[[Pod], tuple[list[SignFragment], Status | None]]
"""A plugin's ``sign_pod``: fragments and None, or a non-success status (unbatchable)."""

_POD_LOCAL_VOLUMES = frozenset({"configMap", "secret", "emptyDir", "downwardAPI", "projected"})
"""Volume sources no scheduler plugin reads: left out of the signature, or no two pods
of a Deployment (each with its own token volume) would ever share one."""

_CLAIM_VOLUMES = frozenset({"persistentVolumeClaim", "ephemeral"})
"""Sources whose claim a placement binds (VolumeBinding's Reserve): the next pod with the
same claim then fits elsewhere than before, so such pods are never batched (kube-scheduler
signs them; kubesched is stricter)."""


@runtime_checkable
class SignPlugin(Protocol):
    name: str

    def sign_pod(self, pod: Pod) -> tuple[list[SignFragment], Status | None]:
        """Fragments and None (signed), or a non-success status: the pod is unbatchable."""
        ...


def unsignable(reason: str) -> tuple[list[SignFragment], Status | None]:
    return [], Status.unschedulable(reason)


# -- shared signers ---------------------------------------------------------------------------
def tolerations_fragment(pod: Pod) -> SignFragment:
    tols = pod.spec.get("tolerations") or []
    return TOLERATIONS, sorted(orjson.dumps(t, option=orjson.OPT_SORT_KEYS).decode() for t in tols)


def node_affinity_fragments(pod: Pod) -> list[SignFragment]:
    return [
        (NODE_AFFINITY, pod.affinity.get("nodeAffinity")),
        (NODE_SELECTOR, pod.node_selector),
    ]


def host_ports_fragment(pod: Pod) -> SignFragment:
    return HOST_PORTS, sorted(set(pod.host_ports))


def resources_fragment(pod: Pod) -> SignFragment:
    r = pod.requests
    return RESOURCES, (
        r.milli_cpu,
        r.memory,
        r.ephemeral_storage,
        sorted(r.scalar.items()),
        pod.non_zero_cpu,
        pod.non_zero_memory,
    )


def image_names_fragment(pod: Pod) -> SignFragment:
    return IMAGE_NAMES, sorted(set(pod.images))


def volumes_fragment(pod: Pod) -> SignFragment | None:
    """The volumes plugins read, or None when the pod has a claim (unbatchable)."""
    out: list[str] = []
    for vol in pod.spec.get("volumes") or ():
        sources = [k for k in vol if k != "name"]
        if any(k in _CLAIM_VOLUMES for k in sources):
            return None
        if all(k in _POD_LOCAL_VOLUMES for k in sources):
            continue
        out.append(orjson.dumps({k: vol[k] for k in sources}, option=orjson.OPT_SORT_KEYS).decode())
    return VOLUMES, sorted(out)


# -- the framework's signer ---------------------------------------------------------------------
class PodSigner:
    """One profile's signer: the plugins that sign, or why the profile signs nothing.

    ``lookup`` gives a plugin's signer (a function of the pod) or None if it has none."""

    def __init__(
        self,
        plugins: Iterable[Plugin],
        lookup: Callable[[Plugin], Signer | None],
    ) -> None:
        self.signers: list[tuple[str, Signer]]
        self.signers = []
        self.unsupported: list[str] = []
        seen: set[str] = set()
        for p in plugins:
            if p.name in seen:
                continue
            seen.add(p.name)
            signer = lookup(p)
            if signer is not None:
                self.signers.append((p.name, signer))
            else:
                self.unsupported.append(p.name)
        shared: set[int] = set()  # by identity: a plugin's bound method need not hash
        self._calls: list[tuple[str, Signer]] = []
        """:attr:`signers` with a signer several plugins share (the same function, the
        same fragments) called once."""
        for name, signer in self.signers:
            if id(signer) not in shared:
                shared.add(id(signer))
                self._calls.append((name, signer))
        if self.unsupported:
            log.info(
                "opportunistic batching off for this profile: plugins %s cannot sign pods",
                sorted(self.unsupported),
            )

    @property
    def enabled(self) -> bool:
        return not self.unsupported

    def sign(self, pod: Pod) -> bytes | None:
        """The pod's signature, or None when it is unbatchable."""
        if self.unsupported or pod.spec.get("resourceClaims"):
            return None
        frags: dict[str, object] = {SCHEDULER_NAME: pod.scheduler_name}
        for name, signer in self._calls:
            try:
                fragments, status = signer(pod)
            except Exception:
                log.exception("plugin %s failed to sign pod %s", name, pod.key)
                return None
            if status is not None and status.code != Code.SUCCESS:
                return None
            for key, value in fragments:
                frags[key] = value
        try:
            return orjson.dumps(frags, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
        except TypeError:
            log.exception("pod %s: signature fragments are not JSON-able", pod.key)
            return None


def signing_plugins(chain: PluginChain) -> Sequence[Plugin]:
    """The plugins of a chain whose answers a signature must cover."""
    return [
        *chain.pre_filter,
        *chain.filter,
        *chain.pre_score,
        *(p for p, _ in chain.score),
    ]
