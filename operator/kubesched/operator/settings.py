"""The one settings model of ``kubesched run``, and the one place a setting is defined.

Each field carries an :class:`Option`: its ``kubesched run`` flag and help, and its Helm
chart value (or why the chart has none). From that single definition come the CLI's
flags (:mod:`kubesched.cli.run` builds its parser from :func:`options`), the environment
names (:mod:`kubesched.operator.environ` reads ``KUBESCHED_<FIELD>`` onto each field) and
the chart checks (``tests/helm/test_chart_settings.py`` fails when ``values.yaml`` or
``deployment.yaml`` drift from it). Adding a setting is adding a field here (plus, for a chart value, its
line in the chart, which that test demands).

Each field's docstring gives the reason for its default. Precedence: an explicit value
(a CLI flag) over the environment over the default.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from kubesched.api.profile import SCHEDULER_NAME_PATTERN
from kubesched.framework.labels import parse_label_selector
from kubesched.operator.environ import ENV_PREFIX, NoDecode, read

__all__ = ["ENV_PREFIX", "Option", "Settings", "default_namespace", "env_name", "options"]

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


@dataclass(frozen=True)
class Option:
    """How one setting reaches the user: a ``kubesched run`` flag, and the chart.

    The flag's type follows the field's: a bool gets ``--x/--no-x``, a list is
    repeatable, a Literal lists its choices. ``chart`` is the ``values.yaml`` path the
    chart passes as the flag (``chart_env`` False) or as the ``KUBESCHED_*`` variable
    (``chart_env`` True); a setting without one says why in ``not_in_chart``."""

    flag: str
    help: str
    metavar: str | None = None
    duration: bool = False
    """The flag takes kube-scheduler's durations (``15s``, ``500ms``, ``1m``)."""
    chart: str | None = None
    chart_env: bool = False
    not_in_chart: str = ""

    def __post_init__(self) -> None:
        if not self.flag.startswith("--"):
            raise ValueError(f"{self.flag}: a flag starts with --")
        if (self.chart is None) == (not self.not_in_chart):
            raise ValueError(f"{self.flag}: give exactly one of chart and not_in_chart")


EXTRA = "rarely changed: the chart's extraArgs or extraEnv set it"


def env_name(field: str) -> str:
    """The environment variable of a field (matched in any case: see
    :mod:`kubesched.operator.environ`)."""
    return ENV_PREFIX + field.upper()


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
    """The settings of ``kubesched run``. :meth:`load` reads them as the CLI does (the
    flags given, then the ``KUBESCHED_<FIELD>`` variables, then the defaults); the
    constructor takes its keyword arguments over the defaults and reads no environment."""

    # validate_default: the defaults pass the validators too (the profile selector's)
    model_config = ConfigDict(extra="forbid", validate_assignment=True, validate_default=True)

    kubeconfig: Annotated[
        str | None,
        Option(
            "--kubeconfig",
            "default: KUBECONFIG, ~/.kube/config, in-cluster",
            metavar="FILE",
            not_in_chart="in a cluster the pod's service account is used",
        ),
    ] = None
    """A kubeconfig file. Unset: ``KUBECONFIG``, ``~/.kube/config``, then the in-cluster
    service account (the usual resolution, for Kopf's login and our client alike)."""

    scheduler_names: Annotated[
        list[str],
        NoDecode,  # a comma-separated list, not JSON (see _split)
        Option(
            "--scheduler-name",
            "a schedulerName to serve (repeatable; the variable takes a comma-separated "
            "list; default: kubesched)",
            metavar="NAME",
            chart="schedulerName",
        ),
    ] = Field(default_factory=lambda: ["kubesched"])
    """The ``schedulerName``s served, one default profile each. ``kubesched`` keeps us off
    ``default-scheduler``'s pods, so we can run beside kube-scheduler."""

    namespace: Annotated[
        str,
        Option(
            "--namespace",
            "the Lease's namespace (default: POD_NAMESPACE)",
            metavar="NS",
            not_in_chart="the release's namespace, through POD_NAMESPACE (downward API)",
        ),
    ] = Field(default_factory=default_namespace)
    """Where the Lease lives: see :func:`default_namespace`."""

    leader_elect: Annotated[
        bool,
        Option(
            "--leader-elect",
            "elect a leader on a Lease before scheduling (default: on)",
            chart="leaderElection.enabled",
        ),
    ] = True
    """On, as in kube-scheduler: two replicas must never both schedule. Off for a single
    replica outside a cluster (development, tests)."""

    lease_name: Annotated[
        str,
        Option(
            "--lease-name",
            "default: kubesched",
            metavar="NAME",
            not_in_chart="derived from the release, so two releases never share a Lease",
        ),
    ] = "kubesched"
    """The coordination.k8s.io Lease; distinct from kube-scheduler's ``kube-scheduler``."""

    lease_duration: Annotated[
        float,
        Option(
            "--leader-elect-lease-duration",
            "kube-scheduler's (default: 15s)",
            metavar="DURATION",
            duration=True,
            chart="leaderElection.leaseDurationSeconds",
            chart_env=True,
        ),
    ] = 15.0
    """kube-scheduler's ``--leader-elect-lease-duration``: how long a follower waits before
    taking over an unrenewed lease (failover time vs. tolerance of API hiccups)."""

    renew_deadline: Annotated[
        float,
        Option(
            "--leader-elect-renew-deadline",
            "kube-scheduler's (default: 10s)",
            metavar="DURATION",
            duration=True,
            chart="leaderElection.renewDeadlineSeconds",
            chart_env=True,
        ),
    ] = 10.0
    """kube-scheduler's ``--leader-elect-renew-deadline``: the leader stops scheduling if it
    cannot renew for this long (must stay below ``lease_duration``)."""

    retry_period: Annotated[
        float,
        Option(
            "--leader-elect-retry-period",
            "kube-scheduler's (default: 2s)",
            metavar="DURATION",
            duration=True,
            chart="leaderElection.retryPeriodSeconds",
            chart_env=True,
        ),
    ] = 2.0
    """kube-scheduler's ``--leader-elect-retry-period``: between renewals and attempts."""

    identity: Annotated[
        str,
        Option(
            "--identity",
            "this replica's name in the Lease (default: the host name and a random suffix)",
            metavar="NAME",
            not_in_chart="the pod's name (downward API)",
        ),
    ] = Field(default_factory=_default_identity)
    """This replica's name in the Lease; see ``_default_identity``."""

    delegate_auth: Annotated[
        bool,
        Option(
            "--delegate-auth",
            "serve /metrics, /debug, /explain and /ui only to bearer tokens the API server "
            "authenticates (TokenReview) and authorizes to get the path "
            "(SubjectAccessReview, nonResourceURLs RBAC), as kube-scheduler does; "
            "/healthz, /readyz, /livez stay open (default: off, and the server listens on "
            "127.0.0.1 only)",
            not_in_chart="always on: the chart binds system:auth-delegator",
        ),
    ] = False
    """Authenticate and authorize every request but the health endpoints (/metrics,
    /debug/..., /explain/..., /ui/...) through the API server, as kube-scheduler does: a
    TokenReview of the bearer token, then a SubjectAccessReview of ``get`` on the path
    (``nonResourceURLs`` RBAC rules; :mod:`kubesched.operator.delegated_auth`). Our own
    identity needs ``system:auth-delegator`` (the chart binds it). Off by default because
    it needs that binding; off, the server listens on localhost only, so a fresh
    ``kubesched run`` never shows the cluster's pods to whoever reaches the machine."""
    bind_address: Annotated[
        str | None,
        Option(
            "--bind-address",
            "the address of every endpoint (default: 0.0.0.0 with --delegate-auth, else "
            "127.0.0.1; another address needs --delegate-auth)",
            metavar="ADDR",
            not_in_chart="0.0.0.0: the kubelet's probes and Prometheus reach the pod",
        ),
    ] = None
    """Where every endpoint listens (one port). Unset: ``0.0.0.0`` with
    ``delegate_auth`` (the kubelet's probes and Prometheus reach the pod), else
    ``127.0.0.1``. A non-loopback address without ``delegate_auth`` is refused: it would
    serve every pod's explanation to anyone on the network."""

    port: Annotated[
        int,
        Option(
            "--port",
            "the port of every endpoint (default: 10251)",
            metavar="PORT",
            chart="port",
        ),
    ] = Field(default=10251, ge=0, le=65535)
    """Plain HTTP (kube-scheduler's former insecure port). 0 picks a free port (tests)."""

    client_qps: Annotated[
        float,
        Option(
            "--kube-api-qps",
            "default: 50; <= 0 lifts it",
            metavar="QPS",
            chart="client.qps",
        ),
    ] = 50.0
    """kube-scheduler's ``--kube-api-qps``: writes a second before the client waits. A
    value <= 0 lifts the limit (benchmarks)."""

    client_burst: Annotated[
        int,
        Option(
            "--kube-api-burst",
            "default: 100",
            metavar="N",
            chart="client.burst",
        ),
    ] = Field(default=100, ge=1)
    """kube-scheduler's ``--kube-api-burst``: writes allowed at once above ``client_qps``."""

    request_timeout: Annotated[
        float,
        Option(
            "--request-timeout",
            "seconds an API write may take before it fails and the pod is retried with "
            "backoff (default: 30)",
            metavar="SECONDS",
            not_in_chart=EXTRA,
        ),
    ] = Field(default=30.0, gt=0)
    """Per API write; a write that takes longer fails as a retryable error and the pod
    goes back to the queue with backoff."""

    shutdown_flush_seconds: Annotated[
        float,
        Option(
            "--shutdown-flush-seconds",
            "on SIGTERM, at most this long to finish binds in flight and write the queued "
            "Events (default: 20)",
            metavar="SECONDS",
            not_in_chart=EXTRA,
        ),
    ] = Field(default=20.0, ge=0)
    """On SIGTERM, at most this long for the binds and pod status writes in flight and
    then the queued Events (one ``Scheduled`` per bind) to reach the API server before the
    process exits; what is left is logged and lost. A pod's default
    ``terminationGracePeriodSeconds`` is 30: 20 leaves the rest for closing connections
    before the kubelet's SIGKILL, and at the Event write rate of a loaded control plane
    (docs/benchmarks.md) it covers a backlog of thousands of Events. Raise the pod's
    grace period with it."""

    resync_seconds: Annotated[
        float,
        Option(
            "--resync-seconds",
            "how often pods and nodes are listed again to catch deletions a watch missed; "
            "0 disables (default: 120)",
            metavar="SECONDS",
            not_in_chart=EXTRA,
        ),
    ] = Field(default=120.0, ge=0)
    """How often pods and nodes are listed to catch deletions a relisted watch never
    reports (Kopf relists after 410 Gone without DELETED events). 0 disables."""

    watch_server_timeout: Annotated[
        int,
        Option(
            "--watch-server-timeout",
            "whole seconds after which the API server ends each watch (default: 300)",
            metavar="SECONDS",
            not_in_chart=EXTRA,
        ),
    ] = Field(default=300, ge=1)
    """Asks the API server to end each watch after this long (whole seconds: the API
    refuses a fraction); Kopf resumes from the last resourceVersion."""

    watch_client_timeout: Annotated[
        float,
        Option(
            "--watch-client-timeout",
            "seconds after which the client gives up on a watch (default: 330)",
            metavar="SECONDS",
            not_in_chart=EXTRA,
        ),
    ] = Field(default=330.0, gt=0)
    """The client gives up on a watch this long after it started, a little after the
    server should have ended it: the backstop for a connection nobody closes."""

    watch_engine: Annotated[
        Literal["kopf", "direct"],
        Option(
            "--watch-engine",
            "how pods and nodes are watched (default: direct; see docs/bench.md)",
            not_in_chart=EXTRA,
        ),
    ] = "direct"
    """How pods and nodes are watched. ``direct``: kubesched's own LIST + WATCH
    (``kubesched.cluster.informer``: orjson-decoded events straight into the store and the
    scheduler, bookmarks, relist with synthesized deletions after 410 Gone); ``kopf``:
    ``@kopf.on.event`` handlers, as every other kind. The default is ``direct`` because
    Kopf's per-event machinery was the largest single cost at a few hundred pods a second
    (docs/bench.md has the numbers for both); Kopf still watches every other kind and runs
    the SchedulingProfile/PodGroup handlers. Neither engine writes anything to pods."""

    event_loop: Annotated[
        Literal["auto", "uvloop", "asyncio"],
        Option(
            "--event-loop",
            "the event loop: uvloop, asyncio, or auto (uvloop when installed; the default)",
            not_in_chart=EXTRA,
        ),
    ] = "auto"
    """The event loop ``kubesched run`` runs on. ``auto``: uvloop when it is installed (a
    dependency on Linux and macOS), else asyncio's. uvloop because every TLS connection
    on asyncio's own loop holds a 256 KiB read buffer filled with zeros at once, so
    resident from the start: kubesched keeps 60-90 connections to the API server (binds,
    Events, a watch per kind, Kopf's), 15-20 MiB of zeros; uvloop's buffer is resident
    only as far as it is used (docs/benchmarks.md, "Memory"). ``asyncio`` is the
    fallback should uvloop misbehave somewhere; ``uvloop`` refuses to start without it."""

    seed: Annotated[
        int | None,
        Option(
            "--seed",
            "seed the random choices (preemption's offset, tied gang placements; default: "
            "random): placements as `kubesched simulate --seed S` makes for the same objects",
            metavar="S",
            not_in_chart=EXTRA,
        ),
    ] = None
    """Seeds the generator of kube-scheduler's random choices: preemption's dry-run
    offset and ties between equally scored gang placements (ties between nodes are not
    random: kube-scheduler 1.37 takes its heap's root, see scheduler/select_host.py).
    Unset, as kube-scheduler: random. Set, a run is repeatable, and places pods as
    ``kubesched simulate --seed`` with the same value does for the same objects (the
    differential test checks that)."""

    opportunistic_batching: Annotated[
        bool,
        Option(
            "--opportunistic-batching",
            "a pod with the signature of the pod just placed reuses its Filter and Score "
            "work, as kube-scheduler's OpportunisticBatching feature gate (default: on)",
            not_in_chart=EXTRA,
        ),
    ] = True
    """kube-scheduler's ``OpportunisticBatching`` feature gate (beta, on since 1.35; it has
    no KubeSchedulerConfiguration field): a pod with the same scheduling signature as the
    pod just placed reuses its Filter and Score work (:mod:`kubesched.scheduler.batch`),
    with the placement a full cycle would make. ``KUBESCHED_OPPORTUNISTIC_BATCHING=false``
    turns it off, as ``--feature-gates=OpportunisticBatching=false`` does there."""

    pop_from_backoff: Annotated[
        bool,
        Option(
            "--pop-from-backoff",
            "with no other pod to try, try a rejected pod before its backoff is over, as "
            "kube-scheduler's SchedulerPopFromBackoffQ feature gate (default: on)",
            not_in_chart=EXTRA,
        ),
    ] = True
    """kube-scheduler's ``SchedulerPopFromBackoffQ`` feature gate (beta, on since 1.33):
    when no pod is in activeQ, the first pod of backoffQ that plugins rejected is tried
    at once, its backoff over or not; backoff expiries are counted in whole seconds and
    PreEnqueue runs as a pod enters backoffQ (:mod:`kubesched.backend.queue_backoff`).
    ``KUBESCHED_POP_FROM_BACKOFF=false`` turns it off, as
    ``--feature-gates=SchedulerPopFromBackoffQ=false`` does there."""

    profile_selector: Annotated[
        str,
        Option(
            "--profile-selector",
            "label selector of the SchedulingProfiles to apply, e.g. "
            "kubesched.dev/release=team-a (default: every SchedulingProfile)",
            metavar="SELECTOR",
            chart="profileSelector",
        ),
    ] = ""
    """A label selector (``kubectl -l`` syntax, e.g. ``kubesched.dev/release=team-a``): the
    SchedulingProfiles this instance applies. SchedulingProfiles are cluster-scoped, so two
    installations must each select their own, or both would serve every profile's
    schedulerName and schedule the same pods. Empty (the default: one installation per
    cluster) selects every SchedulingProfile. The Helm chart sets it to its release's
    label."""

    log_level: Annotated[
        Literal["debug", "info", "warning", "error"],
        Option(
            "--log-level",
            "the least severe log records written to stderr (default: info)",
            chart="logLevel",
        ),
    ] = "info"
    """The least severe log records written to stderr (a ``logging`` level)."""

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

    @field_validator("scheduler_names")
    @classmethod
    def _check_names(cls, v: list[str]) -> list[str]:
        # each becomes a profile's schedulerName (ProfileSpec checks the same)
        for name in v:
            if len(name) > 253 or not re.match(SCHEDULER_NAME_PATTERN, name):
                raise ValueError(
                    f"{name!r} is not a schedulerName: lower case letters, digits, '-' and "
                    "'.', starting and ending with a letter or digit, at most 253 characters"
                )
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
        cls, overrides: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
    ) -> Self:
        """The CLI's flags that were given (None values are ignored) over the
        ``KUBESCHED_<FIELD>`` variables of ``environ`` (default: the process's) over the
        defaults; never a ``.env`` file. A bad value or variable raises
        :class:`pydantic.ValidationError` naming the field."""
        values = read(cls, ENV_PREFIX, os.environ if environ is None else environ)
        values.update({k: v for k, v in (overrides or {}).items() if v is not None})
        return cls(**values)


def options(model: type[Settings] = Settings) -> dict[str, Option]:
    """Every setting's :class:`Option`, by field name, in the model's order."""
    found: dict[str, Option] = {}
    for name, info in model.model_fields.items():
        opts = [m for m in info.metadata if isinstance(m, Option)]
        if len(opts) != 1:
            raise TypeError(
                f"{model.__name__}.{name}: give it exactly one Option (its flag, its chart value)"
            )
        found[name] = opts[0]
    return found
