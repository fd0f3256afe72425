"""The chart tests' helm binaries under CI: built by tests/helm/build when CI did not name
them (so the README's test command alone runs the chart tests), and a failed build stops
the session with where its log is."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from tests.helm import chart


def fake_build(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "build"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return script


def test_under_ci_the_helms_are_built_and_named_for_the_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the build prints progress on stderr and the directory last on stdout, per version
    script = fake_build(
        tmp_path,
        'echo "building" >&2; echo noise; echo "/cache/helm/${KUBESCHED_HELM_VERSION:-v3.22.0}"',
    )
    monkeypatch.setattr(chart, "BUILD", script)
    monkeypatch.setenv("CI", "true")
    monkeypatch.delenv(chart.HELM_ENV, raising=False)
    monkeypatch.delenv(chart.OLD_HELM_ENV, raising=False)
    chart.prepare_helms()
    assert os.environ[chart.HELM_ENV] == "/cache/helm/v3.22.0/helm"
    assert os.environ[chart.OLD_HELM_ENV] == f"/cache/helm/{chart.OLD_HELM_VERSION}/helm"


def test_helms_named_by_ci_or_outside_ci_are_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = fake_build(tmp_path, "echo must-not-run >&2; exit 1")
    monkeypatch.setattr(chart, "BUILD", script)
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv(chart.HELM_ENV, "/mine/helm")
    monkeypatch.setenv(chart.OLD_HELM_ENV, "/mine/old-helm")
    chart.prepare_helms()  # nothing to build
    monkeypatch.delenv("CI")
    monkeypatch.delenv("KUBESCHED_E2E", raising=False)
    monkeypatch.delenv(chart.HELM_ENV)
    chart.prepare_helms()  # outside CI: the tests skip, saying how to get helm
    assert chart.HELM_ENV not in os.environ


def test_a_failed_build_stops_the_session_naming_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chart, "BUILD", fake_build(tmp_path, "echo 'proxy refused' >&2; exit 3"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the build's log goes
    monkeypatch.setenv("CI", "true")
    monkeypatch.delenv(chart.HELM_ENV, raising=False)
    with pytest.raises(pytest.UsageError, match=r"failed \(3\); see .*kubesched-helm-build\.log"):
        chart.prepare_helms()
    assert (tmp_path / "kubesched-helm-build.log").read_text() == "proxy refused\n"
