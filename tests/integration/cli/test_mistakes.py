"""A user's mistakes on the command line: one line ``kubesched: error: ...`` naming the
problem, exit status 2, nothing on stdout, never a traceback; in the test's process, and
for ``run`` in a process of its own as a user meets it (the kubeconfig mistakes'
table: kubeconfig_mistakes.py; Ctrl-C: test_ctrl_c.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kubesched.cli import main
from kubesched.cli.run import ENV_PREFIX, FLAGS, env_var
from kubesched.operator import settings
from tests.integration.cli.kubeconfig_mistakes import KUBECONFIG_MISTAKES

#: (argv, environment, what the one line must say)
BAD_INPUTS = [
    pytest.param(
        ["explain", "ns/pod", "--kubeconfig", "{tmp}/unreachable.yaml"],
        {},
        "cannot reach the API server at http://127.0.0.1:{closed}: ",
        id="explain-api-server-unreachable",
    ),
    pytest.param(
        ["explain", "ns/pod", "--server", "http://127.0.0.1:{closed}"],
        {},
        "http://127.0.0.1:{closed}: cannot connect: ",
        id="explain-server-refuses",
    ),
    pytest.param(
        ["explain", "ns/pod", "--server", "notaurl"],
        {},
        "argument --server: not an http(s) URL: 'notaurl'",
        id="explain-server-not-a-url",
    ),
    pytest.param(
        ["explain", "ns//pod", "--scenario", "{tmp}/no-nodes.yaml"],
        {},
        "argument NAMESPACE/NAME: expected NAMESPACE/NAME, got 'ns//pod'",
        id="explain-bad-pod-name",
    ),
    pytest.param(
        ["explain", "default/p", "--scenario", "{tmp}/empty.yaml"],
        {},
        "{tmp}/empty.yaml: no objects in the file",
        id="explain-empty-scenario",
    ),
    pytest.param(
        ["explain", "default/p", "--no-simulate"],
        {},
        "--no-simulate goes with --scenario",
        id="explain-no-simulate-without-scenario",
    ),
    pytest.param(
        ["explain", "ns/pod", "--profile-selector", "a=b=c"],
        {},
        "--profile-selector: label selector 'a=b=c': cannot parse at 'a=b=c'",
        id="explain-bad-profile-selector",
    ),
    pytest.param(
        ["run", "--port", "99999"],
        {},
        "--port 99999: Input should be less than or equal to 65535",
        id="run-port-out-of-range",
    ),
    pytest.param(
        ["run", "--kube-api-burst", "0"],
        {},
        "--kube-api-burst 0: Input should be greater than or equal to 1",
        id="run-burst-zero",
    ),
    pytest.param(
        ["run", "--profile-selector", "a=b=c"],
        {},
        "--profile-selector 'a=b=c': label selector 'a=b=c'",
        id="run-bad-selector",
    ),
    pytest.param(
        ["run", "--leader-elect-lease-duration", "5s"],
        {},
        "--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline",
        id="run-lease-shorter-than-renewal",
    ),
    pytest.param(
        ["run"],
        {"KUBESCHED_PORT": "abc"},
        "KUBESCHED_PORT='abc': Input should be a valid integer",
        id="run-bad-environment-variable",
    ),
    pytest.param(
        ["run"],
        {"kubesched_Port": "abc"},  # names match in any case; the message spells it as set
        "kubesched_Port='abc': Input should be a valid integer",
        id="run-bad-environment-variable-lower-case",
    ),
    pytest.param(
        ["run", "--scheduler-name", "kubesched", "--scheduler-name", "Batch_Jobs"],
        {},
        "'Batch_Jobs' is not a schedulerName: lower case letters, digits, '-' and '.'",
        id="run-bad-scheduler-name",
    ),
    pytest.param(
        ["run"],
        {"KUBESCHED_SCHEDULER_NAMES": "a,-b"},
        "KUBESCHED_SCHEDULER_NAMES='a,-b': '-b' is not a schedulerName",
        id="run-bad-scheduler-name-variable",
    ),
    pytest.param(
        ["run", "--port", "eighty"],
        {},
        "argument --port: invalid int value: 'eighty'",
        id="run-port-not-a-number",
    ),
    pytest.param(
        ["simulate", "--scenario", "{tmp}/empty.yaml"],
        {},
        "{tmp}/empty.yaml: no objects in the file",
        id="simulate-empty-scenario",
    ),
    pytest.param(
        ["simulate", "--scenario", "{tmp}/missing.yaml"],
        {},
        "{tmp}/missing.yaml: cannot read: No such file or directory",
        id="simulate-missing-scenario",
    ),
    pytest.param(
        ["bench", "--workload", "Nope", "--target", "simulate"],
        {},
        "Nope",
        id="bench-unknown-workload",
    ),
    pytest.param(
        ["validate", "{tmp}/missing.yaml"],
        {},
        "{tmp}/missing.yaml: no such file or directory",
        id="validate-missing-file",
    ),
    pytest.param(
        ["validate", "{tmp}/nothing-here"],
        {},
        "{tmp}/nothing-here: no such file or directory",
        id="validate-missing-directory",
    ),
    pytest.param(["frobnicate"], {}, "invalid choice: 'frobnicate'", id="unknown-command"),
]


MISTAKES = BAD_INPUTS + KUBECONFIG_MISTAKES


def fill(text: str, files: Path, closed_port: int) -> str:
    return text.replace("{tmp}", str(files)).replace("{closed}", str(closed_port))


def the_one_line(code: int, out: str, err: str) -> str:
    assert (code, out) == (2, ""), err
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("kubesched: error: "), err
    return lines[0]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("argv", "env", "message"), MISTAKES)
def test_a_mistake_is_one_line_and_exit_2(
    files: Path,
    closed_port: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    env: dict[str, str],
    message: str,
) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, fill(v, files, closed_port))
    code = main([fill(a, files, closed_port) for a in argv])
    out, err = capsys.readouterr()
    assert fill(message, files, closed_port) in the_one_line(code, out, err)


@pytest.mark.timeout(60)
def test_explain_of_a_pod_without_nodes_ends(
    files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # used to spin for ever: the pod's attempts fail with an error and back off
    code = main(["explain", "default/p", "--scenario", str(files / "no-nodes.yaml")])
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("Pod default/p (profile kubesched): Unschedulable\n")
    assert out.splitlines()[1] == "no nodes available to schedule pods"


def test_version_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("kubesched ")


def test_every_run_flag_names_its_environment_variable(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert ENV_PREFIX == settings.ENV_PREFIX
    assert set(FLAGS.values()) <= set(settings.Settings.model_fields)
    assert main(["run", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    for flag, field in FLAGS.items():
        entry = help_text[help_text.index(f" {flag}") :]
        entry = entry[: entry.index("]") + 1]
        assert entry.endswith(f"[env {env_var(field)}]"), (flag, entry)
    assert "[env KUBESCHED_CLIENT_QPS]" in help_text
    assert "--log-level {debug,info,warning,error} the least severe log records" in help_text
    assert "--opportunistic-batching, --no-opportunistic-batching a pod with" in help_text


def test_the_kubectl_plugin_is_the_same_command(capsys: pytest.CaptureFixture[str]) -> None:
    from kubesched.cli import kubectl_main

    assert kubectl_main(["explain", "--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: kubectl kubesched explain ")
    assert kubectl_main(["explain", "a//b"]) == 2
    assert "kubesched: error: argument NAMESPACE/NAME" in capsys.readouterr().err


def test_the_kubectl_plugin_is_installed_as_a_console_script() -> None:
    from importlib.metadata import entry_points

    [ep] = [e for e in entry_points(group="console_scripts") if e.name == "kubectl-kubesched"]
    assert ep.value == "kubesched.cli:kubectl_main"


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("argv", "env", "message"), [p for p in MISTAKES if str(p.id).startswith("run-")]
)
def test_a_run_mistake_is_one_line_in_a_process_of_its_own(
    files: Path,
    closed_port: int,
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    env: dict[str, str],
    message: str,
) -> None:
    """As ``kubesched run`` meets it: its early listing is importing in another thread
    while the settings are refused, and nothing else is imported yet (in-process, the
    test runner has imported everything)."""
    for k, v in env.items():
        monkeypatch.setenv(k, fill(v, files, closed_port))
    done = subprocess.run(
        [sys.executable, "-m", "kubesched", *(fill(a, files, closed_port) for a in argv)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    line = the_one_line(done.returncode, done.stdout, done.stderr)
    assert fill(message, files, closed_port) in line


@pytest.mark.timeout(90)
def test_run_against_an_unreachable_api_server_is_one_line(files: Path, closed_port: int) -> None:
    # a subprocess: `run` tunes the process's garbage collector and starts Kopf
    argv = ["run", "--kubeconfig", str(files / "unreachable.yaml"), "--no-leader-elect"]
    done = subprocess.run(
        [sys.executable, "-m", "kubesched", *argv, "--port", "0", "--log-level", "error"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    # the first of the start's requests to fail (the informers' retry; the others' do not)
    last = done.stderr.splitlines()[-1]
    assert last.startswith(
        f"kubesched: error: the API server at http://127.0.0.1:{closed_port}: GET /"
    )
    # the system's words for it, through the lean client the start's reads use
    assert "Connection refused" in last


def test_run_on_uvloop_without_it_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # as if not installed
    assert main(["run", "--event-loop", "uvloop", "--no-leader-elect"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "kubesched: error: --event-loop uvloop: uvloop is not installed (pip install uvloop, "
        "or --event-loop asyncio)\n"
    )


@pytest.mark.parametrize(
    ("choice", "installed", "loop"),
    [
        ("auto", True, "uvloop.Loop"),
        ("auto", False, "_UnixSelectorEventLoop"),
        ("asyncio", True, "_UnixSelectorEventLoop"),
        ("uvloop", True, "uvloop.Loop"),
    ],
)
def test_the_event_loop_run_chooses(
    monkeypatch: pytest.MonkeyPatch, choice: str, installed: bool, loop: str
) -> None:
    from kubesched.cli.run import loop_factory

    if not installed:
        monkeypatch.setitem(sys.modules, "uvloop", None)
    made = loop_factory(choice)()
    try:
        assert f"{type(made).__module__}.{type(made).__name__}".endswith(loop)
    finally:
        made.close()
