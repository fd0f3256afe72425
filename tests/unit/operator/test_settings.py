"""Settings: one definition per setting (field, flag, environment variable, chart value),
defaults with reasons, precedence flag > environment > default, namespace resolution."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pydantic
import pytest

from kubesched.cli import _parser
from kubesched.cli import run as run_cli
from kubesched.operator.settings import Option, Settings, default_namespace, env_name, options


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No KUBESCHED_<FIELD> of the shell running the tests leaks in."""
    for field in Settings.model_fields:
        monkeypatch.delenv(env_name(field), raising=False)
    yield


def from_cli(*argv: str) -> Settings:
    """The settings ``kubesched run ARGV`` runs with (the real parser, not run)."""
    args: argparse.Namespace = _parser().parse_args(["run", *argv])
    return Settings.load(run_cli._given(args))


#: field -> (its flag as given, the value it gives; its variable's text, the value it gives).
#: Every setting has a row: a setting without a flag or a variable fails here.
CASES: dict[str, tuple[list[str], Any, str, Any]] = {
    "kubeconfig": (["--kubeconfig=/flag"], "/flag", "/env", "/env"),
    "scheduler_names": (
        ["--scheduler-name=a", "--scheduler-name=b"],
        ["a", "b"],
        "c, d",
        ["c", "d"],
    ),
    "namespace": (["--namespace=ns-flag"], "ns-flag", "ns-env", "ns-env"),
    "leader_elect": (["--leader-elect"], True, "false", False),
    "lease_name": (["--lease-name=flag"], "flag", "env", "env"),
    "lease_duration": (["--leader-elect-lease-duration=30s"], 30.0, "20", 20.0),
    "renew_deadline": (["--leader-elect-renew-deadline=12s"], 12.0, "11", 11.0),
    "retry_period": (["--leader-elect-retry-period=3000ms"], 3.0, "4", 4.0),
    "identity": (["--identity=pod-flag"], "pod-flag", "pod-env", "pod-env"),
    "delegate_auth": (["--no-delegate-auth"], False, "true", True),
    "bind_address": (["--bind-address=127.0.0.2"], "127.0.0.2", "::1", "::1"),
    "port": (["--port=1234"], 1234, "2345", 2345),
    "client_qps": (["--kube-api-qps=0"], 0.0, "7.5", 7.5),
    "client_burst": (["--kube-api-burst=7"], 7, "8", 8),
    "request_timeout": (["--request-timeout=5"], 5.0, "6", 6.0),
    "shutdown_flush_seconds": (["--shutdown-flush-seconds=1"], 1.0, "2", 2.0),
    "resync_seconds": (["--resync-seconds=0"], 0.0, "60", 60.0),
    "watch_server_timeout": (["--watch-server-timeout=10"], 10, "20", 20),
    "watch_client_timeout": (["--watch-client-timeout=11.5"], 11.5, "22", 22.0),
    "watch_engine": (["--watch-engine=direct"], "direct", "kopf", "kopf"),
    "event_loop": (["--event-loop=asyncio"], "asyncio", "uvloop", "uvloop"),
    "seed": (["--seed=1"], 1, "2", 2),
    "opportunistic_batching": (["--opportunistic-batching"], True, "false", False),
    "pop_from_backoff": (["--pop-from-backoff"], True, "false", False),
    "profile_selector": (["--profile-selector=a=b"], "a=b", "c in (d)", "c in (d)"),
    "log_level": (["--log-level=debug"], "debug", "warning", "warning"),
}


def test_every_setting_has_a_flag_and_a_variable_under_test() -> None:
    assert list(CASES) == list(Settings.model_fields)
    assert list(options()) == list(Settings.model_fields)
    flags = [opt.flag for opt in options().values()]
    assert len(set(flags)) == len(flags)


@pytest.mark.parametrize("field", list(CASES))
def test_the_flag_sets_the_setting(field: str) -> None:
    argv, value, _, _ = CASES[field]
    assert getattr(from_cli(*argv), field) == value


@pytest.mark.parametrize("field", list(CASES))
def test_the_environment_variable_sets_the_setting(
    field: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, _, text, value = CASES[field]
    monkeypatch.setenv(env_name(field), text)
    assert getattr(from_cli(), field) == value


@pytest.mark.parametrize("field", list(CASES))
def test_a_flag_wins_over_its_variable_which_wins_over_the_default(
    field: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv, flag_value, text, env_value = CASES[field]
    default = getattr(from_cli(), field)
    assert len({repr(default), repr(flag_value), repr(env_value)}) == 3 or field in (
        "leader_elect",  # a bool: the flag gives the default back over the variable
        "delegate_auth",
        "opportunistic_batching",
        "pop_from_backoff",
        "watch_engine",  # two choices
    )
    monkeypatch.setenv(env_name(field), text)
    assert getattr(from_cli(*argv), field) == flag_value != env_value


def test_defaults_are_kube_schedulers() -> None:
    s = Settings.load()
    assert s.scheduler_names == ["kubesched"]
    assert (s.leader_elect, s.lease_duration, s.renew_deadline, s.retry_period) == (
        True,
        15.0,
        10.0,
        2.0,
    )
    assert (s.client_qps, s.client_burst) == (50.0, 100)
    assert (s.port, s.log_level, s.watch_engine) == (10251, "info", "direct")


def test_a_flag_not_given_leaves_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBESCHED_PORT", "9000")
    monkeypatch.setenv("KUBESCHED_LEASE_NAME", "from-env")
    s = Settings.load({"lease_name": "from-flag", "port": None})
    assert s.port == 9000  # a flag not given (None) leaves the environment's value
    assert s.lease_name == "from-flag"


def test_no_dotenv_file_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("KUBESCHED_PORT=9999\n")
    assert Settings.load().port == 10251


def test_bad_values_are_refused_with_the_field_named(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(pydantic.ValidationError, match="lease_duration must be greater"):
        Settings.load({"lease_duration": 5.0})
    monkeypatch.setenv("KUBESCHED_PORT", "http")
    with pytest.raises(pydantic.ValidationError, match="port"):
        Settings.load()
    monkeypatch.delenv("KUBESCHED_PORT")
    monkeypatch.setenv("KUBESCHED_LEADER_ELECT", "maybe")
    with pytest.raises(pydantic.ValidationError, match="leader_elect"):
        Settings.load()


def test_a_bad_variable_is_reported_in_the_users_words(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kubesched.cli import main

    monkeypatch.setenv("KUBESCHED_WATCH_ENGINE", "informer")
    assert main(["run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kubesched: error: KUBESCHED_WATCH_ENGINE='informer': Input should be")


def test_an_option_needs_a_chart_value_or_a_reason() -> None:
    with pytest.raises(ValueError, match="exactly one of chart and not_in_chart"):
        Option("--x", "help")
    with pytest.raises(ValueError, match="exactly one of chart and not_in_chart"):
        Option("--x", "help", chart="x", not_in_chart="why")
    with pytest.raises(ValueError, match="starts with --"):
        Option("x", "help", chart="x")


def test_a_setting_without_an_option_is_refused() -> None:
    class More(Settings):
        forgotten: int = 0

    with pytest.raises(TypeError, match=r"More.forgotten: give it exactly one Option"):
        options(More)


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


def test_a_bad_profile_selector_is_refused_at_start() -> None:
    with pytest.raises(pydantic.ValidationError, match="'Team_A/x' is not a valid label key"):
        Settings.load({"profile_selector": "Team_A/x=y"})
    with pytest.raises(pydantic.ValidationError, match="cannot parse"):
        Settings.load({"profile_selector": "release=a b"})
