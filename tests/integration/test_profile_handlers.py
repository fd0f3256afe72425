"""The SchedulingProfile handlers' bookkeeping against a recorded API: profiles that exist
at start are applied oldest first (the older of two with one schedulerName serves),
deleting the serving one lets the refused one serve, statuses are written only when they
change, and a Ready change is an Event reported by the scheduler's name."""

from __future__ import annotations

import asyncio
import copy
import logging
from typing import Any, cast

import pytest

from kubesched.cluster.kube import KubeCluster
from kubesched.framework.cluster_port import NotFound
from kubesched.framework.labels import parse_label_selector
from kubesched.operator.profile_handlers import DISCOVERY, PATH, PLURAL, ProfileController
from tests.integration.harness import Harness

JSON = dict[str, Any]


class RecordedApi:
    """What ProfileController asks of KubeCluster: list/get/patch-status, events."""

    def __init__(self, *objs: JSON) -> None:
        self.objs = {o["metadata"]["name"]: o for o in objs}
        self.patched: list[str] = []
        self.events: list[tuple[str, str, str, str]] = []
        self.selectors: list[str | None] = []
        """The labelSelector of each list."""

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: dict[str, str] | None = None,
        **_: Any,
    ) -> Any:
        if method == "GET" and path == PATH:
            selector = (query or {}).get("labelSelector")
            self.selectors.append(selector)
            sel = parse_label_selector(selector or "")
            return {
                "items": [
                    copy.deepcopy(o)
                    for o in self.objs.values()
                    if sel.matches(o["metadata"].get("labels") or {})
                ]
            }
        name = path.removeprefix(PATH + "/").removesuffix("/status")
        if name not in self.objs:
            raise NotFound(path)
        if method == "GET":
            return copy.deepcopy(self.objs[name])
        assert method == "PATCH" and path.endswith("/status")
        self.objs[name]["status"] = body[0]["value"]
        self.patched.append(name)
        return None

    def post_event(self, regarding: JSON, **kw: Any) -> None:
        self.events.append(
            (regarding["name"], kw["event_type"], kw["reason"], kw["reporting_controller"])
        )


def profile(
    name: str,
    created: str,
    scheduler: str = "shared",
    generation: int = 1,
    labels: dict[str, str] | None = None,
) -> JSON:
    return {
        "apiVersion": "kubesched.dev/v1alpha1",
        "kind": "SchedulingProfile",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "generation": generation,
            "creationTimestamp": created,
            "labels": dict(labels or {}),
        },
        "spec": {"schedulerName": scheduler},
    }


def reason(api: RecordedApi, name: str) -> str:
    return str(api.objs[name]["status"]["conditions"][0]["reason"])


def controller(h: Harness, api: RecordedApi, selector: str = "") -> ProfileController:
    return ProfileController(
        h.sched,
        cast(KubeCluster, api),
        builtin_names=["kubesched"],
        reporter="kubesched",
        selector=selector,
    )


async def test_start_applies_oldest_first_and_a_delete_lets_the_refused_one_serve() -> None:
    h = Harness()
    # listed youngest first: the load sorts by creationTimestamp
    api = RecordedApi(
        profile("young", "2030-01-02T00:00:00Z"), profile("old", "2030-01-01T00:00:00Z")
    )
    ctl = controller(h, api)
    assert await ctl.load() == 2
    assert (reason(api, "old"), reason(api, "young")) == ("Compiled", "SchedulerNameConflict")
    assert "shared" in h.sched.profiles
    assert ("old", "Normal", "Compiled", "kubesched") in api.events
    assert ("young", "Warning", "SchedulerNameConflict", "kubesched") in api.events

    del api.objs["old"]
    await ctl.deleted("old")
    assert reason(api, "young") == "Compiled"
    assert ctl.book.serving() == {"shared": "young"}
    assert "shared" in h.sched.profiles


async def test_a_resume_of_what_the_load_applied_writes_nothing() -> None:
    h = Harness()
    api = RecordedApi(profile("p", "2030-01-01T00:00:00Z"))
    ctl = controller(h, api)
    await ctl.load()
    assert api.patched == ["p"]
    await ctl.applied(copy.deepcopy(api.objs["p"]))  # Kopf's resume, status as written
    assert api.patched == ["p"]
    assert len(api.events) == 1


async def test_deleting_the_only_profile_of_a_name_stops_serving_it() -> None:
    h = Harness()
    api = RecordedApi(profile("p", "2030-01-01T00:00:00Z", scheduler="batch"))
    ctl = controller(h, api)
    await ctl.load()
    assert "batch" in h.sched.profiles
    del api.objs["p"]
    await ctl.deleted("p")
    assert "batch" not in h.sched.profiles
    assert "kubesched" in h.sched.profiles  # the built-in default is untouched


# -- a profile selector: two installations, one cluster ----------------------------------------

RELEASE = "kubesched.dev/release"
MINE, THEIRS = {RELEASE: "team-a"}, {RELEASE: "team-b"}


def two_teams() -> RecordedApi:
    return RecordedApi(
        profile("a", "2030-01-01T00:00:00Z", scheduler="team-a-batch", labels=MINE),
        profile("b", "2030-01-01T00:00:00Z", scheduler="team-b-batch", labels=THEIRS),
        profile("unlabelled", "2030-01-01T00:00:00Z", scheduler="other"),
    )


async def test_without_a_selector_every_profile_is_applied() -> None:
    h = Harness()
    api = two_teams()
    assert await controller(h, api).load() == 3
    assert api.selectors == [None]
    assert {"team-a-batch", "team-b-batch", "other"} <= set(h.sched.profiles)


async def test_the_start_up_list_asks_for_the_selected_profiles_only() -> None:
    h = Harness()
    api = two_teams()
    ctl = controller(h, api, f"{RELEASE}=team-a")
    assert await ctl.load() == 1
    assert api.selectors == [f"{RELEASE}=team-a"]
    assert "team-a-batch" in h.sched.profiles
    assert not {"team-b-batch", "other"} & set(h.sched.profiles)
    assert api.patched == ["a"]  # another installation's profiles: no status, no Event
    assert [e[0] for e in api.events] == ["a"]


async def test_the_start_takes_the_profiles_listed_before_its_imports() -> None:
    # kubesched run's early listing (kubesched.cluster.prefetch) listed every profile:
    # the load applies this replica's selected ones from it, asking the API server nothing
    h = Harness()
    api = two_teams()
    ctl = controller(h, api, f"{RELEASE}=team-a")
    listed = list(api.objs.values())
    taken: list[str] = []

    async def take(kind: str) -> list[tuple[list[JSON], str]] | None:
        taken.append(kind)
        return [(copy.deepcopy(listed[:2]), "7"), (copy.deepcopy(listed[2:]), "7")]

    assert await ctl.load(take) == 1
    assert taken == ["SchedulingProfile"] and api.selectors == []  # no LIST of its own
    assert "team-a-batch" in h.sched.profiles
    assert not {"team-b-batch", "other"} & set(h.sched.profiles)
    assert api.patched == ["a"]


async def test_a_crd_the_early_listing_found_absent_is_not_asked_for_again() -> None:
    h = Harness()
    api = two_teams()
    ctl = controller(h, api)

    async def absent(kind: str) -> None:
        raise NotFound(f"{kind}: 404 (the start's listing)")

    assert await ctl.load(absent) == 0
    assert ctl.served is False and api.selectors == []
    assert not {"team-a-batch", "team-b-batch", "other"} & set(h.sched.profiles)


async def test_handlers_skip_profiles_the_selector_does_not_match() -> None:
    h = Harness()
    api = two_teams()
    ctl = controller(h, api, f"{RELEASE}=team-a")
    await ctl.load()
    # Kopf's create/resume/update of the other team's profile, then its deletion
    await ctl.applied(copy.deepcopy(api.objs["b"]))
    assert "team-b-batch" not in h.sched.profiles
    assert "status" not in api.objs["b"] and api.patched == ["a"]
    del api.objs["b"]
    await ctl.deleted("b")
    assert ctl.book.serving() == {"team-a-batch": "a"}
    assert len(api.events) == 1


async def test_a_profile_relabelled_away_is_forgotten_and_one_relabelled_in_is_applied() -> None:
    h = Harness()
    api = two_teams()
    ctl = controller(h, api, f"{RELEASE}=team-a")
    await ctl.load()
    # "a" handed over to team-b: as if deleted here (the pods of its name stay pending)
    api.objs["a"]["metadata"]["labels"] = dict(THEIRS)
    await ctl.applied(copy.deepcopy(api.objs["a"]))
    assert "team-a-batch" not in h.sched.profiles
    assert ctl.book.serving() == {}
    # "b" handed over to team-a: applied, status written, a Compiled Event
    api.objs["b"]["metadata"]["labels"] = dict(MINE)
    await ctl.applied(copy.deepcopy(api.objs["b"]))
    assert "team-b-batch" in h.sched.profiles
    assert ctl.book.serving() == {"team-b-batch": "b"}
    assert reason(api, "b") == "Compiled"
    assert ("b", "Normal", "Compiled", "kubesched") in api.events


async def test_a_refused_profile_serves_once_the_selected_one_is_relabelled_away() -> None:
    h = Harness()
    api = RecordedApi(
        profile("old", "2030-01-01T00:00:00Z", labels=MINE),
        profile("young", "2030-01-02T00:00:00Z", labels=MINE),
    )
    ctl = controller(h, api, f"{RELEASE}=team-a")
    await ctl.load()
    assert reason(api, "young") == "SchedulerNameConflict"
    api.objs["old"]["metadata"]["labels"] = {}
    await ctl.applied(copy.deepcopy(api.objs["old"]))
    assert ctl.book.serving() == {"shared": "young"}
    assert reason(api, "young") == "Compiled"


async def test_a_second_deletion_notice_changes_nothing() -> None:
    """The deletion handler, then the DELETED watch event: the second is a no-op."""
    h = Harness()
    api = RecordedApi(
        profile("old", "2030-01-01T00:00:00Z"), profile("young", "2030-01-02T00:00:00Z")
    )
    ctl = controller(h, api)
    await ctl.load()
    del api.objs["old"]
    await ctl.deleted("old")
    patched, events = list(api.patched), list(api.events)
    await ctl.deleted("old")
    assert (api.patched, api.events) == (patched, events)
    assert ctl.book.serving() == {"shared": "young"}


class NoCrdYet(RecordedApi):
    """The API server before the SchedulingProfile CRD is installed: its list is 404, and
    its group version's discovery lists it only once ``discovered`` (a moment after the
    list is served, on a real API server)."""

    def __init__(self) -> None:
        super().__init__()
        self.installed = False
        self.discovered = False
        self.looks = 0

    async def request(self, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        if method == "GET" and path == PATH:
            self.looks += 1
            if not self.installed:
                raise NotFound(path)
        if method == "GET" and path == DISCOVERY:
            if not self.installed:
                raise NotFound(path)
            listed = [{"name": "podgroups"}] + [{"name": PLURAL}] * self.discovered
            return {"kind": "APIResourceList", "resources": listed}
        return await super().request(method, path, body, **kw)


async def test_a_crd_installed_after_the_start_is_found_once_discovery_lists_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Kopf resolves the kinds it watches from the discovery when it starts: the CRD is
    # found (and Kopf started again, kopf_start) once the discovery lists it, not before
    caplog.set_level(logging.INFO, logger="kubesched.operator.profiles")
    h = Harness()
    api = NoCrdYet()
    ctl = controller(h, api)
    assert await ctl.load() == 0
    assert ctl.served is False
    assert "looking for the CRD every 60 s" in caplog.text
    watch = asyncio.create_task(ctl.watch_crd(interval=0.01))
    await asyncio.sleep(0.1)
    assert api.looks > 2 and "installed now" not in caplog.text
    api.installed = True
    await asyncio.sleep(0.1)
    assert not ctl.crd_found.is_set() and "installed now" not in caplog.text
    api.discovered = True
    await asyncio.wait_for(ctl.crd_found.wait(), 1)
    looks = api.looks
    assert ctl.served is True
    found = [r for r in caplog.records if "installed now" in r.getMessage()]
    assert [(r.levelname, r.getMessage()) for r in found] == [
        (
            "INFO",
            "the SchedulingProfile CRD is installed now: SchedulingProfiles are applied "
            "from now on (Kopf restarts to watch them)",
        )
    ]
    await asyncio.sleep(0.05)
    assert api.looks == looks and not watch.done()  # said once; the task waits on
    watch.cancel()
    await asyncio.gather(watch, return_exceptions=True)


async def test_with_the_crd_installed_at_the_start_nothing_is_looked_for() -> None:
    h = Harness()
    api = NoCrdYet()
    api.installed = True
    ctl = controller(h, api)
    await ctl.load()
    watch = asyncio.create_task(ctl.watch_crd(interval=0.01))
    await asyncio.sleep(0.05)
    assert (api.looks, watch.done(), ctl.crd_found.is_set()) == (1, False, False)
    watch.cancel()
    await asyncio.gather(watch, return_exceptions=True)
