"""Who may read the endpoints: delegated authentication and authorization (TokenReview,
SubjectAccessReview) against a fake API server, with aiohttp's test client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from kubesched.cli.run import _settings_message
from kubesched.operator.delegated_auth import ALLOW_TTL, DENY_TTL, TOKEN_TTL, DelegatedAuth
from kubesched.operator.server import make_app
from kubesched.operator.settings import Settings
from tests.builders import make_node, make_pod
from tests.integration.harness import Harness


class FakeAPI:
    """The two review endpoints: ``tokens`` maps a token to a username, ``rules`` holds the
    (user, path) pairs RBAC allows. ``calls`` counts the reviews asked for."""

    def __init__(self) -> None:
        self.tokens = {"prom-token": "system:serviceaccount:monitoring:prometheus"}
        self.tokens["dev-token"] = "dev"
        self.rules = {("system:serviceaccount:monitoring:prometheus", "/metrics")}
        self.calls: list[dict[str, Any]] = []
        self.down = False
        self.now = 1000.0

    async def post(self, path: str, body: Mapping[str, Any]) -> Any:
        self.calls.append(dict(body))
        if self.down:
            raise ConnectionError("POST " + path + ": cannot connect")
        spec = body["spec"]
        if body["kind"] == "TokenReview":
            name = self.tokens.get(spec["token"])
            if name is None:
                return {"status": {"authenticated": False, "error": "invalid bearer token"}}
            user = {"username": name, "uid": "u-" + name, "groups": ["system:authenticated"]}
            return {"status": {"authenticated": True, "user": user}}
        assert body["kind"] == "SubjectAccessReview"
        assert spec["groups"] == ["system:authenticated"] and spec["uid"] == "u-" + spec["user"]
        attrs = spec["nonResourceAttributes"]
        allowed = attrs["verb"] == "get" and (spec["user"], attrs["path"]) in self.rules
        return {"status": {"allowed": allowed, "reason": "" if allowed else "no RBAC rule"}}


@pytest.fixture
def api() -> FakeAPI:
    return FakeAPI()


@pytest.fixture
async def client(api: FakeAPI) -> AsyncIterator[TestClient[Any, Any]]:
    h = Harness()
    h.apply(make_node("n1").obj(), make_pod("web").obj())
    auth = DelegatedAuth(api.post, clock=lambda: api.now)
    app = make_app(scheduler=h.sched, ready=lambda: True, leading=lambda: True, auth=auth)
    async with TestClient(TestServer(app)) as c:
        yield c


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize("path", ["/healthz", "/livez", "/readyz", "/readyz/leader"])
async def test_health_endpoints_stay_open(
    client: TestClient[Any, Any], api: FakeAPI, path: str
) -> None:
    resp = await client.get(path)
    assert resp.status == 200
    assert api.calls == []


@pytest.mark.parametrize(
    "path",
    ["/metrics", "/debug/cache", "/explain/default/web", "/ui/", "/ui/api/state", "/healthzx"],
)
@pytest.mark.parametrize(
    ("headers", "status"),
    [({}, 401), (bearer("stolen"), 401), ({"Authorization": "Basic YTpi"}, 401)],
    ids=["anonymous", "unknown-token", "basic-auth"],
)
async def test_without_a_valid_token_nothing_but_health_is_served(
    client: TestClient[Any, Any], path: str, headers: dict[str, str], status: int
) -> None:
    resp = await client.get(path, headers=headers)
    assert resp.status == status
    doc = await resp.json()
    assert (doc["kind"], doc["reason"], doc["code"]) == ("Status", "Unauthorized", 401)
    assert "web" not in await resp.text()


async def test_an_authenticated_user_without_the_rule_gets_the_api_servers_403(
    client: TestClient[Any, Any],
) -> None:
    resp = await client.get("/explain/default/web", headers=bearer("dev-token"))
    assert resp.status == 403
    doc = await resp.json()
    assert doc["message"] == (
        'forbidden: User "dev" cannot get path "/explain/default/web": no RBAC rule'
    )
    # the rule is per path: Prometheus may read /metrics, not the cache
    resp = await client.get("/debug/cache", headers=bearer("prom-token"))
    assert resp.status == 403


async def test_a_granted_user_is_served(client: TestClient[Any, Any], api: FakeAPI) -> None:
    resp = await client.get("/metrics", headers=bearer("prom-token"))
    assert resp.status == 200
    assert "scheduler_" in await resp.text()
    sar = api.calls[-1]["spec"]
    assert sar["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"}
    api.rules.add(("dev", "/ui/"))
    resp = await client.get("/ui/", headers=bearer("dev-token"))
    assert resp.status == 200
    assert "<title>kubesched</title>" in await resp.text()
    # the page's data is a path of its own: granting /ui/ alone does not serve it
    resp = await client.get("/ui/api/state", headers=bearer("dev-token"))
    assert resp.status == 403


async def test_decisions_are_cached_for_ten_seconds(
    client: TestClient[Any, Any], api: FakeAPI
) -> None:
    assert TOKEN_TTL == ALLOW_TTL == DENY_TTL == 10.0
    for _ in range(3):
        assert (await client.get("/metrics", headers=bearer("prom-token"))).status == 200
        assert (await client.get("/debug/cache", headers=bearer("dev-token"))).status == 403
        assert (await client.get("/metrics", headers=bearer("nope"))).status == 401
    assert len(api.calls) == 5  # 3 TokenReviews, 2 SubjectAccessReviews
    # a RoleBinding granted now is honoured once the denial expires
    api.rules.add(("dev", "/debug/cache"))
    api.now += DENY_TTL - 0.5
    assert (await client.get("/debug/cache", headers=bearer("dev-token"))).status == 403
    api.now += 1
    assert (await client.get("/debug/cache", headers=bearer("dev-token"))).status == 200
    # a revoked token stops working within TOKEN_TTL
    del api.tokens["prom-token"]
    api.now += TOKEN_TTL
    assert (await client.get("/metrics", headers=bearer("prom-token"))).status == 401


async def test_an_unreachable_api_server_refuses_and_is_not_cached(
    client: TestClient[Any, Any], api: FakeAPI
) -> None:
    api.down = True
    assert (await client.get("/metrics", headers=bearer("prom-token"))).status == 401
    api.down = False
    assert (await client.get("/metrics", headers=bearer("prom-token"))).status == 200
    api.down = True
    # authenticated from the cache, but the review of a new path cannot be made
    resp = await client.get("/debug/cache", headers=bearer("prom-token"))
    assert resp.status == 500


@pytest.mark.parametrize(
    ("given", "address"),
    [
        ({}, "127.0.0.1"),
        ({"delegate_auth": True}, "0.0.0.0"),
        ({"delegate_auth": True, "bind_address": "10.0.0.5"}, "10.0.0.5"),
        ({"bind_address": "::1"}, "::1"),
        ({"bind_address": "localhost"}, "localhost"),
    ],
    ids=["fresh-run-localhost", "delegated-everywhere", "delegated-one-ip", "ipv6-lo", "name"],
)
def test_where_the_endpoints_listen(given: dict[str, Any], address: str) -> None:
    s = Settings.load(given)
    assert s.listen_address == address


@pytest.mark.parametrize(
    ("given", "env", "who"),
    [
        ({"bind_address": "0.0.0.0"}, {}, "--bind-address"),
        ({}, {"KUBESCHED_BIND_ADDRESS": "0.0.0.0"}, "KUBESCHED_BIND_ADDRESS"),
    ],
    ids=["flag", "env"],
)
def test_an_open_address_without_delegation_is_refused_in_the_users_words(
    given: dict[str, Any], env: dict[str, str], who: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pydantic

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(pydantic.ValidationError) as e:
        Settings.load(given)
    assert _settings_message(e.value, given, env) == (
        f"{who} 0.0.0.0 without --delegate-auth would serve /metrics, /debug and "
        "/explain (every pod) to anyone who reaches it: turn on --delegate-auth or bind "
        "to 127.0.0.1"
    )
    monkeypatch.setenv("KUBESCHED_DELEGATE_AUTH", "true")
    assert Settings.load(given).delegate_auth
