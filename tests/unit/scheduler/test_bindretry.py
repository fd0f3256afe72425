"""The bind retry policy's pure parts: which failures are retried, how long to wait,
and when a 409 is our own earlier bind."""

from __future__ import annotations

import pytest

from kubesched.framework.cluster_port import ClusterError, Conflict, NotFound
from kubesched.framework.status import Status
from kubesched.scheduler.bindretry import (
    BindRetryPolicy,
    assigned_node,
    error_code,
    is_transient,
    retry_delay,
)


def failed(err: ClusterError, code: str, retry_after: float | None = None) -> Status:
    err.code = code
    err.retry_after = retry_after
    return Status.as_error(err, plugin="DefaultBinder")


def forbidden() -> Status:
    err = ClusterError("403 forbidden")
    err.retryable = False
    return failed(err, "403")


@pytest.mark.parametrize(
    ("status", "transient"),
    [
        (failed(ClusterError("x"), "500"), True),
        (failed(ClusterError("x"), "503"), True),
        (failed(ClusterError("x"), "429"), True),
        (failed(ClusterError("x"), "timeout"), True),
        (failed(ClusterError("x"), "connection"), True),
        (forbidden(), False),
        (failed(NotFound("gone"), "404"), False),
        (failed(Conflict("already assigned"), "409"), False),
        (Status.as_error("a plugin's own error"), False),
    ],
    ids=["500", "503", "429", "timeout", "connection", "403", "404", "409", "not-an-api-error"],
)
def test_only_transient_api_failures_are_retried(status: Status, transient: bool) -> None:
    assert is_transient(status) is transient


def test_waits_double_to_the_cap_and_retry_after_wins() -> None:
    policy = BindRetryPolicy()
    s = failed(ClusterError("x"), "500")
    assert [retry_delay(policy, n, s) for n in (1, 2, 3, 4, 5)] == [0.5, 1.0, 2.0, 4.0, 4.0]
    assert retry_delay(policy, 1, failed(ClusterError("x"), "429", retry_after=3)) == 3.0
    assert retry_delay(policy, 1, failed(ClusterError("x"), "429", retry_after=600)) == 10.0


@pytest.mark.parametrize(
    ("message", "node"),
    [
        (
            'Operation cannot be fulfilled on pods/binding "p": pod p is already assigned to node "n1"',
            "n1",
        ),
        ("pod default/p is already assigned to node 'n2'", "n2"),
        ("the object has been modified", None),
    ],
    ids=["apiserver", "memory-cluster", "other-conflict"],
)
def test_the_node_a_409_names(message: str, node: str | None) -> None:
    assert assigned_node(failed(Conflict(message), "409")) == node
    assert assigned_node(failed(ClusterError(message), "500")) is None


def test_error_codes_for_metrics() -> None:
    assert error_code(failed(ClusterError("x"), "429")) == "429"
    assert error_code(Status.as_error("plugin bug")) == "other"
