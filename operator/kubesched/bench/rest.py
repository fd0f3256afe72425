"""A small REST client for the bench's ``cluster`` target: aiohttp against one API
server with the kubeconfig's credentials (requests, a watch's lines), raising
:class:`ApiError` with the server's status and words."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson

from kubesched.cluster.kubeconfig import load_client_configuration

__all__ = ["ApiError", "Rest"]


class Rest:
    """aiohttp against one API server, with the kubeconfig's credentials."""

    def __init__(self, server: str, headers: dict[str, str], ssl_context: ssl.SSLContext) -> None:
        self.server = server.rstrip("/")
        self.headers = headers
        self.ssl = ssl_context
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=256, ssl=ssl_context),
            headers={**headers, "Accept": "application/json"},
        )

    @classmethod
    async def from_kubeconfig(cls, kubeconfig: str | None) -> Rest:
        cfg = await load_client_configuration(kubeconfig)
        ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert or None)
        if not cfg.verify_ssl:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if cfg.cert_file:
            ctx.load_cert_chain(cfg.cert_file, cfg.key_file or None)
        headers: dict[str, str] = {}
        auth = await cfg.get_api_key_with_prefix("BearerToken")
        if auth:
            headers["Authorization"] = str(auth)
        return cls(str(cfg.host), headers, ctx)

    async def close(self) -> None:
        await self.session.close()

    async def request(
        self, method: str, path: str, body: Any = None, *, params: dict[str, str] | None = None
    ) -> Any:
        data = orjson.dumps(body) if body is not None else None
        headers = {"Content-Type": "application/json"} if data is not None else {}
        if method == "PATCH":
            headers["Content-Type"] = "application/merge-patch+json"
        async with self.session.request(
            method, self.server + path, data=data, params=params, headers=headers
        ) as resp:
            raw = await resp.read()
            if resp.status >= 300:
                raise ApiError(method, path, resp.status, raw.decode(errors="replace")[:300])
            return orjson.loads(raw) if raw else None

    async def watch(self, path: str, resource_version: str) -> AsyncIterator[dict[str, Any]]:
        params = {"watch": "1", "resourceVersion": resource_version, "timeoutSeconds": "3600"}
        timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
        async with self.session.get(self.server + path, params=params, timeout=timeout) as resp:
            if resp.status >= 300:
                raise ApiError("WATCH", path, resp.status, (await resp.text())[:300])
            while True:
                line = await resp.content.readline()
                if not line:
                    return
                yield orjson.loads(line)


class ApiError(RuntimeError):
    def __init__(self, method: str, path: str, status: int, body: str) -> None:
        self.status = status
        super().__init__(f"{method} {path}: {status} {body}")
