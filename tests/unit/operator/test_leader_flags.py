"""``kubesched run``'s leader-election timings: kube-scheduler's flags, and client-go's
rules checked when the settings load (a bad combination is bad input, exit 2)."""

from __future__ import annotations

import argparse
import re

import pydantic
import pytest

from kubesched.cli import main
from kubesched.cli.common import seconds as _seconds
from kubesched.operator.settings import Settings


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("15s", 15.0), ("500ms", 0.5), ("1m", 60.0), ("4", 4.0), ("2.5s", 2.5)],
)
def test_durations_read_as_kube_scheduler_writes_them(text: str, seconds: float) -> None:
    assert _seconds(text) == seconds


@pytest.mark.parametrize("text", ["fast", "0s", "-1s", "s"])
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        _seconds(text)


@pytest.mark.parametrize(
    ("timings", "message"),
    [
        ({"lease_duration": 10, "renew_deadline": 10}, "lease_duration must be greater"),
        ({"renew_deadline": 2.4, "retry_period": 2}, "1.2 * retry_period"),
        (
            {"lease_duration": 2, "renew_deadline": 1, "retry_period": 0.5},
            "retry_period must be at least 1 s",
        ),
    ],
)
def test_client_go_rules_are_checked_on_load(timings: dict[str, float], message: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=re.escape(message)):
        Settings.load(timings)
    # ... and not at all without leader election
    Settings.load({**timings, "leader_elect": False})


def test_flags_override_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBESCHED_LEASE_DURATION", "30")
    monkeypatch.setenv("KUBESCHED_RETRY_PERIOD", "3")
    s = Settings.load({"lease_duration": 4.0, "renew_deadline": 3.0, "retry_period": 1.0})
    assert (s.lease_duration, s.renew_deadline, s.retry_period) == (4.0, 3.0, 1.0)


def test_a_bad_combination_of_flags_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "run",
            "--leader-elect-lease-duration=4s",
            "--leader-elect-renew-deadline=3s",
            "--leader-elect-retry-period=3s",
        ]
    )
    assert code == 2
    assert (
        "--leader-elect-renew-deadline must be greater than 1.2 * --leader-elect-retry-period"
        in capsys.readouterr().err
    )
