"""The client CPU of one API request: aiohttp's ``ClientSession.request`` against
kubesched's lean connections (``kubesched.cluster.lean_http.LeanPool``), the Binding POST
of every pod (docs/DESIGN.md, "Performance model").

    python docs/request-cost.py --requests 3000 --rounds 3

A local HTTPS server (aiohttp, in a process of its own, with a CA of its own) answers
every POST with a small Status, as the API server answers a Binding. Each round sends
``--requests`` POSTs with 32 in flight over at most 8 keep-alive connections through
each client in turn, and prints the CPU this process spent per request (the server's CPU
is its own process's). Not a test: read the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import orjson

from kubesched.cluster.lean_http import LeanPool

IN_FLIGHT = 32
CONNECTIONS = 8
BODY = orjson.dumps(
    {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "web-1", "namespace": "shop", "uid": "u"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"},
    }
)
SERVER = """
import ssl, sys
from aiohttp import web
async def answer(request):
    await request.read()
    return web.json_response({"kind": "Status", "status": "Success"}, status=201)
app = web.Application()
app.router.add_route("*", "/{tail:.*}", answer)
ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
web.run_app(app, host="127.0.0.1", port=int(sys.argv[3]), ssl_context=ctx, print=None,
            access_log=None)
"""


def certificates(directory: Path) -> tuple[Path, Path, Path]:
    spec = importlib.util.spec_from_file_location(
        "tls", Path(__file__).parent.parent / "tests" / "tls.py"
    )
    assert spec is not None and spec.loader is not None
    tls = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tls)
    ca, cert, key = tls.server_certificate()
    paths = directory / "ca.crt", directory / "tls.crt", directory / "tls.key"
    for path, pem in zip(paths, (ca, cert, key), strict=True):
        path.write_bytes(pem)
    return paths


async def through_aiohttp(url: str, ctx: ssl.SSLContext, n: int) -> float:
    connector = aiohttp.TCPConnector(ssl=ctx, limit=CONNECTIONS)
    timeout = aiohttp.ClientTimeout(total=30)
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    async with aiohttp.ClientSession(connector=connector, trust_env=False) as session:
        gate = asyncio.Semaphore(IN_FLIGHT)

        async def one(i: int) -> None:
            async with gate, session.request(
                "POST", f"{url}/api/v1/namespaces/shop/pods/web-{i}/binding",
                data=BODY, headers=headers, timeout=timeout,
            ) as resp:  # fmt: skip
                await resp.read()

        await one(-1)  # the first connection's handshake is not what is measured
        start = time.process_time()
        await asyncio.gather(*(one(i) for i in range(n)))
        return time.process_time() - start


async def through_lean(url: str, ctx: ssl.SSLContext, n: int) -> float:
    pool = LeanPool(url, ssl_context=ctx, limit=CONNECTIONS)
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    gate = asyncio.Semaphore(IN_FLIGHT)

    async def one(i: int) -> None:
        async with gate, asyncio.timeout(30):
            await pool.request(
                "POST", f"/api/v1/namespaces/shop/pods/web-{i}/binding", BODY, headers
            )

    try:
        await one(-1)
        start = time.process_time()
        await asyncio.gather(*(one(i) for i in range(n)))
        return time.process_time() - start
    finally:
        await pool.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=3000)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ca, cert, key = certificates(Path(tmp))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        server = subprocess.Popen([sys.executable, "-c", SERVER, str(cert), str(key), str(port)])
        try:
            for _ in range(100):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                    break
                except OSError:
                    time.sleep(0.05)
            ctx = ssl.create_default_context(cafile=str(ca))
            url = f"https://127.0.0.1:{port}"
            cost: dict[str, list[float]] = {"aiohttp": [], "lean": []}
            for _ in range(args.rounds):
                for name, run in (("aiohttp", through_aiohttp), ("lean", through_lean)):
                    cpu = asyncio.run(run(url, ctx, args.requests))
                    cost[name].append(cpu / args.requests * 1e6)
                    print(f"{name:8s} {cost[name][-1]:6.1f} us of client CPU a request")
            for name, values in cost.items():
                print(f"{name:8s} median {statistics.median(values):6.1f} us")
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
