"""The chart against the one definition of ``kubesched run``'s settings
(:mod:`kubesched.operator.settings`): every setting with a chart value is passed by
``deployment.yaml`` the way its :class:`Option` says (flag or variable) and reaches the
setting; ``values.yaml``'s defaults are the settings' defaults; the chart passes no flag
or ``KUBESCHED_*`` variable that is not a setting. A setting added without its chart
line, or a chart edited away from the settings, fails here."""

from __future__ import annotations

import json
import typing
from typing import Any

import pytest
import yaml

from kubesched.cli import _parser
from kubesched.cli import run as run_cli
from kubesched.operator.settings import ENV_PREFIX, Settings, env_name, options
from tests.helm.chart import CHART, JSON, Helm, deployment_container

#: values.yaml path -> (a value other than its default, what the setting becomes). Every
#: chart value of a setting needs a row.
CHANGED: dict[str, tuple[Any, Any]] = {
    "schedulerName": ("batch", ["batch"]),
    "leaderElection.enabled": (True, True),
    "leaderElection.leaseDurationSeconds": (20, 20.0),
    "leaderElection.renewDeadlineSeconds": (12, 12.0),
    "leaderElection.retryPeriodSeconds": (3, 3.0),
    "port": (12345, 12345),
    "client.qps": (80, 80.0),
    "client.burst": (160, 160),
    "profileSelector": ("team in (a, b)", "team in (a, b)"),
    "logLevel": ("debug", "debug"),
}

#: Settings whose chart default is not kubesched's own, and why.
CHART_OWN_DEFAULTS = {
    "leader_elect": "null: on only with replicaCount > 1",
    "profile_selector": "null: the release's own SchedulingProfiles",
}

CHARTED = {field: opt for field, opt in options().items() if opt.chart}


def nested(path: str, value: Any) -> dict[str, Any]:
    head, _, rest = path.partition(".")
    return {head: nested(rest, value) if rest else value}


def merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for k, v in b.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def lookup(values: dict[str, Any], path: str) -> Any:
    for key in path.split("."):
        assert key in values, f"values.yaml has no {path}"
        values = values[key]
    return values


def settings_of(container: JSON, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """What ``kubesched run`` would load from the container's args and env (the image's
    ENTRYPOINT is ``kubesched run``), through the real parser."""
    for field in Settings.model_fields:
        monkeypatch.delenv(env_name(field), raising=False)
    for e in container.get("env", []):
        if "value" in e:
            monkeypatch.setenv(e["name"], e["value"])
        else:  # the downward API
            monkeypatch.setenv(e["name"], "from-" + e["valueFrom"]["fieldRef"]["fieldPath"])
    args = _parser().parse_args(["run", *container["args"]])
    return Settings.load(run_cli._given(args))


def test_every_chart_value_of_a_setting_is_under_test() -> None:
    assert sorted(CHANGED) == sorted(opt.chart for opt in CHARTED.values() if opt.chart)


def test_each_chart_value_reaches_its_setting_as_declared(
    helm: Helm, monkeypatch: pytest.MonkeyPatch
) -> None:
    values: dict[str, Any] = {}
    for path, (value, _) in CHANGED.items():
        values = merge(values, nested(path, value))
    container = deployment_container(helm.template(values=values))
    settings = settings_of(container, monkeypatch)
    env = {e["name"]: e.get("value") for e in container["env"]}
    for field, opt in CHARTED.items():
        assert opt.chart
        value, becomes = CHANGED[opt.chart]
        assert getattr(settings, field) == becomes, (field, opt.chart)
        passed_as_flag = any(
            a == opt.flag or a.startswith(opt.flag + "=") for a in container["args"]
        )
        if opt.chart_env:
            assert env.get(env_name(field)) == str(value), (field, "as the variable")
            assert not passed_as_flag, (field, "as the variable, not the flag")
        else:
            assert passed_as_flag, (field, f"as {opt.flag}")
            assert env_name(field) not in env, (field, "as the flag, not the variable")


def test_leader_election_off_reaches_the_setting(
    helm: Helm, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = {"leaderElection": {"enabled": False}}
    container = deployment_container(helm.template(values=values))
    assert settings_of(container, monkeypatch).leader_elect is False


def test_values_yaml_defaults_are_the_settings_defaults(
    helm: Helm, monkeypatch: pytest.MonkeyPatch
) -> None:
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    rendered = settings_of(deployment_container(helm.template()), monkeypatch)
    for field in Settings.model_fields:
        monkeypatch.delenv(env_name(field), raising=False)
    kubesched = Settings.load()
    for field, opt in CHARTED.items():
        assert opt.chart
        lookup(defaults, opt.chart)  # the value exists and is documented there
        if field in CHART_OWN_DEFAULTS:
            continue
        assert getattr(rendered, field) == getattr(kubesched, field), (field, opt.chart)


def test_the_chart_passes_only_settings(helm: Helm) -> None:
    values = {"leaderElection": {"enabled": True}}
    container = deployment_container(helm.template(values=values))
    flags = {opt.flag for opt in options().values()}
    flags |= {"--no-" + f.removeprefix("--") for f in flags}
    for arg in container["args"]:
        assert arg.split("=", 1)[0] in flags, f"deployment.yaml passes {arg}: not a setting"
    variables = {env_name(field) for field in Settings.model_fields}
    for e in container["env"]:
        if e["name"].startswith(ENV_PREFIX):
            assert e["name"] in variables, f"deployment.yaml sets {e['name']}: not a setting"


def test_the_schema_checks_each_chart_value_of_a_setting() -> None:
    """values.schema.json has every chart value of a setting, and a value with choices
    has the setting's (a wrong one fails ``helm install``, not the pod's start)."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    for field, opt in CHARTED.items():
        assert opt.chart
        node = schema
        for key in opt.chart.split("."):
            assert key in node.get("properties", {}), f"values.schema.json has no {opt.chart}"
            node = node["properties"][key]
        annotation = Settings.model_fields[field].annotation
        if typing.get_origin(annotation) is typing.Literal:
            assert node.get("enum") == list(typing.get_args(annotation)), opt.chart
