"""The one settings model of ``kubesched run``; CLI flags, environment and Helm values map
onto it thinly (``--lease-name`` -> ``lease_name`` <- ``KUBESCHED_LEASE_NAME``).

Each field's docstring gives the reason for its default. Precedence: an explicit value
(a CLI flag) over the environment over the default.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from kubesched.framework.labels import parse_label_selector

__all__ = ["ENV_PREFIX", "Settings", "default_namespace"]

ENV_PREFIX = "KUBESCHED_"
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def default_namespace(sa_file: Path = SERVICE_ACCOUNT_NAMESPACE) -> str:
    """``POD_NAMESPACE`` (the chart sets it through the downward API), else the service
    account's namespace file (any pod has it), else ``default`` (outside a cluster)."""
    ns = os.environ.get("POD_NAMESPACE", "").strip()
    if ns:
        return ns
    try:
        ns = sa_file.read_text().strip()
    except OSError:
        ns = ""
    return ns or "default"


def _loopback(address: str) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def _default_identity() -> str:
    # kube-scheduler's: hostname plus a random suffix, so two processes on one host
    # (tests, a restart racing the old process) never share an identity.
    return f"{socket.gethostname()}_{uuid.uuid4()}"


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    kubeconfig: str | None = None
    """A kubeconfig file. Unset: ``KUBECONFIG``, ``~/.kube/config``, then the in-cluster
    service account (the usual resolution, for Kopf's login and our client alike)."""

    scheduler_names: list[str] = Field(default_factory=lambda: ["kubesched"])
    """The ``schedulerName``s served, one default profile each. ``kubesched`` keeps us off
    ``default-scheduler``'s pods, so we can run beside kube-scheduler."""

    namespace: str = Field(default_factory=default_namespace)
    """Where the Lease lives: see :func:`default_namespace`."""

    leader_elect: bool = True
    """On, as in kube-scheduler: two replicas must never both schedule. Off for a single
    replica outside a cluster (development, tests)."""

    lease_name: str = "kubesched"
    """The coordination.k8s.io Lease; distinct from kube-scheduler's ``kube-scheduler``."""

    lease_duration: float = 15.0
    """kube-scheduler's ``--leader-elect-lease-duration``: how long a follower waits before
    taking over an unrenewed lease (failover time vs. tolerance of API hiccups)."""

    renew_deadline: float = 10.0
    """kube-scheduler's ``--leader-elect-renew-deadline``: the leader stops scheduling if it
    cannot renew for this long (must stay below ``lease_duration``)."""

    retry_period: float = 2.0
    """kube-scheduler's ``--leader-elect-retry-period``: between renewals and attempts."""

    identity: str = Field(default_factory=_default_identity)
    """This replica's name in the Lease; see ``_default_identity``."""

    delegate_auth: bool = False
    """Authenticate and authorize every request but the health endpoints (/metrics,
    /debug/..., /explain/..., /ui/...) through the API server, as kube-scheduler does: a
    TokenReview of the bearer token, then a SubjectAccessReview of ``get`` on the path
    (``nonResourceURLs`` RBAC rules; :mod:`kubesched.operator.delegated_auth`). Our own
    identity needs ``system:auth-delegator`` (the chart binds it). Off by default because
    it needs that binding; off, the server listens on localhost only, so a fresh
    ``kubesched run`` never shows the cluster's pods to whoever reaches the machine."""

    bind_address: str | None = None
    """Where every endpoint listens (one port). Unset: ``0.0.0.0`` with
    ``delegate_auth`` (the kubelet's probes and Prometheus reach the pod), else
    ``127.0.0.1``. A non-loopback address without ``delegate_auth`` is refused: it would
    serve every pod's explanation to anyone on the network."""

    port: int = Field(default=10251, ge=0, le=65535)
    """Plain HTTP (kube-scheduler's former insecure port). 0 picks a free port (tests)."""

    client_qps: float = 50.0
    """kube-scheduler's ``--kube-api-qps``: writes a second before the client waits. A
    value <= 0 lifts the limit (benchmarks)."""

    client_burst: int = Field(default=100, ge=1)
    """kube-scheduler's ``--kube-api-burst``: writes allowed at once above ``client_qps``."""

    request_timeout: float = Field(default=30.0, gt=0)
    """Per API write; a write that takes longer fails as a retryable error and the pod
    goes back to the queue with backoff."""

    shutdown_flush_seconds: float = Field(default=20.0, ge=0)
    """On SIGTERM, at most this long for the binds and pod status writes in flight and
    then the queued Events (one ``Scheduled`` per bind) to reach the API server before the
    process exits; what is left is logged and lost. A pod's default
    ``terminationGracePeriodSeconds`` is 30: 20 leaves the rest for closing connections
    before the kubelet's SIGKILL, and at the Event write rate of a loaded control plane
    (docs/benchmarks.md) it covers a backlog of thousands of Events. Raise the pod's
    grace period with it."""

    resync_seconds: float = Field(default=120.0, ge=0)
    """How often pods and nodes are listed to catch deletions a relisted watch never
    reports (Kopf relists after 410 Gone without DELETED events). 0 disables."""

    watch_server_timeout: int = Field(default=300, ge=1)
    """Asks the API server to end each watch after this long (whole seconds: the API
    refuses a fraction); Kopf resumes from the last resourceVersion."""

    watch_client_timeout: float = Field(default=330.0, gt=0)
    """The client gives up on a watch this long after it started, a little after the
    server should have ended it: the backstop for a connection nobody closes."""

    watch_engine: Literal["kopf", "direct"] = "direct"
    """How pods and nodes are watched. ``direct``: kubesched's own LIST + WATCH
    (``kubesched.cluster.informer``: orjson-decoded events straight into the store and the
    scheduler, bookmarks, relist with synthesized deletions after 410 Gone); ``kopf``:
    ``@kopf.on.event`` handlers, as every other kind. The default is ``direct`` because
    Kopf's per-event machinery was the largest single cost at a few hundred pods a second
    (docs/bench.md has the numbers for both); Kopf still watches every other kind and runs
    the SchedulingProfile/PodGroup handlers. Neither engine writes anything to pods."""

    seed: int | None = None
    """Seeds the generator of kube-scheduler's random choices: preemption's dry-run
    offset and ties between equally scored gang placements (ties between nodes are not
    random: kube-scheduler 1.37 takes its heap's root, see scheduler/select_host.py).
    Unset, as kube-scheduler: random. Set, a run is repeatable, and places pods as
    ``kubesched simulate --seed`` with the same value does for the same objects (the
    differential test checks that)."""

    opportunistic_batching: bool = True
    """kube-scheduler's ``OpportunisticBatching`` feature gate (beta, on since 1.35; it has
    no KubeSchedulerConfiguration field): a pod with the same scheduling signature as the
    pod just placed reuses its Filter and Score work (:mod:`kubesched.scheduler.batch`),
    with the placement a full cycle would make. ``KUBESCHED_OPPORTUNISTIC_BATCHING=false``
    turns it off, as ``--feature-gates=OpportunisticBatching=false`` does there."""

    profile_selector: str = ""
    """A label selector (``kubectl -l`` syntax, e.g. ``kubesched.dev/release=team-a``): the
    SchedulingProfiles this instance applies. SchedulingProfiles are cluster-scoped, so two
    installations must each select their own, or both would serve every profile's
    schedulerName and schedule the same pods. Empty (the default: one installation per
    cluster) selects every SchedulingProfile. The Helm chart sets it to its release's
    label."""

    @field_validator("profile_selector")
    @classmethod
    def _parse_selector(cls, v: str) -> str:
        parse_label_selector(v)  # raises ValueError naming the bad part
        return v.strip()

    @field_validator("scheduler_names", mode="before")
    @classmethod
    def _split(cls, v: Any) -> Any:
        if isinstance(v, str):
            return [s.strip() for s in v.split(",") if s.strip()]
        return v

    @model_validator(mode="after")
    def _check(self) -> Settings:
        if not self.scheduler_names:
            raise ValueError("scheduler_names: at least one")
        if self.leader_elect and self.lease_duration <= self.renew_deadline:
            raise ValueError("lease_duration must be greater than renew_deadline")
        # client-go's NewLeaderElector checks, here so that bad flags are bad input
        if self.leader_elect and self.renew_deadline <= 1.2 * self.retry_period:
            raise ValueError("renew_deadline must be greater than 1.2 * retry_period")
        if self.leader_elect and self.retry_period < 1:
            raise ValueError("retry_period must be at least 1 s")
        if not self.delegate_auth and not _loopback(self.listen_address):
            raise ValueError(
                f"bind_address {self.listen_address} without delegate_auth would serve "
                "/metrics, /debug and /explain (every pod) to anyone who reaches it: "
                "turn on delegate_auth or bind to 127.0.0.1"
            )
        return self

    @property
    def listen_address(self) -> str:
        """``bind_address``, or its default for ``delegate_auth`` (see there)."""
        if self.bind_address:
            return self.bind_address
        return "0.0.0.0" if self.delegate_auth else "127.0.0.1"

    @classmethod
    def load(
        cls, overrides: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None
    ) -> Settings:
        """Defaults, then ``KUBESCHED_<FIELD>`` from ``env`` (``os.environ``), then
        ``overrides`` (CLI flags that were given; None values are ignored)."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for name in cls.model_fields:
            raw = env.get(ENV_PREFIX + name.upper())
            if raw is not None:
                values[name] = raw
        if "leader_elect" in values:
            values["leader_elect"] = str(values["leader_elect"]).lower() in ("1", "true", "yes")
        values.update({k: v for k, v in (overrides or {}).items() if v is not None})
        return cls(**values)
