"""The Helm chart on the real kube-apiserver, RBAC enforced.

``helm install`` (as admin) puts the chart's ServiceAccount, ClusterRole, Role and
bindings in the cluster; the Deployment never runs (there is no kubelet), so the operator
runs here instead, with a token minted for the chart's ServiceAccount (TokenRequest), never
the admin's. The module's control plane serves both foreign gang APIs (``GenericWorkload``
and ``scheduling.k8s.io/v1beta1`` on, scheduler-plugins' PodGroup CRD installed), so their
rules are shown to be needed too, and DynamicResources' (the test publishes a device as a
driver would). That shows:

- the Deployment's own command line works with those credentials: pods are bound,
  Events and the PodScheduled condition written, the Lease taken, nothing forbidden;
- every scenario the rules exist for succeeds with the full ClusterRole (the control);
- removing any one rule breaks a named check with the API server's own 403 for exactly
  that permission and API group (one control plane; the role is swapped, not
  reinstalled); a read rule's removal fails ``kubesched run``'s start with it, the foreign
  gang kinds' included;
- two releases with different schedulerNames install side by side and each schedules
  only its own pods.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from kubesched.cluster.prefetch import Prefetch
from tests.controlplane import ApiError, Binaries, ControlPlane, wait_for
from tests.e2e.helm_access import ACCESS_CHECKS, AccessCheck, access_objects
from tests.e2e.helm_dra_scenarios import DRA_SCENARIOS
from tests.e2e.helm_gang_scenarios import GANG_SCENARIOS, gang_control_plane
from tests.e2e.helm_support import (
    POOL,
    SCENARIOS,
    Release,
    Replica,
    Scenario,
    World,
    captured_logs,
    install,
    lease_holder,
    operator,
    remove_with_finalizers,
    sa_kubeconfig,
    scheduled_events,
    settings_for,
    start_failure,
    uid,
)
from tests.e2e.helm_volume_scenarios import VOLUME_SCENARIOS
from tests.e2e.support import JSON, call, condition, events_for
from tests.helm.chart import Helm, helm, of_kind

__all__ = ["helm"]

pytestmark = pytest.mark.timeout(120)

RuleKey = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]
"""A PolicyRule as (apiGroups, resources, verbs)."""

ALL_SCENARIOS: dict[str, Scenario] = {
    **SCENARIOS,
    **VOLUME_SCENARIOS,
    **GANG_SCENARIOS,
    **DRA_SCENARIOS,
}


@pytest.fixture(scope="module")
def plane(controlplane_binaries: Binaries) -> Iterator[ControlPlane]:
    """This module's own control plane, serving the foreign gang APIs (the shared one
    runs with the release's defaults, where Kubernetes' PodGroup is not served)."""
    for cp in gang_control_plane(controlplane_binaries):
        # the built-in view/edit/admin gather the chart's PodGroup roles (aggregation)
        cp.start_controller_manager(["clusterrole-aggregation-controller"])
        yield cp


def served(cp: ControlPlane, kind: str) -> bool:
    try:
        cp.api.list("kubesched.dev/v1alpha1", kind)
    except ApiError as e:
        if e.status == 429:
            return False
        raise
    return True


@pytest.fixture(scope="module")
def world(helm: Helm, plane: ControlPlane) -> Iterator[World]:
    cp, tag = plane, uid()
    release = install(
        helm,
        cp,
        "ks",
        f"helm-{tag}",
        {"schedulerName": f"ks-{tag}", "replicaCount": 2, "rbac": {"debugReader": True}},
    )
    # The chart made kubesched's CRDs: until their storage is up, a request gets 429
    # "storage is (re)initializing" (kubesched retries it; a check's client does not).
    for kind in ("PodGroup", "SchedulingProfile"):
        wait_for(functools.partial(served, cp, kind), timeout=30, what=f"{kind}s served")
    pool = {POOL: tag}
    cp.create_nodes(2, cpu="2", labels=pool, prefix=f"helm-{tag}-")
    low, high = f"helm-low-{tag}", f"helm-high-{tag}"
    for name, value in ((low, 10), (high, 1000)):
        cp.api.create(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
            }
        )
    w = World(cp, release, sa_kubeconfig(cp, release), pool, low, high)
    yield w
    for fn in reversed(w.cleanup):
        with contextlib.suppress(ApiError):
            fn()
    for pod in cp.api.list("v1", "Pod", release.namespace):
        cp.api.remove(
            "v1", "Pod", pod["metadata"]["name"], release.namespace, grace_period_seconds=0
        )


# -- the rules, each with the check that needs it --------------------------------------------


@dataclass(frozen=True)
class Need:
    """Without ``rule`` (apiGroups, resources, verbs), ``scenario`` fails with the API
    server's ``cannot <verb> resource "<resource>" in API group "<group>"`` (or, for a
    read rule, ``kubesched run`` does not start, saying so)."""

    rule: RuleKey
    verb: str
    resource: str
    scenario: str | None  # None: the initial sync fails
    before: Callable[[World], None] | None = None


def _delete_lease(w: World) -> None:
    # a Lease left by an earlier run needs no create: remove it, so one is needed
    w.cp.api.remove("coordination.k8s.io/v1", "Lease", w.release.lease_name, w.ns)


def rule(groups: str, resources: str, verbs: str) -> RuleKey:
    return tuple(groups.split(",")), tuple(resources.split(",")), tuple(verbs.split(","))


CORE_READS = (
    "nodes,namespaces,services,replicationcontrollers,persistentvolumeclaims,persistentvolumes"
)

NEEDS: dict[str, Need] = {
    "pods-read": Need(rule("", "pods", "list,watch"), "list", "pods", None),
    "pods-binding": Need(rule("", "pods/binding", "create"), "create", "pods/binding", "bind"),
    "pods-status": Need(rule("", "pods/status", "patch"), "patch", "pods/status", "unschedulable"),
    "pods-delete": Need(rule("", "pods", "delete"), "delete", "pods", "preempt"),
    "events": Need(rule("events.k8s.io", "events", "create"), "create", "events", "bind"),
    "core-reads": Need(rule("", CORE_READS, "list,watch"), "list", "nodes", None),
    "apps-reads": Need(
        rule("apps", "replicasets,statefulsets", "list,watch"), "list", "replicasets", None
    ),
    "storage-reads": Need(
        rule(
            "storage.k8s.io",
            "storageclasses,csinodes,csidrivers,csistoragecapacities",
            "list,watch",
        ),
        "list",
        "storageclasses",
        None,
    ),
    "pdb-reads": Need(
        rule("policy", "poddisruptionbudgets", "list,watch"), "list", "poddisruptionbudgets", None
    ),
    "priorityclass-reads": Need(
        rule("scheduling.k8s.io", "priorityclasses", "list,watch"), "list", "priorityclasses", None
    ),
    "pv-update": Need(
        rule("", "persistentvolumes", "update"), "update", "persistentvolumes", "static-volume"
    ),
    "pvc-update": Need(
        rule("", "persistentvolumeclaims", "update"),
        "update",
        "persistentvolumeclaims",
        "dynamic-volume",
    ),
    "dra-reads": Need(
        rule("resource.k8s.io", "deviceclasses,resourceslices,resourceclaims", "list,watch"),
        "list",
        "deviceclasses",
        None,
    ),
    "dra-taint-rule-reads": Need(
        rule("resource.k8s.io", "devicetaintrules", "list,watch"), "list", "devicetaintrules", None
    ),
    "dra-claim-finalizer": Need(
        rule("resource.k8s.io", "resourceclaims", "update"), "update", "resourceclaims", "dra"
    ),
    "dra-claim-status": Need(
        rule("resource.k8s.io", "resourceclaims/status", "update,patch"),
        "update",
        "resourceclaims/status",
        "dra",
    ),
    "dra-claim-binding": Need(
        rule("resource.k8s.io", "resourceclaims/binding", "update,patch"),
        "update",
        "resourceclaims/binding",
        "dra",
    ),
    "dra-claim-create": Need(
        rule("resource.k8s.io", "resourceclaims", "create"),
        "create",
        "resourceclaims",
        "dra-extended",
    ),
    "dra-claim-delete": Need(
        rule("resource.k8s.io", "resourceclaims", "delete"),
        "delete",
        "resourceclaims",
        "dra-extended-stale",
    ),
    "podgroups": Need(
        rule("kubesched.dev", "podgroups", "list,watch,patch"), "list", "podgroups", None
    ),
    "podgroups-status": Need(
        rule("kubesched.dev", "podgroups/status", "patch"), "patch", "podgroups/status", "gang"
    ),
    "gang-api-reads": Need(
        rule("scheduling.k8s.io", "podgroups,workloads", "list,watch"), "list", "podgroups", None
    ),
    "gang-api-status": Need(
        rule("scheduling.k8s.io", "podgroups/status", "patch"),
        "patch",
        "podgroups/status",
        "upstream-gang",
    ),
    "scheduler-plugins-reads": Need(
        rule("scheduling.x-k8s.io", "podgroups", "list,watch"), "list", "podgroups", None
    ),
    "scheduler-plugins-status": Need(
        rule("scheduling.x-k8s.io", "podgroups/status", "patch"),
        "patch",
        "podgroups/status",
        "scheduler-plugins-gang",
    ),
    "schedulingprofiles": Need(
        rule("kubesched.dev", "schedulingprofiles", "get,list,watch,patch"),
        "list",
        "schedulingprofiles",
        None,
    ),
    "schedulingprofiles-status": Need(
        rule("kubesched.dev", "schedulingprofiles/status", "patch"),
        "patch",
        "schedulingprofiles/status",
        "profile",
    ),
    "lease-create": Need(
        rule("coordination.k8s.io", "leases", "create"), "create", "leases", "lease", _delete_lease
    ),
    "lease-renew": Need(
        rule("coordination.k8s.io", "leases", "get,update"), "get", "leases", "lease"
    ),
}


def rule_key(r: JSON) -> RuleKey:
    return tuple(r["apiGroups"]), tuple(r["resources"]), tuple(r["verbs"])


def forbidden_pattern(need: Need) -> str:
    """The API server's words for this permission (RBAC's forbidden message), quotes
    escaped any number of times (a JSON body inside a repr)."""
    q = r'\\*"'
    group = re.escape(need.rule[0][0])
    # a rule naming several resources: kubesched lists them at once at start, so the first
    # refusal may name any of them (all of them are this rule's, and no other rule's)
    resources = need.rule[1] if need.scenario is None else (need.resource,)
    one = "|".join(re.escape(r) for r in resources)
    return rf"cannot {need.verb} resource {q}(?:{one}){q} in API group {q}{group}{q}"


# -- swapping a role's rules ------------------------------------------------------------------


def can(cp: ControlPlane, release: Release, verb: str, group: str, resource: str) -> bool:
    plural, _, sub = resource.partition("/")
    review = cp.api.post(
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": release.user,
                "groups": [
                    "system:serviceaccounts",
                    f"system:serviceaccounts:{release.namespace}",
                    "system:authenticated",
                ],
                "resourceAttributes": {
                    "namespace": release.namespace,
                    "verb": verb,
                    "group": group,
                    "resource": plural,
                    "subresource": sub,
                    "name": release.lease_name if plural == "leases" and verb != "create" else "",
                },
            },
        },
    )
    return bool(review["status"].get("allowed"))


@contextlib.contextmanager
def without(w: World, need: Need) -> Iterator[None]:
    """The release's (Cluster)Role minus the rule ``need`` names; restored afterwards."""
    cp, release = w.cp, w.release
    is_lease = need.resource == "leases"
    original = release.role if is_lease else release.cluster_role
    kind = original["kind"]
    ns = release.namespace if is_lease else None
    path = cp.api.path("rbac.authorization.k8s.io/v1", kind, original["metadata"]["name"], ns)
    rules = [r for r in original["rules"] if rule_key(r) != need.rule]
    assert len(rules) == len(original["rules"]) - 1, f"the chart has no rule {need.rule}"
    group = need.rule[0][0]

    def put(new_rules: list[JSON]) -> None:
        current = cp.api.get(path)
        current["rules"] = new_rules
        cp.api.put(path, current)

    put(rules)
    try:
        wait = time.monotonic() + 10
        while can(cp, release, need.verb, group, need.resource):
            assert time.monotonic() < wait, "RBAC did not take the rule away"
            time.sleep(0.05)
        yield
    finally:
        put(copy.deepcopy(original["rules"]))
        wait = time.monotonic() + 10
        while not can(cp, release, need.verb, group, need.resource):
            assert time.monotonic() < wait, "RBAC did not give the rule back"
            time.sleep(0.05)


# -- tests ------------------------------------------------------------------------------------


def test_every_rule_has_a_check(world: World) -> None:
    rules = {rule_key(r) for r in world.release.cluster_role["rules"]}
    rules |= {rule_key(r) for r in world.release.role["rules"]}
    checked = {n.rule for n in NEEDS.values()}
    assert rules == checked, (
        f"rules without a check: {rules - checked}; checks of no rule: {checked - rules}"
    )
    # the access objects (readers, auth-delegator, aggregated PodGroup roles): one check each
    assert set(access_objects(world)) == set(ACCESS_CHECKS)


@pytest.mark.parametrize("check", ACCESS_CHECKS.values(), ids=ACCESS_CHECKS.keys())
async def test_each_access_object_does_its_job(world: World, check: AccessCheck) -> None:
    await check(world)


async def test_the_full_role_lets_every_scenario_succeed(world: World) -> None:
    """The control for test_each_rule_is_needed: with every rule, nothing is forbidden."""
    with captured_logs() as logs:
        async with operator(
            settings_for(
                world.release, world.kubeconfig, f"{world.release.name}-{world.ns}-e2e-full"
            ),
            world,
        ):
            for name, scenario in ALL_SCENARIOS.items():
                out = await scenario(world, logs, None)
                assert out.ok, f"{name}: {out.detail}"
        assert not logs.forbidden(), logs.forbidden()


@pytest.mark.parametrize("need", NEEDS.values(), ids=NEEDS.keys())
async def test_each_rule_is_needed(world: World, need: Need) -> None:
    pattern = forbidden_pattern(need)
    if need.before is not None:
        await call(need.before, world)
    with without(world, need), captured_logs() as logs:
        settings = settings_for(
            world.release, world.kubeconfig, f"{world.release.name}-{world.ns}-e2e-{uid()}"
        )
        if need.scenario is None:
            # and with the command's start-up prefetch: the kind it is refused is left to
            # the initial sync, which fails the start in the same words
            for prefetch in (None, Prefetch(settings.kubeconfig).start()):
                error = await start_failure(settings, prefetch)
                assert re.search(pattern, str(error)), f"{type(error).__name__}: {error}"
            return
        async with operator(settings, world):
            out = await ALL_SCENARIOS[need.scenario](world, logs, pattern)
        assert not out.ok, f"{need.scenario} succeeded without {need.rule}"
        assert re.search(pattern, out.detail)


def failed_events(cp: ControlPlane, namespace: str, pod: str) -> list[JSON]:
    return [e for e in events_for(cp, namespace, pod) if e["reason"] == "FailedScheduling"]


def test_the_deployment_command_schedules_with_the_service_account(world: World) -> None:
    """The chart's container run with the ServiceAccount's token: binds, Events, the
    PodScheduled condition, the Lease; nothing forbidden; a clean exit on SIGTERM."""
    cp, release = world.cp, world.release
    replica = Replica(cp, release, world.kubeconfig)
    try:
        fits, nofit = f"cmd-{uid()}", f"cmd-nofit-{uid()}"
        world.pod(fits)
        world.pod(nofit, cpu="64")
        deadline = time.monotonic() + 60
        # the events too: they are written apart from the bind and the pod's status
        while not (
            world.bound(fits)
            and scheduled_events(cp, release.namespace, fits)
            and condition(world.read_pod(nofit) or {}, "PodScheduled")
            and failed_events(cp, release.namespace, nofit)
        ):
            replica.check_running()
            assert time.monotonic() < deadline, f"not scheduled in 60 s: {replica.tail()}"
            time.sleep(0.2)
        assert lease_holder(cp, release) == replica.identity
        (scheduled,) = scheduled_events(cp, release.namespace, fits)
        assert scheduled["reportingController"] == release.scheduler_name
        cond = condition(world.read_pod(nofit) or {}, "PodScheduled")
        assert cond is not None and cond["reason"] == "Unschedulable"
    finally:
        code = replica.stop()
    assert code == 0, replica.tail()
    assert "forbidden" not in replica.log.read_text(), replica.tail()
    # the lease was released on the way out (a follower takes over at once)
    assert lease_holder(cp, release) == ""


def test_two_releases_with_their_own_scheduler_names(world: World, helm: Helm) -> None:
    cp, first = world.cp, world.release
    tag = uid()
    # the same release name in another namespace: nothing may collide with the first
    values = {"schedulerName": f"ks2-{tag}", "replicaCount": 2}
    second = install(helm, cp, first.name, f"helm2-{tag}", values)
    for kind in ("ClusterRole", "ClusterRoleBinding"):
        names = [{o["metadata"]["name"] for o in of_kind(r.objects, kind)} for r in (first, second)]
        assert names[0] and not names[0] & names[1], f"both releases create {kind}s {names}"
    assert second.lease_name != first.lease_name
    ns = first.namespace
    mine, theirs, nobodys = f"a-{tag}", f"b-{tag}", f"c-{tag}"
    world.pod(mine)
    cp.create_pod(
        theirs,
        namespace=ns,
        scheduler_name=second.scheduler_name,
        spec={"nodeSelector": world.pool},
    )
    cp.create_pod(
        nobodys, namespace=ns, scheduler_name=f"nobody-{tag}", spec={"nodeSelector": world.pool}
    )
    replicas = [
        Replica(cp, first, world.kubeconfig),
        Replica(cp, second, sa_kubeconfig(cp, second)),
    ]
    try:
        deadline = time.monotonic() + 60
        while not (world.bound(mine) and world.bound(theirs)):
            for r in replicas:
                r.check_running()
            assert time.monotonic() < deadline, "both pods bound within 60 s"
            time.sleep(0.2)
        time.sleep(1.0)  # time enough for a wrong scheduler to touch the third pod
        holders = [lease_holder(cp, release) for release in (first, second)]
        assert holders == [r.identity for r in replicas]
    finally:
        codes = [r.stop() for r in replicas]
    assert codes == [0, 0], [r.tail() for r in replicas]
    for r in replicas:
        assert "forbidden" not in r.log.read_text(), r.tail()
    for pod, release in ((mine, first), (theirs, second)):
        (event,) = scheduled_events(cp, ns, pod)
        assert event["reportingController"] == release.scheduler_name
    assert not world.bound(nobodys)
    assert not events_for(cp, ns, nobodys)


def test_a_release_leaves_other_releases_profiles_alone(world: World, helm: Helm) -> None:
    """A SchedulingProfile is cluster-scoped, and a profile shipped by one release (its
    ``profiles`` value) names that release's schedulerName: another release must not start
    serving that name, or both would schedule the same pods. A profile the user labels
    for the release (``kubectl label ... kubesched.dev/release=...``) is served by it."""
    cp, first = world.cp, world.release
    tag = uid()
    values = {"schedulerName": f"ks3-{tag}", "profiles": [{"name": "p", "spec": {}}]}
    third = install(helm, cp, f"other-{tag}", f"helm3-{tag}", values)
    (profile,) = [o for o in third.objects if o["kind"] == "SchedulingProfile"]
    assert profile["spec"]["schedulerName"] == third.scheduler_name
    theirs = f"d-{tag}"
    cp.create_pod(
        theirs,
        namespace=first.namespace,
        scheduler_name=third.scheduler_name,
        spec={"nodeSelector": world.pool},
    )
    # the user's own profile, for a second schedulerName of the first release
    labelled, extra = f"labelled-{tag}", f"ks-extra-{tag}"
    cp.api.create(
        {
            "apiVersion": "kubesched.dev/v1alpha1",
            "kind": "SchedulingProfile",
            "metadata": {"name": labelled, "labels": first.profile_labels},
            "spec": {"schedulerName": extra},
        }
    )
    replica = Replica(cp, first, world.kubeconfig)  # only the first release runs
    try:
        mine, extras = f"e-{tag}", f"f-{tag}"
        world.pod(mine)
        cp.create_pod(
            extras,
            namespace=first.namespace,
            scheduler_name=extra,
            spec={"nodeSelector": world.pool},
        )
        deadline = time.monotonic() + 60
        while not (world.bound(mine) and world.bound(extras)):
            replica.check_running()
            assert time.monotonic() < deadline, replica.tail()
            time.sleep(0.2)
        time.sleep(2.0)
        assert not world.bound(theirs), f"{first.name} scheduled a pod of {third.scheduler_name}"
        # the other release's profile: no status from us (that release is not running)
        other = cp.api.read(
            "kubesched.dev/v1alpha1", "SchedulingProfile", profile["metadata"]["name"]
        )
        assert not (other.get("status") or {}).get("conditions"), other["status"]
    finally:
        replica.stop()
        for name in (profile["metadata"]["name"], labelled):
            remove_with_finalizers(cp, "kubesched.dev/v1alpha1", "SchedulingProfile", name, None)
