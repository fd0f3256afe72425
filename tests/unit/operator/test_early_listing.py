"""``kubesched run`` starts its first LIST before parsing its settings; run takes that
listing only when the parsed settings would have made the same one."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kubesched.cli import early
from kubesched.cluster.prefetch import Prefetch
from kubesched.operator.settings import env_name, options


def test_the_flags_peeked_are_the_settings_flags() -> None:
    opts = options()
    for field, flag in early.FLAGS.items():
        assert opts[field].flag == flag
        assert env_name(field) == f"KUBESCHED_{field.upper()}"


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        ([], {}, {"kubeconfig": None, "watch_engine": None}),
        (["--kubeconfig", "a", "--port", "0"], {}, {"kubeconfig": "a", "watch_engine": None}),
        (["--kubeconfig=a", "--kubeconfig", "b"], {}, {"kubeconfig": "b", "watch_engine": None}),
        (
            [],
            {"kubesched_kubeconfig": "e", "KUBESCHED_WATCH_ENGINE": "kopf"},
            {"kubeconfig": "e", "watch_engine": "kopf"},
        ),
        (
            ["--watch-engine", "direct"],
            {"KUBESCHED_WATCH_ENGINE": "kopf"},
            {"kubeconfig": None, "watch_engine": "direct"},
        ),
    ],
)
def test_the_command_line_wins_over_the_environment(
    argv: list[str], env: dict[str, str], expected: dict[str, str | None]
) -> None:
    assert early.peek(argv, env) == expected


def test_help_and_the_kopf_engine_start_no_listing() -> None:
    assert early.start(["--kubeconfig", "x", "--help"], {}) is None
    assert early.start(["--watch-engine", "kopf"], {}) is None
    assert early.start([], {"KUBESCHED_WATCH_ENGINE": "kopf"}) is None


def test_run_takes_the_early_listing_only_for_the_same_kubeconfig(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started: list[str | None] = []

    def start(self: Prefetch) -> Prefetch:
        started.append(self.kubeconfig)  # no thread: nothing is listed
        return self

    monkeypatch.setattr(Prefetch, "start", start)
    listing = early.start(["--kubeconfig", "a"], {})
    assert listing is not None and started == ["a"]
    assert early.take(listing, "a", "direct") is listing
    # an abbreviated flag (argparse took --kubec b): the settings say b, a new listing
    other = early.take(listing, "b", "direct")
    assert other is not listing and other is not None and started == ["a", "b"]
    assert early.take(listing, "a", "kopf") is None  # Kopf watches pods and nodes


def test_the_collector_is_on_again_after_a_run_that_could_not_start(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import gc

    from kubesched.cli import main

    monkeypatch.setattr(Prefetch, "start", lambda self: self)  # nothing is listed
    assert main(["run", "--kubeconfig", "/nonexistent/kubeconfig", "--port", "0"]) == 2
    assert "kubeconfig /nonexistent/kubeconfig (--kubeconfig): no such file" in (
        capsys.readouterr().err
    )
    assert gc.isenabled()  # off during run's imports, on again once main returns


def test_the_early_listing_starts_before_the_heavy_imports() -> None:
    # its kinds come from the kind table (kubesched.cluster.kinds), which must stay as
    # light: the listing runs while pydantic and numpy are imported, not after
    probe = (
        "import sys, kubesched.cli.early\n"
        "print(sorted(m for m in ('pydantic', 'aiohttp', 'numpy') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
