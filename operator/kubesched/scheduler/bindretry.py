"""Bind retries: what a transient API failure at Bind does before the pod is requeued.

kube-scheduler leaves this to client-go, whose requests retry a response carrying
Retry-After (429, and 5xx sent with it) up to 10 times; anything else fails the binding
cycle at once (forget, Unreserve, requeue with backoff, a FailedScheduling event). Here
the binding cycle retries the Bind extension point itself, a few times, for every
transient failure -- 429, 5xx, a client-side timeout, a dropped connection -- since our
requests do not retry by themselves:

- at most ``attempts`` Bind calls in all (default 4), waiting ``initial`` seconds
  before the first retry and doubling up to ``maximum``; a Retry-After from the server
  replaces the wait (capped at ``max_retry_after``);
- the pod stays assumed (and out of the queue) meanwhile, so the next cycles see its
  resources as taken, exactly as during a slow bind;
- when the retries run out, the usual failure path runs: forget + Unreserve + requeue
  with the queue's backoff + ``FailedScheduling`` (``running Bind plugin "DefaultBinder": ...``);
- a retry answered ``409 ... already assigned to node "<ours>"`` means an earlier
  attempt did land (it timed out or failed on our side only): the bind succeeded. An
  answer naming another node means someone else bound it: forgotten, not requeued.

Counted in ``kubesched_bind_retries_total{code}`` and, per failed call,
``kubesched_bind_request_errors_total{code}``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kubesched.framework.cluster_port import ClusterError, Conflict
from kubesched.framework.status import Status

__all__ = ["BindRetryPolicy", "assigned_node", "error_code", "is_transient", "retry_delay"]

_ASSIGNED = re.compile(r"already assigned to node [\"']([^\"']*)[\"']")


@dataclass(frozen=True, slots=True)
class BindRetryPolicy:
    attempts: int = 4
    """Bind calls in all before the pod is requeued (1: no retry, kube-scheduler's
    behaviour for errors without Retry-After)."""
    initial: float = 0.5
    """Seconds before the first retry: long enough for a restarting API server or a
    brief overload to pass, short against the queue's 1 s initial backoff."""
    maximum: float = 4.0
    """Cap on the doubling wait, so 4 attempts take at most ~6 s of waiting."""
    max_retry_after: float = 10.0
    """Cap on a server's Retry-After (the queue's maximum backoff): a longer one is
    better spent in the queue's backoff."""


def error_code(status: Status) -> str:
    """The failed call's code (``"500"``, ``"429"``, ``"timeout"``, ...) or ``"other"``."""
    err = status.error
    if isinstance(err, ClusterError) and err.code:
        return err.code
    return "other"


def is_transient(status: Status) -> bool:
    """A failure worth retrying in place: 429, 5xx, timeouts, connection errors."""
    err = status.error
    return (
        isinstance(err, ClusterError)
        and err.retryable
        and not isinstance(err, Conflict)
        and (err.code in ("429", "timeout", "connection") or err.code.startswith("5"))
    )


def retry_delay(policy: BindRetryPolicy, retry: int, status: Status) -> float:
    """Seconds to wait before retry number ``retry`` (1, 2, ...)."""
    err = status.error
    if isinstance(err, ClusterError) and err.retry_after is not None:
        return min(err.retry_after, policy.max_retry_after)
    return float(min(policy.initial * 2.0 ** (retry - 1), policy.maximum))


def assigned_node(status: Status) -> str | None:
    """The node a 409 "already assigned" names, if the failure is one."""
    err = status.error
    if not isinstance(err, Conflict):
        return None
    m = _ASSIGNED.search(str(err))
    return m.group(1) if m else None
