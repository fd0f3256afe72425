"""Status in each foreign API's shape (scheduler-plugins, Kubernetes), the writer's path
for them, and the discovery that starts and stops their watches."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched.api import gangs
from kubesched.api.gangs import STORE_KINDS, GangAPI
from kubesched.framework.cluster_port import ClusterError, NotFound
from kubesched.operator.gang_sources import GangAPIForbidden, GangSources
from kubesched.operator.gang_status import scheduler_plugins_status, upstream_conditions
from kubesched.plugins.coscheduling import GangReport
from tests.unit.operator.test_podgroup_handlers import JSON, FakeApi, Setup

pytestmark = pytest.mark.looptime

UP, X = STORE_KINDS[GangAPI.UPSTREAM], STORE_KINDS[GangAPI.SCHEDULER_PLUGINS]


def pod(name: str, phase: str = "Pending", node: str = "", **spec: Any) -> JSON:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "ownerReferences": [{"name": "job-a"}],
        },
        "spec": {**({"nodeName": node} if node else {}), **spec},
        "status": {"phase": phase},
    }


def x_group(min_member: int = 2, **status: Any) -> JSON:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "ns", "uid": "uid-g", "resourceVersion": "1"},
        "spec": {"minMember": min_member},
        "status": status,
    }


@pytest.mark.parametrize(
    ("phases", "phase", "counts"),
    [
        pytest.param(["Pending"], "Pending", (0, 0, 0), id="fewer-than-min"),
        pytest.param(["Pending", "Pending"], "Scheduling", (0, 0, 0), id="all-exist"),
        pytest.param(["Running", "Running", "Pending"], "Running", (2, 0, 0), id="running"),
        pytest.param(["Succeeded", "Succeeded"], "Finished", (0, 2, 0), id="finished"),
        pytest.param(["Running", "Failed"], "Failed", (1, 0, 1), id="failed"),
    ],
)
def test_scheduler_plugins_phase_and_counts(
    phases: list[str], phase: str, counts: tuple[int, int, int]
) -> None:
    pods = [pod(f"p{i}", ph) for i, ph in enumerate(phases)]
    s = scheduler_plugins_status(x_group(), 2, pods, schedule_start_time="2026-01-01T00:00:00Z")
    assert s["phase"] == phase
    assert (s["running"], s["succeeded"], s["failed"]) == counts
    assert s["scheduleStartTime"] == "2026-01-01T00:00:00Z"
    assert s.get("occupiedBy") == (None if phase == "Pending" else "ns/job-a")


def upstream_group(**status: Any) -> JSON:
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": "g",
            "namespace": "ns",
            "uid": "uid-g",
            "generation": 3,
            "resourceVersion": "1",
        },
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
        "status": status,
    }


def test_upstream_condition_as_kube_scheduler_writes_it() -> None:
    assert (
        upstream_conditions(upstream_group(), scheduled=False, unschedulable="", now="t0") is None
    )
    (c,) = (
        upstream_conditions(
            upstream_group(), scheduled=False, unschedulable="1/2 members fit", now="t0"
        )
        or []
    )
    assert c == {
        "type": "PodGroupInitiallyScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "1/2 members fit",
        "lastTransitionTime": "t0",
        "observedGeneration": 3,
    }
    other = {
        "type": "DisruptionTarget",
        "status": "False",
        "reason": "x",
        "message": "",
        "lastTransitionTime": "t0",
    }
    later = upstream_conditions(
        upstream_group(conditions=[other, c]), scheduled=True, unschedulable="", now="t1"
    )
    assert later is not None and later[0] == other
    assert (later[1]["status"], later[1]["reason"], later[1]["message"]) == (
        "True",
        "Scheduled",
        "",
    )
    assert later[1]["lastTransitionTime"] == "t1"
    # never back to False once scheduled (a later attempt for extra members)
    again = upstream_conditions(
        upstream_group(conditions=later), scheduled=False, unschedulable="no", now="t2"
    )
    assert again == later


def test_upstream_condition_of_a_group_not_tried_says_scheduler_error() -> None:
    # kube-scheduler's reason when the group failed with an error (its pods disagree),
    # not for want of room
    (c,) = (
        upstream_conditions(
            upstream_group(), scheduled=False, unschedulable="pods differ", now="t0", error=True
        )
        or []
    )
    assert (c["status"], c["reason"], c["message"]) == ("False", "SchedulerError", "pods differ")


async def test_writer_patches_each_foreign_api_in_its_shape() -> None:
    s = Setup()
    s.plugin.reports["ns/g"] = GangReport(frozenset(), "1/2 members fit; 1 pods: x", False, None)

    def report(namespace: str, name: str, api: GangAPI = GangAPI.KUBESCHED) -> Any:
        return s.plugin.reports.get(f"{namespace}/{name}") if api is GangAPI.UPSTREAM else None

    s.plugin.report = report  # type: ignore[method-assign]
    s.put(UP, upstream_group())
    s.put("Pod", pod("a", schedulingGroup={"podGroupName": "g"}))
    s.put(X, x_group(min_member=1))
    s.put(
        "Pod",
        {
            **pod("b", "Running", node="n1"),
            "metadata": {**pod("b")["metadata"], "labels": {"scheduling.x-k8s.io/pod-group": "g"}},
        },
    )
    await asyncio.sleep(1)
    patches = dict(s.api.patches)
    up = patches["/apis/scheduling.k8s.io/v1beta1/namespaces/ns/podgroups/g/status"]
    assert up["conditions"][0]["reason"] == "Unschedulable"
    assert up["conditions"][0]["message"] == "1/2 members fit; 1 pods: x"
    x = patches["/apis/scheduling.x-k8s.io/v1alpha1/namespaces/ns/podgroups/g/status"]
    assert (x["phase"], x["running"]) == ("Running", 1)
    n = len(s.api.patches)
    await s.writer.tick()  # unchanged: nothing written again
    assert len(s.api.patches) == n


class Discovery(FakeApi):
    """API discovery (``GET /apis/<group>/<version>``) and the listing that checks a
    served kind may be listed (403 for the paths in ``forbidden``)."""

    def __init__(self) -> None:
        super().__init__()
        self.served: dict[str, list[str]] = {}
        self.forbidden: set[str] = set()

    async def request(
        self, method: str, path: str, body: Any = None, content_type: str = "", **_: Any
    ) -> Any:
        gv, _slash, plural = path.removeprefix("/apis/").rpartition("/")
        if gv in self.served and plural in self.served[gv]:
            if path in self.forbidden:
                err = ClusterError(f"GET {path}: 403 {plural} is forbidden: cannot list")
                err.code = "403"
                raise err
            return {"items": []}
        gv = path.removeprefix("/apis/")
        if gv not in self.served:
            raise NotFound(f"{path} not found")
        return {"resources": [{"name": r} for r in self.served[gv]]}


class FakeInformer:
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.synced = asyncio.Event()
        self.synced.set()

    async def run(self) -> None:
        await asyncio.Event().wait()


async def test_discovery_picks_up_an_api_served_later_and_drops_one_gone(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api = Discovery()
    seen: list[tuple[str, str | None]] = []
    src = GangSources(api, lambda k, t, o: seen.append((k, t)), informer=FakeInformer)  # type: ignore[arg-type]
    caplog.set_level(logging.INFO, "kubesched.operator.gang_sources")
    await src.start()
    assert src.running == {}
    assert "not served: scheduling.k8s.io/v1beta1 PodGroup" in caplog.text
    api.served["scheduling.x-k8s.io/v1alpha1"] = ["podgroups", "podgroups/status"]
    await src.poll()
    assert set(src.running) == {X}
    assert (
        "gang APIs served: kubesched.dev/v1alpha1 PodGroup (CRD), scheduling.x-k8s.io/v1alpha1 PodGroup;"
        in caplog.text
    )
    api.put(X, x_group())
    del api.served["scheduling.x-k8s.io/v1alpha1"]
    await src.poll()
    assert src.running == {}
    assert seen == [(X, "DELETED")]


async def test_a_served_api_we_may_not_list_fails_the_start_with_the_403() -> None:
    api = Discovery()
    api.served["scheduling.k8s.io/v1beta1"] = ["podgroups", "workloads"]
    api.forbidden.add("/apis/scheduling.k8s.io/v1beta1/workloads")
    src = GangSources(api, lambda k, t, o: None, informer=FakeInformer)  # type: ignore[arg-type]
    with pytest.raises(GangAPIForbidden) as raised:
        await src.start()
    assert str(raised.value).startswith(
        "scheduling.k8s.io/v1beta1 Workload is served, but kubesched may not list it "
        "(GET /apis/scheduling.k8s.io/v1beta1/workloads: 403 workloads is forbidden"
    )
    assert "list and watch on workloads.scheduling.k8s.io" in str(raised.value)
    assert src.running == {}  # the PodGroups' watch is not left behind either


async def test_an_api_served_later_but_forbidden_is_logged_and_tried_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api = Discovery()
    src = GangSources(api, lambda k, t, o: None, informer=FakeInformer)  # type: ignore[arg-type]
    await src.start()
    api.served["scheduling.x-k8s.io/v1alpha1"] = ["podgroups", "podgroups/status"]
    api.forbidden.add("/apis/scheduling.x-k8s.io/v1alpha1/podgroups")
    await src.poll()  # not fatal once running: the other gangs keep being scheduled
    assert src.running == {}
    (error,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert error.getMessage().startswith(
        "scheduling.x-k8s.io/v1alpha1 PodGroup is served, but kubesched may not list it "
        "(GET /apis/scheduling.x-k8s.io/v1alpha1/podgroups: 403"
    )
    assert error.getMessage().endswith("; retrying at the next discovery poll")
    api.forbidden.clear()  # the rule granted
    await src.poll()
    assert set(src.running) == {X}


async def test_an_informer_failing_before_it_listed_neither_hangs_the_start_nor_sticks(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The API went away between discovery and the informer's listing (its 404), or RBAC
    changed: the start goes on without that kind, and the next poll starts it again."""
    api = Discovery()
    api.served["scheduling.x-k8s.io/v1alpha1"] = ["podgroups", "podgroups/status"]
    failing = [True]

    class Failing(FakeInformer):
        def __init__(self, kind: str) -> None:
            super().__init__(kind)
            if failing[0]:
                self.synced.clear()

        async def run(self) -> None:
            if failing[0]:
                raise ClusterError("GET /apis/scheduling.x-k8s.io/v1alpha1/podgroups: 404")
            await super().run()

    src = GangSources(api, lambda k, t, o: None, informer=Failing)  # type: ignore[arg-type]
    await asyncio.wait_for(src.start(), 5)
    assert src.running == {}
    assert (
        "listing scheduling.x-k8s.io/v1alpha1 PodGroup failed (GET /apis/scheduling.x-k8s.io/"
        "v1alpha1/podgroups: 404): retrying at the next discovery poll" in caplog.text
    )
    failing[0] = False
    await src.poll()
    assert set(src.running) == {X}


def test_the_scheduler_plugins_crd_copy_holds_what_we_read_and_write() -> None:
    """The test copy of scheduler-plugins' CRD and our model of it cannot drift apart."""
    path = Path(__file__).parents[2] / "crds" / "podgroups.scheduling.x-k8s.io.yaml"
    crd = yaml.safe_load(path.read_text())
    (version,) = crd["spec"]["versions"]
    schema = version["schema"]["openAPIV3Schema"]["properties"]
    assert set(schema["spec"]["properties"]) == {
        f.alias for f in gangs._XSpec.model_fields.values()
    }
    pods = [pod("a", "Running"), pod("b", "Failed")]
    written = scheduler_plugins_status(x_group(), 1, pods, schedule_start_time="t")
    assert set(written) <= set(schema["status"]["properties"])
    assert "status" in version["subresources"]


async def test_an_invalid_kubernetes_pod_group_says_why_on_its_condition() -> None:
    s = Setup()

    def no_report(namespace: str, name: str, api: GangAPI = GangAPI.KUBESCHED) -> None:
        return None

    s.plugin.report = no_report  # type: ignore[method-assign]
    s.put(
        UP,
        {
            **upstream_group(),
            "spec": {"workloadRef": {"workloadName": "job", "templateName": "ps"}},
        },
    )
    s.api.put(
        "Workload.scheduling.k8s.io",
        {
            "metadata": {"name": "job", "namespace": "ns"},
            "spec": {"podGroupTemplates": [{"name": "workers", "schedulingPolicy": {"basic": {}}}]},
        },
    )
    await s.writer.sync("scheduling.k8s.io/ns/g")
    ((path, status),) = s.api.patches
    assert path == "/apis/scheduling.k8s.io/v1beta1/namespaces/ns/podgroups/g/status"
    (c,) = status["conditions"]
    assert (c["status"], c["reason"]) == ("False", "Unschedulable")
    assert c["message"] == (
        "PodGroup scheduling.k8s.io/ns/g is invalid: spec.workloadRef.templateName: Workload "
        '"ns/job" has no podGroupTemplate named "ps" (it has: "workers")'
    )
