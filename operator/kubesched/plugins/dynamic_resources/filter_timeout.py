"""``filterTimeout`` of DynamicResourcesArgs: how long Filter may search one node for
devices (kube-scheduler 1.37, DRASchedulerFilterTimeout: beta, on by default).

- Default 10s; ``0`` disables the limit; a negative duration is refused when the
  profile is compiled (``pluginConfig[i].args.filterTimeout: ... must be zero or
  positive``, kube's validation wording). The value is a Go duration (``500ms``, ``1m``).
- The limit is measured on the framework's clock (``Handle.now``: the event loop's
  time; virtual in tests, where Filter's CPU time does not advance it). The search
  reads it every few dozen steps (:mod:`kubesched.framework.dra.deadline`).
- When it hits, Filter returns an Error (not Unschedulable): kube treats the timeout as
  possibly transient, so the pod goes back through backoff instead of waiting for a
  cluster event; the message names the node: ``node <node>: timed out trying to
  allocate devices``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubesched.framework.go_duration import parse_go_duration
from kubesched.framework.interface import Handle
from kubesched.framework.status import Status

if TYPE_CHECKING:
    from kubesched.framework.dra.deadline import TimeLimit

__all__ = ["DEFAULT_SECONDS", "check_filter_timeout", "time_limit", "timed_out"]

DEFAULT_SECONDS = 10.0
"""kube's DynamicResourcesFilterTimeoutDefault."""


def check_filter_timeout(text: str | None) -> str | None:
    """The Args field's check: a Go duration, zero or positive."""
    if text is not None and parse_go_duration(text) < 0:
        raise ValueError(f'Invalid value: "{text}": must be zero or positive')
    return text


def timed_out(node_name: str, plugin: str) -> Status:
    """kube's Filter status when the allocator's context deadline passed."""
    return Status.as_error(f"node {node_name}: timed out trying to allocate devices", plugin=plugin)


def time_limit(text: str | None, handle: Handle) -> TimeLimit | None:
    """The limit of every Filter search on the framework's clock; None when it is off
    (``0``). Imports the DRA machinery: called on the first Filter that allocates."""
    from kubesched.framework.dra.deadline import TimeLimit

    seconds = DEFAULT_SECONDS if text is None else parse_go_duration(text)
    return TimeLimit(handle.now, seconds) if seconds > 0 else None
