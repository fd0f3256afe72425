"""Who may read /metrics, /debug, /explain and /ui: authentication and authorization
delegated to the API server, as kube-scheduler serves its own endpoints.

A request's bearer token goes to a TokenReview; the user it names goes, with the request's
path and the verb ``get``, to a SubjectAccessReview (``nonResourceAttributes``), so access
is granted with ordinary RBAC::

    rules: [{nonResourceURLs: ["/metrics"], verbs: ["get"]}]

Every path is protected except :data:`ALWAYS_ALLOW` (kube-scheduler's
``--authorization-always-allow-paths`` default: the health endpoints, open to the kubelet's
probes), so a handler added later is behind the check without doing anything. No token or
a token the API server does not accept: 401; a user RBAC does not allow: 403 with the API
server's wording (``forbidden: User "x" cannot get path "/metrics"``); a review that fails
(the API unreachable, or our service account may not create reviews: the chart binds
``system:auth-delegator``): 401 or 500, never served, not cached.

Decisions are cached as client-go's delegating authenticator and authorizer cache them:
:data:`TOKEN_TTL` for a token either way, :data:`ALLOW_TTL` / :data:`DENY_TTL` for a
user's access to a path; tokens are kept only as their SHA-256. Time is the event loop's.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import orjson
from aiohttp import web

__all__ = [
    "ALLOW_TTL",
    "ALWAYS_ALLOW",
    "DENY_TTL",
    "TOKEN_TTL",
    "DelegatedAuth",
    "User",
    "auth_middleware",
    "is_open",
]

log = logging.getLogger("kubesched.auth")

ALWAYS_ALLOW: tuple[str, ...] = ("/healthz", "/readyz", "/livez")
"""Served to anyone, with their sub-paths (``/readyz/leader``); every other path is
protected (``/metrics``, ``/debug/...``, ``/explain/...``, ``/ui/...``)."""

TOKEN_TTL = 10.0
"""client-go's delegating authentication cache: 10 s for a token, valid or not."""
ALLOW_TTL = 10.0
"""client-go's delegating authorization cache for an allowed decision."""
DENY_TTL = 10.0
"""... and for a denied one: a new RoleBinding is honoured within 10 s."""
CACHE_SIZE = 4096
"""Entries kept per cache (oldest dropped first): random tokens cannot grow memory."""

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"

Post = Callable[[str, Mapping[str, Any]], Awaitable[Any]]
"""POSTs a JSON body to an API path and returns the decoded response (raising on an
error status): ``KubeCluster.request``
(:meth:`kubesched.cluster.kube_http.KubeHTTP.request`) in production."""


def is_open(path: str) -> bool:
    return any(path == p or path.startswith(p + "/") for p in ALWAYS_ALLOW)


@dataclass(frozen=True)
class User:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


K = TypeVar("K")
V = TypeVar("V")


@dataclass
class _TTLCache(Generic[K, V]):
    clock: Callable[[], float]
    size: int = CACHE_SIZE
    entries: OrderedDict[K, tuple[float, V]] = field(default_factory=OrderedDict)

    def get(self, key: K) -> tuple[bool, V | None]:
        hit = self.entries.get(key)
        if hit is None:
            return False, None
        if hit[0] <= self.clock():
            del self.entries[key]
            return False, None
        return True, hit[1]

    def put(self, key: K, value: V, ttl: float) -> None:
        self.entries[key] = (self.clock() + ttl, value)
        self.entries.move_to_end(key)
        while len(self.entries) > self.size:
            self.entries.popitem(last=False)


class ReviewFailed(Exception):
    """A TokenReview or SubjectAccessReview the API server did not answer."""


class DelegatedAuth:
    """TokenReview + SubjectAccessReview with client-go's caches (module docstring)."""

    def __init__(self, post: Post, *, clock: Callable[[], float] | None = None) -> None:
        self._post = post
        self._clock = clock or (lambda: asyncio.get_running_loop().time())
        self._tokens: _TTLCache[str, User | None] = _TTLCache(self._clock)
        self._access: _TTLCache[tuple[User, str, str], tuple[bool, str]] = _TTLCache(self._clock)

    async def authenticate(self, token: str) -> User | None:
        """The user the API server says ``token`` belongs to; None if it does not accept it."""
        key = hashlib.sha256(token.encode()).hexdigest()
        hit, user = self._tokens.get(key)
        if hit:
            return user
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        }
        try:
            doc = await self._post(TOKEN_REVIEWS, body)
        except Exception as e:  # any failure refuses the request
            raise ReviewFailed(f"TokenReview failed: {e}") from e
        status = (doc or {}).get("status") or {}
        user = _user(status.get("user") or {}) if status.get("authenticated") else None
        self._tokens.put(key, user, TOKEN_TTL)
        return user

    async def authorize(self, user: User, path: str, verb: str = "get") -> tuple[bool, str]:
        """(allowed, the API server's reason) for ``verb`` on the non-resource ``path``."""
        hit, decision = self._access.get((user, path, verb))
        if hit and decision is not None:
            return decision
        spec: dict[str, Any] = {
            "user": user.name,
            "groups": list(user.groups),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": spec,
        }
        try:
            doc = await self._post(ACCESS_REVIEWS, body)
        except Exception as e:
            raise ReviewFailed(f"SubjectAccessReview failed: {e}") from e
        status = (doc or {}).get("status") or {}
        decision = (bool(status.get("allowed")), str(status.get("reason") or ""))
        self._access.put((user, path, verb), decision, ALLOW_TTL if decision[0] else DENY_TTL)
        return decision


def _user(raw: Mapping[str, Any]) -> User:
    extra = raw.get("extra") or {}
    return User(
        name=str(raw.get("username") or ""),
        uid=str(raw.get("uid") or ""),
        groups=tuple(str(g) for g in raw.get("groups") or ()),
        extra=tuple(sorted((str(k), tuple(str(x) for x in v or ())) for k, v in extra.items())),
    )


def _status(code: int, reason: str, message: str) -> web.Response:
    """A ``v1.Status`` body, as the API server (and kube-scheduler) refuse requests."""
    doc = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": {},
        "code": code,
    }
    return web.Response(body=orjson.dumps(doc), status=code, content_type="application/json")


def _bearer(request: web.Request) -> str:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


_VERBS = {"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update", "DELETE": "delete"}


def auth_middleware(auth: DelegatedAuth) -> Any:
    """An aiohttp middleware: :data:`ALWAYS_ALLOW` passes, every other path needs a token
    the API server accepts for a user it authorizes to ``get`` that path."""

    @web.middleware
    async def middleware(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        path = request.path
        if is_open(path):
            return await handler(request)
        token = _bearer(request)
        if not token:
            return _status(401, "Unauthorized", "Unauthorized")
        try:
            user = await auth.authenticate(token)
        except ReviewFailed as e:
            log.warning("refusing %s: %s", path, e)
            return _status(401, "Unauthorized", "Unauthorized")
        if user is None:
            return _status(401, "Unauthorized", "Unauthorized")
        verb = _VERBS.get(request.method, request.method.lower())
        try:
            allowed, reason = await auth.authorize(user, path, verb)
        except ReviewFailed as e:
            log.warning("refusing %s to %s: %s", path, user.name, e)
            return _status(500, "InternalError", "Internal Server Error: authorization failed")
        if not allowed:
            msg = f"forbidden: User {orjson.dumps(user.name).decode()} cannot {verb} path "
            msg += orjson.dumps(path).decode()
            if reason:
                msg += f": {reason}"
            return _status(403, "Forbidden", msg)
        return await handler(request)

    return middleware
