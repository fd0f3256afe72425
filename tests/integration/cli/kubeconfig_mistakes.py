"""Kubeconfig mistakes, as every command that reads one meets them: the file, the
variable or the flag that named it, and what is wrong with it (never a value from it:
it may be a secret). test_mistakes.py runs them with the other mistakes; the files they
name are the ``files`` fixture's (conftest.py)."""

from __future__ import annotations

import pytest

#: (argv, environment, what the one line must say)
KUBECONFIG_MISTAKES = [
    pytest.param(
        ["explain", "ns/pod", "--kubeconfig", "/nonexistent"],
        {},
        "kubeconfig /nonexistent (--kubeconfig): no such file",
        id="explain-kubeconfig-flag-missing",
    ),
    pytest.param(
        ["explain", "ns/pod"],
        {"KUBECONFIG": "/nonexistent"},
        "kubeconfig /nonexistent (KUBECONFIG): no such file",
        id="explain-KUBECONFIG-missing",
    ),
    pytest.param(
        ["explain", "ns/pod"],
        {},
        "no kubeconfig (no --kubeconfig, KUBECONFIG unset, no ~/.kube/config) and not in a cluster",
        id="explain-no-kubeconfig-outside-a-cluster",
    ),
    pytest.param(
        ["explain", "ns/pod", "--kubeconfig", "{tmp}/garbled.yaml"],
        {},
        "kubeconfig {tmp}/garbled.yaml (--kubeconfig): invalid YAML at line 3, column 3",
        id="explain-garbled-kubeconfig",
    ),
    pytest.param(
        ["explain", "ns/pod", "--kubeconfig", "{tmp}/no-context.yaml"],
        {},
        "kubeconfig {tmp}/no-context.yaml (--kubeconfig): Invalid kube-config file. "
        "Expected key current-context",
        id="explain-kubeconfig-without-context",
    ),
    pytest.param(
        ["explain", "ns/pod", "--kubeconfig", "{tmp}"],
        {},
        "kubeconfig {tmp} (--kubeconfig): is a directory",
        id="explain-kubeconfig-is-a-directory",
    ),
    pytest.param(
        ["explain", "ns/pod", "--kubeconfig", "{tmp}/server-a-number.yaml"],
        {},
        "kubeconfig {tmp}/server-a-number.yaml (--kubeconfig): "
        "clusters[0] (c).cluster.server: expected a string, got a number",
        id="explain-kubeconfig-server-a-number",
    ),
    pytest.param(
        ["explain", "ns/pod", "--kubeconfig", "{tmp}/context-a-number.yaml"],
        {},
        "kubeconfig {tmp}/context-a-number.yaml (--kubeconfig): "
        "contexts[0] (x).context: expected a mapping, got a number",
        id="explain-kubeconfig-context-a-number",
    ),
    pytest.param(
        ["explain", "ns/pod"],
        {"KUBECONFIG": "{tmp}/unreachable.yaml:{tmp}/a-string.yaml"},
        "kubeconfig {tmp}/unreachable.yaml:{tmp}/a-string.yaml (KUBECONFIG): "
        "{tmp}/a-string.yaml: not a kubeconfig: expected a mapping with clusters, contexts "
        "and users, got a string",
        id="explain-KUBECONFIG-one-file-a-string",
    ),
    pytest.param(
        ["explain", "ns/pod", "--kubeconfig", "{tmp}/blank.yaml"],
        {},
        "kubeconfig {tmp}/blank.yaml (--kubeconfig): the file is empty",
        id="explain-kubeconfig-empty",
    ),
    pytest.param(
        ["explain", "ns/pod", "--kubeconfig", "{tmp}/password-a-number.yaml"],
        {},
        # the first problem, and never a value (it may be a secret)
        "(--kubeconfig): clusters[0] (c).cluster.server: expected a string, got a number",
        id="explain-kubeconfig-says-no-value",
    ),
    pytest.param(
        ["explain", "ns/pod", "--kubeconfig", "{tmp}/exec-missing.yaml"],
        {},
        "kubeconfig {tmp}/exec-missing.yaml (--kubeconfig): its exec plugin's command "
        "/nonexistent/get-token: No such file or directory",
        id="explain-kubeconfig-exec-command-missing",
    ),
    pytest.param(
        ["run", "--kubeconfig", "{tmp}/a-string.yaml"],
        {},
        "kubeconfig {tmp}/a-string.yaml (--kubeconfig): not a kubeconfig: expected a mapping",
        id="run-kubeconfig-a-string",
    ),
    pytest.param(
        ["run", "--kubeconfig", "/nonexistent"],
        {},
        "kubeconfig /nonexistent (--kubeconfig): no such file",
        id="run-kubeconfig-missing",
    ),
]
