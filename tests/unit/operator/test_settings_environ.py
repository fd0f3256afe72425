"""How ``kubesched run`` reads its ``KUBESCHED_<FIELD>`` variables
(:mod:`kubesched.operator.environ`), as pydantic-settings read them before: names in any
case, JSON for a list setting, a comma-separated list where the setting says so, other
``KUBESCHED_*`` variables ignored, a bad one reported in one line naming it."""

from __future__ import annotations

import subprocess
import sys
from typing import Annotated

import pydantic
import pytest
from pydantic import Field

from kubesched.cli import early
from kubesched.cli.run import _settings_message
from kubesched.operator.settings import EXTRA, Option, Settings


class Extended(Settings):
    """The kinds of field a future setting may have, beside the ones Settings has."""

    zones: Annotated[list[str], Option("--zone", "h", not_in_chart=EXTRA)] = Field(
        default_factory=list
    )
    weights: Annotated[dict[str, int], Option("--weight", "h", not_in_chart=EXTRA)] = Field(
        default_factory=dict
    )
    ports: Annotated[list[int] | str | None, Option("--ports", "h", not_in_chart=EXTRA)] = None


@pytest.mark.parametrize("name", ["KUBESCHED_PORT", "kubesched_port", "Kubesched_Port"])
def test_a_variable_is_matched_in_any_case(name: str) -> None:
    assert Settings.load(environ={name: "9000"}).port == 9000


def test_of_two_spellings_of_one_variable_the_later_wins() -> None:
    assert Settings.load(environ={"KUBESCHED_PORT": "1", "kubesched_port": "2"}).port == 2
    assert Settings.load(environ={"kubesched_port": "2", "KUBESCHED_PORT": "1"}).port == 1


def test_other_kubesched_variables_are_ignored_but_an_unknown_flag_is_refused() -> None:
    env = {"KUBESCHED_CONTROLPLANE_DIR": "/cp", "KUBESCHED_NO_SUCH": "1", "KUBESCHEDPORT": "1"}
    assert Settings.load(environ=env).port == 10251
    with pytest.raises(pydantic.ValidationError, match="no_such\n  Extra inputs"):
        Settings.load({"no_such": 1}, environ={})


def test_an_empty_variable_is_a_value_not_an_unset_one() -> None:
    assert Settings.load(environ={"KUBESCHED_LEASE_NAME": ""}).lease_name == ""
    assert Settings.load(environ={"KUBESCHED_KUBECONFIG": ""}).kubeconfig == ""
    with pytest.raises(pydantic.ValidationError, match="port\n  Input should be a valid int"):
        Settings.load(environ={"KUBESCHED_PORT": ""})


def test_scheduler_names_take_a_comma_separated_list_never_json() -> None:
    names = Settings.load(environ={"KUBESCHED_SCHEDULER_NAMES": "a, b,,c"}).scheduler_names
    assert names == ["a", "b", "c"]
    # JSON is one name, not a list: refused as a schedulerName
    with pytest.raises(pydantic.ValidationError, match=r"""'\["a"\]' is not a schedulerName"""):
        Settings.load(environ={"KUBESCHED_SCHEDULER_NAMES": '["a"]'})


def test_a_list_or_dict_setting_takes_json() -> None:
    s = Extended.load(
        environ={
            "KUBESCHED_ZONES": '["a", "b"]',
            "KUBESCHED_WEIGHTS": '{"x": "2"}',
            "KUBESCHED_PORTS": "[1, 2]",
        }
    )
    assert (s.zones, s.weights, s.ports) == (["a", "b"], {"x": 2}, [1, 2])
    # a union with a list: JSON when it is JSON, else the text
    assert Extended.load(environ={"KUBESCHED_PORTS": "a,b"}).ports == "a,b"


def test_a_variable_that_is_not_json_is_one_line_naming_it() -> None:
    env = {"kubesched_zones": "a,b"}
    with pytest.raises(pydantic.ValidationError) as e:
        Extended.load(environ=env)
    assert _settings_message(e.value, {}, env) == (
        "kubesched_zones='a,b': Invalid JSON: Expecting value: line 1 column 1 (char 0)"
    )


def test_a_flag_replaces_the_variable_and_a_flag_not_given_leaves_it() -> None:
    env = {"KUBESCHED_ZONES": '["env"]', "KUBESCHED_WEIGHTS": '{"x": 1}'}
    s = Extended.load({"zones": ["flag"], "weights": None}, environ=env)
    assert (s.zones, s.weights) == (["flag"], {"x": 1})


def test_the_early_listing_reads_the_variables_as_the_settings_do() -> None:
    env = {"kubesched_watch_engine": "kopf", "KUBESCHED_Kubeconfig": "/k", "X": "y"}
    s = Settings.load(environ=env)
    assert early.peek([], env) == {"kubeconfig": s.kubeconfig, "watch_engine": s.watch_engine}
    assert s.watch_engine == "kopf"


def test_kubesched_run_imports_no_pydantic_settings_and_its_early_listing_no_pydantic() -> None:
    """The imports are most of ``kubesched run``'s time to its first bind."""
    code = (
        "import sys, kubesched.cli.early; print('pydantic' in sys.modules); "
        "import kubesched.cli.run; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'pydantic_settings', 'dotenv'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.split("\n")[:2] == ["False", "[]"]
