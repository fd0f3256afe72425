"""The bench's gangs as Kubernetes' own Workload/PodGroup objects (cluster target)."""

from __future__ import annotations

import asyncio
from typing import Any

from kubesched.bench.cluster import BenchOptions, ClusterDriver, notes
from kubesched.bench.gangs import as_member, feature_gates_flag, served, upstream_objects
from kubesched.bench.report import RunResult
from kubesched.simulator.workloads import plan


def test_a_workload_with_a_template_per_size_and_a_pod_group_per_gang() -> None:
    objs = upstream_objects({"gang-0": 3, "gang-1": 5, "gang-2": 3})
    workload, *groups = objs
    assert workload["kind"] == "Workload"
    assert workload["spec"]["podGroupTemplates"] == [
        {"name": "gang-of-3", "schedulingPolicy": {"gang": {"minCount": 3}}},
        {"name": "gang-of-5", "schedulingPolicy": {"gang": {"minCount": 5}}},
    ]
    assert [(g["metadata"]["name"], g["spec"]) for g in groups] == [
        (
            "gang-0",
            {
                "workloadRef": {"workloadName": "bench-gangs-0", "templateName": "gang-of-3"},
                "schedulingPolicy": {"gang": {"minCount": 3}},
            },
        ),
        (
            "gang-1",
            {
                "workloadRef": {"workloadName": "bench-gangs-0", "templateName": "gang-of-5"},
                "schedulingPolicy": {"gang": {"minCount": 5}},
            },
        ),
        (
            "gang-2",
            {
                "workloadRef": {"workloadName": "bench-gangs-0", "templateName": "gang-of-3"},
                "schedulingPolicy": {"gang": {"minCount": 3}},
            },
        ),
    ]
    assert {o["apiVersion"] for o in objs} == {"scheduling.k8s.io/v1beta1"}


def test_a_member_joins_through_scheduling_group_and_loses_our_label() -> None:
    the_plan = plan("Gang", 10, 20)
    member = the_plan.measured[0]
    joined = as_member(member)
    assert joined["spec"]["schedulingGroup"] == {"podGroupName": "gang-0"}
    assert "kubesched.dev/pod-group" not in joined["metadata"]["labels"]
    assert "kubesched.dev/pod-group" in member["metadata"]["labels"]  # the plan is untouched
    lone = {"metadata": {"name": "p", "labels": {"a": "b"}}, "spec": {}}
    assert as_member(lone) == lone


def test_the_driver_creates_upstream_objects_in_the_run_namespace() -> None:
    driver = ClusterDriver(None, "bench-ns", "kube-scheduler-bench", None)  # type: ignore[arg-type]
    driver.upstream_gangs = True
    workload, group = upstream_objects({"g": 2})[:2]
    assert driver._path(driver.localize(workload)) == (
        "/apis/scheduling.k8s.io/v1beta1/namespaces/bench-ns/workloads"
    )
    assert driver._path(driver.localize(group)) == (
        "/apis/scheduling.k8s.io/v1beta1/namespaces/bench-ns/podgroups"
    )
    pod = driver.localize(plan("Gang", 10, 20).measured[0])
    assert pod["spec"]["schedulingGroup"] == {"podGroupName": "gang-0"}
    assert pod["spec"]["schedulerName"] == "kube-scheduler-bench"


def test_served_needs_both_kinds() -> None:
    async def answer(listing: Any) -> bool:
        async def request(method: str, path: str) -> Any:
            assert (method, path) == ("GET", "/apis/scheduling.k8s.io/v1beta1")
            if isinstance(listing, Exception):
                raise listing
            return listing

        return await served(request)

    both = {"resources": [{"name": "workloads"}, {"name": "podgroups"}, {"name": "x/status"}]}
    assert asyncio.run(answer(both)) is True
    assert asyncio.run(answer({"resources": [{"name": "priorityclasses"}]})) is False
    assert asyncio.run(answer(RuntimeError("404"))) is False


def test_notes_say_which_gang_api_both_schedulers_used() -> None:
    options = BenchOptions(workload="Gang")
    up = RunResult("kubesched", 1, gang_api="scheduling.k8s.io/v1beta1")
    theirs = RunResult("kube-scheduler", 1, gang_api="scheduling.k8s.io/v1beta1")
    (note,) = notes(options, {"kubesched": up, "kube-scheduler": theirs})
    assert "kube-scheduler with its own gang scheduling" in note
    ours = RunResult("kubesched", 1, gang_api="kubesched.dev/v1alpha1")
    none = RunResult("kube-scheduler", 1, gang_api="none")
    (note,) = notes(options, {"kubesched": ours, "kube-scheduler": none})
    assert "does not serve scheduling.k8s.io/v1beta1" in note
    assert notes(options, {"kubesched": ours}) == []
    assert feature_gates_flag() == (
        "--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true"
    )


def test_workloads_hold_at_most_eight_templates_as_kube_apiserver_allows() -> None:
    gangs = {f"g{i}": 2 + i for i in range(10)}
    objs = upstream_objects(gangs)
    workloads = [o for o in objs if o["kind"] == "Workload"]
    assert [len(w["spec"]["podGroupTemplates"]) for w in workloads] == [8, 2]
    templates = {
        (w["metadata"]["name"], t["name"])
        for w in workloads
        for t in w["spec"]["podGroupTemplates"]
    }
    for group in (o for o in objs if o["kind"] == "PodGroup"):
        ref = group["spec"]["workloadRef"]
        assert (ref["workloadName"], ref["templateName"]) in templates
