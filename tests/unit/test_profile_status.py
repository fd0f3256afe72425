"""SchedulingProfile reconciliation: every Ready reason with the field it blames, the
status a user reads with ``kubectl get -o yaml``, and which profile serves which
schedulerName (built-in default, overrides, conflicts, deletes)."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.framework.runtime import FrameworkServices
from kubesched.profile_status import ProfileBook, Served, reconcile, validate_spec
from kubesched.profiles import CompiledProfile, ProfileError

T0 = "2030-01-01T00:00:00Z"
T1 = "2030-01-01T00:05:00Z"


def ready(status: dict[str, Any]) -> dict[str, Any]:
    conditions = status["conditions"]
    assert [c["type"] for c in conditions] == ["Ready"]
    c: dict[str, Any] = conditions[0]
    return c


ERRORS: list[tuple[str, dict[str, Any], str, str]] = [
    (
        "unknown-plugin",
        {"plugins": {"score": {"enabled": [{"name": "Nope", "weight": 2}]}}},
        "InvalidPlugin",
        "plugins.score.enabled[0].name: unknown plugin 'Nope'",
    ),
    (
        "plugin-at-a-point-it-does-not-implement",
        {"plugins": {"filter": {"enabled": [{"name": "PrioritySort"}]}}},
        "InvalidPlugin",
        "plugins.filter.enabled[0]: plugin 'PrioritySort' does not implement filter",
    ),
    (
        "two-queue-sort-plugins-after-merging",
        {"plugins": {"queueSort": {"enabled": [{"name": "NodeName"}]}}},
        "InvalidPlugin",
        "plugins.queueSort.enabled[0]: plugin 'NodeName' does not implement queueSort",
    ),
    (
        "two-queue-sort-plugins-listed",
        {"plugins": {"queueSort": {"enabled": [{"name": "PrioritySort"}, {"name": "X"}]}}},
        "InvalidSpec",
        "plugins.queueSort.enabled: at most one queueSort plugin may be enabled",
    ),
    (
        "invalid-args-with-their-path",
        {
            "pluginConfig": [
                {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "Most"}}}
            ]
        },
        "InvalidArgs",
        "pluginConfig[0].args.scoringStrategy.type: Input should be 'LeastAllocated'",
    ),
    (
        "unknown-arg",
        {"pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategi": {}}}]},
        "InvalidArgs",
        "pluginConfig[0].args.scoringStrategi: Extra inputs are not permitted",
    ),
    (
        "unknown-field",
        {"plugin": {}},
        "InvalidSpec",
        "plugin: Extra inputs are not permitted",
    ),
    (
        "percentage-above-100",
        {"percentageOfNodesToScore": 101},
        "InvalidSpec",
        "percentageOfNodesToScore: Input should be less than or equal to 100",
    ),
    (
        "star-not-alone",
        {"plugins": {"score": {"disabled": [{"name": "ImageLocality"}, {"name": "*"}]}}},
        "InvalidSpec",
        "plugins.score.disabled[1].name: '*' disables every plugin and must be the only entry",
    ),
    (
        "weight-outside-score",
        {"plugins": {"filter": {"enabled": [{"name": "NodeName", "weight": 2}]}}},
        "InvalidSpec",
        "plugins.filter.enabled[0].weight: weights are only meaningful in score and multiPoint",
    ),
    (
        "backoff-max-below-initial",
        {"backoff": {"initialSeconds": 20}},
        "InvalidSpec",
        "backoff.maxSeconds: maxSeconds must not be less than initialSeconds",
    ),
    (
        "bad-scheduler-name",
        {"schedulerName": "Big_Name"},
        "InvalidSpec",
        "schedulerName: String should match pattern",
    ),
]


@pytest.mark.parametrize(
    ("spec", "reason", "message"), [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS]
)
def test_an_invalid_spec_is_not_ready_and_names_the_field(
    spec: dict[str, Any], reason: str, message: str
) -> None:
    compiled, status = reconcile(spec, 1, {}, None, name="p", now=lambda: T0)
    assert compiled is None
    c = ready(status)
    assert (c["status"], c["reason"], c["observedGeneration"]) == ("False", reason, 1)
    assert c["message"].startswith(message), c["message"]
    assert status["activeGeneration"] is None and status["activePlugins"] is None
    with pytest.raises(ProfileError) as exc:
        validate_spec(spec)
    assert (exc.value.reason, exc.value.message) == (reason, c["message"].split("; ")[0])


def test_a_valid_spec_is_ready_and_shows_its_chain() -> None:
    spec = {
        "schedulerName": "binpack",
        "pluginConfig": [
            {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}
        ],
        "plugins": {"score": {"enabled": [{"name": "NodeResourcesFit", "weight": 5}]}},
    }
    compiled, status = reconcile(spec, 3, {}, None, name="p", now=lambda: T0)
    assert compiled is not None and compiled.scheduler_name == "binpack"
    assert ready(status) == {
        "type": "Ready",
        "status": "True",
        "observedGeneration": 3,
        "lastTransitionTime": T0,
        "reason": "Compiled",
        "message": "generation 3 serves schedulerName 'binpack'",
    }
    assert (status["observedGeneration"], status["activeGeneration"]) == (3, 3)
    assert status["schedulerName"] == "binpack"
    assert "NodeResourcesFit:5" in status["activePlugins"]["score"]
    default = validate_spec({}).framework.chain.names()
    assert status["activePlugins"]["queueSort"] == default["queueSort"]


def test_an_invalid_update_keeps_the_last_good_chain_and_says_so() -> None:
    good, _ = reconcile({"schedulerName": "a"}, 1, {}, None, name="p", now=lambda: T0)
    assert good is not None
    last = Served(1, good)
    compiled, status = reconcile(
        {"schedulerName": "a", "percentageOfNodesToScore": -1}, 2, {"a": "p"}, last, name="p"
    )
    assert compiled is None
    c = ready(status)
    assert (c["status"], c["reason"], c["observedGeneration"]) == ("False", "InvalidSpec", 2)
    assert c["message"].endswith(
        "; the last good chain (generation 1) keeps serving schedulerName 'a'"
    )
    assert (status["observedGeneration"], status["activeGeneration"]) == (2, 1)
    assert status["activePlugins"] == good.framework.chain.names()


def test_last_transition_time_moves_only_when_ready_flips() -> None:
    _, s1 = reconcile({}, 1, {}, None, now=lambda: T0)
    _, s2 = reconcile(
        {"percentageOfNodesToScore": 50}, 2, {}, None, previous_status=s1, now=lambda: T1
    )
    assert ready(s2)["lastTransitionTime"] == T0
    _, s3 = reconcile({"x": 1}, 3, {}, None, previous_status=s2, now=lambda: T1)
    assert ready(s3)["lastTransitionTime"] == T1


def test_a_second_profile_for_a_served_scheduler_name_conflicts() -> None:
    compiled, status = reconcile({"schedulerName": "a"}, 1, {"a": "first"}, None, name="second")
    assert compiled is None
    c = ready(status)
    assert c["reason"] == "SchedulerNameConflict"
    assert c["message"].startswith(
        "schedulerName: 'a' is already served by SchedulingProfile 'first'"
    )
    # The profile that serves it may update itself.
    again, _ = reconcile({"schedulerName": "a"}, 2, {"a": "first"}, None, name="first")
    assert again is not None


# -- ProfileBook ------------------------------------------------------------------------------------


class Sink:
    def __init__(self) -> None:
        self.profiles: dict[str, CompiledProfile] = {}
        self.log: list[str] = []

    def set_profile(self, profile: CompiledProfile) -> None:
        self.profiles[profile.scheduler_name] = profile
        self.log.append(f"set {profile.scheduler_name}")

    def remove_profile(self, name: str) -> None:
        self.profiles.pop(name, None)
        self.log.append(f"remove {name}")

    def services(self) -> FrameworkServices:
        return FrameworkServices()


def test_a_profile_named_kubesched_overrides_the_builtin_and_deleting_it_restores_it() -> None:
    sink = Sink()
    book = ProfileBook(sink)
    status = book.apply("mine", {"percentageOfNodesToScore": 30}, 1)
    assert ready(status)["status"] == "True"
    assert sink.profiles["kubesched"].spec.percentage_of_nodes_to_score == 30
    book.delete("mine")
    assert sink.log == ["set kubesched", "set kubesched"]
    assert sink.profiles["kubesched"].spec.percentage_of_nodes_to_score is None


def test_deleting_another_profile_stops_its_scheduler_name() -> None:
    sink = Sink()
    book = ProfileBook(sink)
    book.apply("batch", {"schedulerName": "batch"}, 1)
    assert "batch" in sink.profiles
    book.delete("batch")
    assert "batch" not in sink.profiles
    assert sink.log == ["set batch", "remove batch"]


def test_an_invalid_update_leaves_the_sink_alone() -> None:
    sink = Sink()
    book = ProfileBook(sink)
    book.apply("b", {"schedulerName": "b"}, 1)
    status = book.apply(
        "b", {"schedulerName": "b", "plugins": {"bind": {"disabled": [{"name": "*"}]}}}, 2
    )
    assert ready(status)["reason"] == "InvalidPlugin"
    assert status["activeGeneration"] == 1
    assert sink.log == ["set b"]


def test_renaming_the_scheduler_name_releases_the_old_one() -> None:
    sink = Sink()
    book = ProfileBook(sink)
    book.apply("p", {"schedulerName": "old"}, 1)
    book.apply("p", {"schedulerName": "new"}, 2)
    assert sorted(sink.profiles) == ["new"]
    assert sink.log == ["set old", "remove old", "set new"]


def test_a_conflicting_profile_is_listed_for_a_retry_once_the_name_is_free() -> None:
    sink = Sink()
    book = ProfileBook(sink)
    book.apply("first", {"schedulerName": "a"}, 1)
    status = book.apply("second", {"schedulerName": "a"}, 1)
    assert ready(status)["reason"] == "SchedulerNameConflict"
    book.delete("first")
    assert book.conflicting() == ["second"]
    status = book.apply("second", {"schedulerName": "a"}, 1)
    assert ready(status)["status"] == "True"
    assert book.conflicting() == []
    assert book.serving() == {"a": "second"}
