"""Settings: defaults with reasons, environment and CLI mapping, namespace resolution."""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest

from kubesched.operator.settings import Settings, default_namespace


def test_defaults_are_kube_schedulers() -> None:
    s = Settings.load(env={})
    assert s.scheduler_names == ["kubesched"]
    assert (s.leader_elect, s.lease_duration, s.renew_deadline, s.retry_period) == (
        True,
        15.0,
        10.0,
        2.0,
    )
    assert (s.client_qps, s.client_burst) == (50.0, 100)


def test_environment_then_flags() -> None:
    env = {
        "KUBESCHED_SCHEDULER_NAMES": "a, b",
        "KUBESCHED_LEADER_ELECT": "false",
        "KUBESCHED_PORT": "9000",
        "KUBESCHED_LEASE_NAME": "from-env",
    }
    s = Settings.load({"lease_name": "from-flag", "port": None}, env=env)
    assert s.scheduler_names == ["a", "b"]
    assert s.leader_elect is False
    assert s.port == 9000  # a flag not given (None) leaves the environment's value
    assert s.lease_name == "from-flag"


def test_bad_values_are_refused_with_the_field_named() -> None:
    with pytest.raises(pydantic.ValidationError, match="lease_duration must be greater"):
        Settings.load({"lease_duration": 5.0}, env={})
    with pytest.raises(pydantic.ValidationError, match="port"):
        Settings.load(env={"KUBESCHED_PORT": "http"})


def test_namespace_from_pod_namespace_then_service_account_then_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sa = tmp_path / "namespace"
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    assert default_namespace(sa) == "default"
    sa.write_text("kube-system\n")
    assert default_namespace(sa) == "kube-system"
    monkeypatch.setenv("POD_NAMESPACE", "sched")
    assert default_namespace(sa) == "sched"


def test_profile_selector_from_environment_and_flag() -> None:
    assert Settings.load(env={}).profile_selector == ""  # every SchedulingProfile
    env = {"KUBESCHED_PROFILE_SELECTOR": "kubesched.dev/release=team-a"}
    assert Settings.load(env=env).profile_selector == "kubesched.dev/release=team-a"
    flag = {"profile_selector": "kubesched.dev/release in (team-b)"}
    assert Settings.load(flag, env=env).profile_selector == "kubesched.dev/release in (team-b)"


def test_a_bad_profile_selector_is_refused_at_start() -> None:
    with pytest.raises(pydantic.ValidationError, match="'Team_A/x' is not a valid label key"):
        Settings.load({"profile_selector": "Team_A/x=y"}, env={})
    with pytest.raises(pydantic.ValidationError, match="cannot parse"):
        Settings.load({"profile_selector": "release=a b"}, env={})
