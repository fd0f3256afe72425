"""The scheduler's endpoints behind kube-apiserver 1.37's TokenReview and
SubjectAccessReview (``kubesched run --delegate-auth``): anonymous is 401, an identity
without a ``nonResourceURLs`` rule is 403 in the API server's words, one granted ``get``
on the path is served, and the health endpoints stay open."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest

from kubesched.operator.run import Runtime
from kubesched.operator.settings import Settings
from tests.controlplane import ApiError, ControlPlane, wait_for
from tests.e2e.support import local_settings, running


def settings_for(cp: ControlPlane, **kw: Any) -> Settings:
    return local_settings(cp.kubeconfig, scheduler_names=[f"auth-{uuid.uuid4().hex[:6]}"], **kw)


@contextlib.asynccontextmanager
async def scheduler(settings: Settings) -> AsyncIterator[Runtime]:
    async with running(settings) as started:
        yield started.runtime


async def get(port: int, path: str, token: str | None = None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        aiohttp.ClientSession() as s,
        s.get(f"http://127.0.0.1:{port}{path}", headers=headers) as resp,
    ):
        return resp.status, await resp.text()


@pytest.fixture
def prometheus(controlplane: ControlPlane, namespace: str) -> Iterator[tuple[str, str]]:
    """A ServiceAccount granted get /metrics by a ClusterRole (what the chart's metrics
    reader is); its token, and a token of a ServiceAccount granted nothing."""
    cp, tag = controlplane, uuid.uuid4().hex[:6]
    role = f"e2e-metrics-reader-{tag}"
    cp.api.create(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": role},
            "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
        }
    )
    cp.api.create(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": role},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role,
            },
            "subjects": [{"kind": "ServiceAccount", "name": "prom", "namespace": namespace}],
        }
    )

    def granted() -> bool:  # the RBAC authorizer sees the binding through its informer
        review = cp.api.post(
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": {
                    "user": f"system:serviceaccount:{namespace}:prom",
                    "groups": ["system:serviceaccounts", "system:authenticated"],
                    "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
                },
            },
        )
        return bool(review["status"].get("allowed"))

    try:
        wait_for(granted, timeout=30, what="the ClusterRoleBinding to take effect")
        yield (
            cp.service_account_token(namespace, "prom"),
            cp.service_account_token(namespace, "nothing"),
        )
    finally:
        for kind in ("ClusterRoleBinding", "ClusterRole"):
            with contextlib.suppress(ApiError):
                cp.api.remove("rbac.authorization.k8s.io/v1", kind, role)


async def test_anonymous_refused_forbidden_refused_granted_served_health_open(
    controlplane: ControlPlane, namespace: str, prometheus: tuple[str, str]
) -> None:
    granted, ungranted = prometheus
    settings = settings_for(controlplane, delegate_auth=True, bind_address="127.0.0.1")
    async with scheduler(settings) as rt:
        assert rt.port is not None
        for path in ("/healthz", "/livez", "/readyz"):
            assert (await get(rt.port, path))[0] == 200, path
        for path in ("/metrics", "/debug/cache", f"/explain/{namespace}/none", "/ui/"):
            status, body = await get(rt.port, path)
            assert status == 401, (path, body)
            assert '"reason":"Unauthorized"' in body
        assert (await get(rt.port, "/metrics", "not-a-token"))[0] == 401
        status, body = await get(rt.port, "/metrics", controlplane.token_for("nobody"))
        assert status == 403
        assert 'forbidden: User \\"nobody\\" cannot get path \\"/metrics\\"' in body
        user = f"system:serviceaccount:{namespace}:nothing"
        status, body = await get(rt.port, "/metrics", ungranted)
        assert status == 403 and f'User \\"{user}\\"' in body
        status, body = await get(rt.port, "/metrics", granted)
        assert status == 200, body
        assert "scheduler_pending_pods" in body
        # the rule is /metrics only
        assert (await get(rt.port, "/debug/cache", granted))[0] == 403


async def test_without_delegation_only_localhost_is_served(controlplane: ControlPlane) -> None:
    settings = settings_for(controlplane)
    assert settings.listen_address == "127.0.0.1"
    async with scheduler(settings) as rt:
        assert rt.port is not None
        status, body = await get(rt.port, "/metrics")
        assert status == 200 and "scheduler_pending_pods" in body
