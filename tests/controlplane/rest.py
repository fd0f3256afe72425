"""A tiny synchronous Kubernetes REST client for test setup and assertions.

Plain ``http.client`` over TLS with one persistent connection per thread, so creating a
thousand nodes from a small thread pool is quick. Resource paths come from API discovery
(``kind`` -> plural, namespaced or not), so any built-in kind works without a table.
"""

from __future__ import annotations

import http.client
import json
import ssl
import threading
import urllib.parse
from collections.abc import Generator, Mapping
from typing import Any

JSON = dict[str, Any]


class ApiError(Exception):
    """A non-2xx answer from the API server."""

    def __init__(self, method: str, path: str, status: int, body: Any) -> None:
        self.method = method
        self.path = path
        self.status = status
        self.body = body
        message = body.get("message", body) if isinstance(body, dict) else body
        super().__init__(f"{method} {path}: {status} {message}")


class RestClient:
    """Requests against one API server with one bearer token."""

    def __init__(self, server: str, token: str, ssl_context: ssl.SSLContext) -> None:
        parsed = urllib.parse.urlsplit(server)
        if parsed.scheme != "https" or parsed.hostname is None or parsed.port is None:
            raise ValueError(f"expected https://host:port, got {server!r}")
        self.server = server
        self.token = token
        self._host = parsed.hostname
        self._port = parsed.port
        self._ssl = ssl_context
        self._local = threading.local()
        self._connections: list[http.client.HTTPSConnection] = []
        self._lock = threading.Lock()
        self._resources: dict[tuple[str, str], tuple[str, bool]] = {}

    # -- transport ---------------------------------------------------------------------------

    def _connection(self) -> http.client.HTTPSConnection:
        conn: http.client.HTTPSConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._new_connection(60)
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    def _new_connection(self, timeout: float) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(
            self._host, self._port, context=self._ssl, timeout=timeout
        )

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}

    def close(self) -> None:
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        self._local = threading.local()

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        params: Mapping[str, str] | None = None,
    ) -> Any:
        """One request; returns the decoded JSON body (or text), raises ApiError on >= 300."""
        if params:
            path = f"{path}?{urllib.parse.urlencode(params)}"
        headers = self._headers()
        data: bytes | None = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        for attempt in range(2):
            conn = self._connection()
            try:
                conn.request(method, path, body=data, headers=headers)
                response = conn.getresponse()
                raw = response.read()
                break
            except (
                http.client.RemoteDisconnected,
                ConnectionResetError,
                BrokenPipeError,
                ssl.SSLEOFError,
            ):
                # a kept-alive connection the server closed meanwhile (over TLS the write
                # may see the EOF first): reconnect once
                conn.close()
                self._local.conn = None
                if attempt:
                    raise
            except (OSError, http.client.HTTPException):
                # refused, timed out, ...: the connection is left mid-request (every later
                # request on it would fail with CannotSendRequest), so the next one
                # starts afresh (an API server restarted under a test)
                conn.close()
                self._local.conn = None
                raise
        try:
            decoded: Any = json.loads(raw) if raw else None
        except ValueError:
            decoded = raw.decode(errors="replace")
        if response.status >= 300:
            raise ApiError(method, path, response.status, decoded)
        return decoded

    def watch(
        self, path: str, resource_version: str, timeout: float = 60.0
    ) -> Generator[JSON, None, None]:
        """The events of one WATCH of ``path`` from ``resource_version``, each as it arrives
        (a connection of its own; the server ends the watch after ``timeout`` seconds)."""
        query = urllib.parse.urlencode(
            {
                "watch": "1",
                "resourceVersion": resource_version,
                "timeoutSeconds": str(int(timeout)),
            }
        )
        conn = self._new_connection(timeout + 10)
        try:
            conn.request("GET", f"{path}?{query}", headers=self._headers())
            response = conn.getresponse()
            if response.status >= 300:
                raise ApiError("GET", path, response.status, response.read().decode())
            for line in response:  # one JSON event per line
                if line.strip():
                    yield json.loads(line)
        finally:
            conn.close()

    def get(self, path: str, **params: str) -> Any:
        return self.request("GET", path, params=params or None)

    def post(self, path: str, body: Any) -> Any:
        return self.request("POST", path, body)

    def put(self, path: str, body: Any) -> Any:
        return self.request("PUT", path, body)

    def patch(self, path: str, body: Any, *, patch_type: str = "merge") -> Any:
        content_type = {
            "merge": "application/merge-patch+json",
            "strategic": "application/strategic-merge-patch+json",
            "json": "application/json-patch+json",
        }[patch_type]
        return self.request("PATCH", path, body, content_type=content_type)

    def delete(self, path: str, **params: str) -> Any:
        return self.request("DELETE", path, params=params or None)

    # -- resource paths from discovery -------------------------------------------------------

    def resource(self, api_version: str, kind: str) -> tuple[str, bool]:
        """(plural, namespaced) of a kind, from the server's discovery document."""
        key = (api_version, kind)
        if key not in self._resources:
            base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            listing = self.get(base)
            for res in listing["resources"]:
                if "/" not in res["name"]:
                    self._resources[(api_version, res["kind"])] = (res["name"], res["namespaced"])
            if key not in self._resources:
                raise KeyError(f"{kind} is not served in {api_version}")
        return self._resources[key]

    def path(
        self,
        api_version: str,
        kind: str,
        name: str | None = None,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> str:
        """The URL path of a collection (name None) or of one object."""
        plural, namespaced = self.resource(api_version, kind)
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        parts = [base]
        if namespaced:
            if namespace is None and name is not None:
                raise ValueError(f"{kind} {name} is namespaced: give its namespace")
            if namespace is not None:
                parts.append(f"namespaces/{namespace}")
        parts.append(plural)
        if name is not None:
            parts.append(name)
        if subresource is not None:
            parts.append(subresource)
        return "/".join(parts)

    # -- object helpers ----------------------------------------------------------------------

    def create(self, obj: Mapping[str, Any], namespace: str | None = None) -> JSON:
        """POST an object; the namespace defaults to metadata.namespace, then ``default``."""
        api_version, kind = obj["apiVersion"], obj["kind"]
        _, namespaced = self.resource(api_version, kind)
        ns = None
        if namespaced:
            ns = namespace or obj.get("metadata", {}).get("namespace") or "default"
        result: JSON = self.post(self.path(api_version, kind, namespace=ns), obj)
        return result

    def read(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> JSON:
        result: JSON = self.get(self.path(api_version, kind, name, namespace))
        return result

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        **params: str,
    ) -> list[JSON]:
        """Every item (all namespaces when namespace is None), following continue tokens."""
        path = self.path(api_version, kind, namespace=namespace)
        items: list[JSON] = []
        query = dict(params)
        while True:
            page = self.get(path, **query)
            items.extend(page["items"])
            token = page["metadata"].get("continue")
            if not token:
                return items
            query["continue"] = token

    def remove(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        *,
        grace_period_seconds: int | None = None,
        missing_ok: bool = True,
    ) -> None:
        params = {}
        if grace_period_seconds is not None:
            params["gracePeriodSeconds"] = str(grace_period_seconds)
        try:
            self.delete(self.path(api_version, kind, name, namespace), **params)
        except ApiError as err:
            if not (missing_ok and err.status == 404):
                raise
