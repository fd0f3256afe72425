"""The SchedulingProfile handlers' bookkeeping against a recorded API: profiles that exist
at start are applied oldest first (the older of two with one schedulerName serves),
deleting the serving one lets the refused one serve, statuses are written only when they
change, and a Ready change is an Event reported by the scheduler's name."""

from __future__ import annotations

import copy
from typing import Any, cast

from kubesched.cluster.kube import KubeCluster
from kubesched.framework.cluster_port import NotFound
from kubesched.operator.profile_handlers import PATH, ProfileController
from tests.integration.harness import Harness

JSON = dict[str, Any]


class RecordedApi:
    """What ProfileController asks of KubeCluster: list/get/patch-status, events."""

    def __init__(self, *objs: JSON) -> None:
        self.objs = {o["metadata"]["name"]: o for o in objs}
        self.patched: list[str] = []
        self.events: list[tuple[str, str, str, str]] = []

    async def request(self, method: str, path: str, body: Any = None, **_: Any) -> Any:
        if method == "GET" and path == PATH:
            return {"items": [copy.deepcopy(o) for o in self.objs.values()]}
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


def profile(name: str, created: str, scheduler: str = "shared", generation: int = 1) -> JSON:
    return {
        "apiVersion": "kubesched.dev/v1alpha1",
        "kind": "SchedulingProfile",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "generation": generation,
            "creationTimestamp": created,
        },
        "spec": {"schedulerName": scheduler},
    }


def reason(api: RecordedApi, name: str) -> str:
    return str(api.objs[name]["status"]["conditions"][0]["reason"])


def controller(h: Harness, api: RecordedApi) -> ProfileController:
    return ProfileController(
        h.sched, cast(KubeCluster, api), builtin_names=["kubesched"], reporter="kubesched"
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
