"""Checks of the chart's access objects on a real API server, one per object, for
tests/e2e/test_helm_install.py: the system:auth-delegator binding (the scheduler can ask
the API server who a reader is), the metrics and debug reader ClusterRoles (what a
binding to them lets a token read), and the PodGroup ClusterRoles aggregated into the
built-in view and edit (what a namespace user may do with PodGroups).

Each check shows its object works; the auth-delegator check also shows it is needed (the
scheduler without it refuses everyone, saying why)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp

from kubesched.operator.settings import Settings
from tests.controlplane import ApiError, ControlPlane
from tests.e2e.helm_support import Logs, World, captured_logs, settings_for, uid
from tests.e2e.support import call, running
from tests.helm.chart import AUTH_DELEGATOR, JSON, of_kind

RBAC = "rbac.authorization.k8s.io/v1"

AccessCheck = Callable[[World], Awaitable[None]]


def access_objects(w: World) -> dict[str, JSON]:
    """The release's ClusterRoles and ClusterRoleBindings other than the scheduler's own,
    by what their name ends with (``metrics-reader``, ``auth-delegator``, ...)."""
    own = w.release.cluster_role["metadata"]["name"]
    prefix = own + "-"
    found = {}
    for obj in of_kind(w.release.objects, "ClusterRole") + of_kind(
        w.release.objects, "ClusterRoleBinding"
    ):
        name = obj["metadata"]["name"]
        if name != own:
            assert name.startswith(prefix), name
            found[name.removeprefix(prefix)] = obj
    return found


def can(cp: ControlPlane, user: str, groups: list[str], attrs: JSON) -> bool:
    key = "nonResourceAttributes" if "path" in attrs else "resourceAttributes"
    review = cp.api.post(
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {"user": user, "groups": groups, key: attrs},
        },
    )
    return bool(review["status"].get("allowed"))


def sa_groups(ns: str) -> list[str]:
    return ["system:serviceaccounts", f"system:serviceaccounts:{ns}", "system:authenticated"]


def until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not check():
        assert time.monotonic() < deadline, f"RBAC did not settle: {what}"
        time.sleep(0.05)


def reader(w: World, role_kind: str, role: str, attrs: JSON, namespaced: bool = False) -> str:
    """A fresh ServiceAccount bound to ``role`` (cluster-wide, or in the release's
    namespace), once RBAC allows it ``attrs``; its token."""
    cp, ns, sa = w.cp, w.ns, f"reader-{uid()}"
    token = cp.service_account_token(ns, sa)
    binding = {
        "apiVersion": RBAC,
        "kind": "RoleBinding" if namespaced else "ClusterRoleBinding",
        "metadata": {"name": f"{sa}", **({"namespace": ns} if namespaced else {})},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}],
    }
    cp.api.create(binding)
    if not namespaced:
        w.cleanup.append(lambda: cp.api.remove(RBAC, "ClusterRoleBinding", sa))
    user = f"system:serviceaccount:{ns}:{sa}"
    until(lambda: can(cp, user, sa_groups(ns), attrs), f"{user} {attrs}")
    return token


@contextlib.asynccontextmanager
async def serving(w: World) -> AsyncIterator[int]:
    """The release's scheduler (its ServiceAccount, --delegate-auth as the Deployment
    runs it) on loopback; the port."""
    base = settings_for(w.release, w.kubeconfig, f"{w.release.name}-{uid()}")
    assert "--delegate-auth" in w.release.container["args"]
    values = base.model_dump() | {
        "delegate_auth": True,
        "bind_address": "127.0.0.1",
        "leader_elect": False,
    }
    settings = Settings(**values)
    async with running(settings) as started:
        assert started.runtime.port is not None
        yield started.runtime.port


async def get(port: int, path: str, token: str | None = None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        aiohttp.ClientSession() as s,
        s.get(f"http://127.0.0.1:{port}{path}", headers=headers) as resp,
    ):
        return resp.status


# -- the checks --------------------------------------------------------------------------------


async def metrics_reader(w: World) -> None:
    role = access_objects(w)["metrics-reader"]["metadata"]["name"]
    granted = await call(reader, w, "ClusterRole", role, {"path": "/metrics", "verb": "get"})
    other = await call(w.cp.service_account_token, w.ns, f"nothing-{uid()}")
    async with serving(w) as port:
        assert await get(port, "/healthz") == 200
        assert await get(port, "/metrics") == 401
        assert await get(port, "/metrics", other) == 403
        assert await get(port, "/metrics", granted) == 200
        assert await get(port, "/debug/cache", granted) == 403


async def debug_reader(w: World) -> None:
    role = access_objects(w)["debug-reader"]["metadata"]["name"]
    attrs = {"path": "/debug/cache", "verb": "get"}
    granted = await call(reader, w, "ClusterRole", role, attrs)
    async with serving(w) as port:
        assert await get(port, "/debug/cache", granted) == 200
        assert await get(port, f"/explain/{w.ns}/no-such-pod", granted) == 404  # allowed
        assert await get(port, "/metrics", granted) == 403


async def auth_delegator(w: World) -> None:
    """Without the binding the scheduler cannot review a token: every reader is refused
    (401) and the log says which permission is missing."""
    cp, release = w.cp, w.release
    binding = access_objects(w)["auth-delegator"]
    assert binding["roleRef"]["name"] == AUTH_DELEGATOR
    role = access_objects(w)["metrics-reader"]["metadata"]["name"]
    granted = await call(reader, w, "ClusterRole", role, {"path": "/metrics", "verb": "get"})
    review = {"group": "authentication.k8s.io", "resource": "tokenreviews", "verb": "create"}
    user, groups = release.user, sa_groups(release.namespace)
    name = binding["metadata"]["name"]
    await call(cp.api.remove, RBAC, "ClusterRoleBinding", name)
    try:
        await call(until, lambda: not can(cp, user, groups, review), "binding removed")
        logs: Logs
        with captured_logs() as logs:
            async with serving(w) as port:
                assert await get(port, "/metrics", granted) == 401
        assert logs.find(
            r'cannot create resource \\*"tokenreviews\\*" in API group '
            r'\\*"authentication.k8s.io\\*"'
        ), logs.lines[-5:]
    finally:
        restored = {k: v for k, v in binding.items() if k != "status"}
        with contextlib.suppress(ApiError):
            await call(cp.api.create, restored)
        await call(until, lambda: can(cp, user, groups, review), "binding restored")
    async with serving(w) as port:
        assert await get(port, "/metrics", granted) == 200


def _podgroup(name: str) -> JSON:
    return {
        "apiVersion": "kubesched.dev/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": 2},
    }


async def podgroups_view(w: World) -> None:
    """A namespace user bound to the built-in `view` lists PodGroups, creates none."""
    attrs = {"namespace": w.ns, "group": "kubesched.dev", "resource": "podgroups", "verb": "list"}
    token = await call(reader, w, "ClusterRole", "view", attrs, True)
    client = w.cp.client_with_token(token)
    try:
        assert isinstance(await call(client.list, "kubesched.dev/v1alpha1", "PodGroup", w.ns), list)
        try:
            await call(client.create, _podgroup(f"viewed-{uid()}"), w.ns)
        except ApiError as e:
            assert e.status == 403, e
        else:
            raise AssertionError("view created a PodGroup")
    finally:
        client.close()


async def podgroups_edit(w: World) -> None:
    """A namespace user bound to the built-in `edit` creates and deletes a PodGroup."""
    attrs = {"namespace": w.ns, "group": "kubesched.dev", "resource": "podgroups"}
    token = await call(reader, w, "ClusterRole", "edit", {**attrs, "verb": "create"}, True)
    client = w.cp.client_with_token(token)
    name = f"edited-{uid()}"
    try:
        created = await call(client.create, _podgroup(name), w.ns)
        assert created["metadata"]["name"] == name
        await call(client.remove, "kubesched.dev/v1alpha1", "PodGroup", name, w.ns)
    finally:
        client.close()


ACCESS_CHECKS: dict[str, AccessCheck] = {
    "auth-delegator": auth_delegator,
    "metrics-reader": metrics_reader,
    "debug-reader": debug_reader,
    "podgroups-view": podgroups_view,
    "podgroups-edit": podgroups_edit,
}
