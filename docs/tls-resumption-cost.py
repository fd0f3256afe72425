"""What a new TLS connection to kube-apiserver costs, with and without resuming an
earlier session (``kubesched.cluster.sessions.ResumingContext``; docs/benchmarks.md,
"TLS handshakes").

    export KUBESCHED_CONTROLPLANE_DIR=$(tests/controlplane/build | tail -n1)
    python docs/tls-resumption-cost.py --connections 100 --rounds 2

Starts the pinned etcd and kube-apiserver (bench/controlplane), then, per round and per
context (a plain ``ssl.SSLContext`` with the API server's CA, and the resuming one the
sessions use), opens ``--connections`` connections one after another on uvloop, each with
one ``GET /version``, and prints per connection this process's CPU, kube-apiserver's CPU
(from /proc) and the wall time, and how many were resumed. Not a test: read the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
import statistics
import time
from pathlib import Path

import uvloop

from kubesched.bench.cluster import _proc_cpu_seconds
from kubesched.bench.controlplane import ControlPlane, binaries_dir
from kubesched.cluster.sessions import ResumingContext


def context(kind: str, ca: Path) -> ssl.SSLContext:
    made = ResumingContext if kind == "resuming" else ssl.SSLContext
    ctx = made(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(cafile=str(ca))
    return ctx


async def connect(host: str, port: int, ctx: ssl.SSLContext, token: str) -> tuple[object, bool]:
    reader, writer = await asyncio.open_connection(host, port, ssl=ctx, server_hostname=host)
    request = f"GET /version HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n\r\n"
    writer.write(request.encode())
    await writer.drain()
    await reader.read(4096)
    return writer, bool(writer.get_extra_info("ssl_object").session_reused)


async def one_round(cp: ControlPlane, kind: str, n: int) -> tuple[float, float, float, int]:
    host, _, port = cp.server.removeprefix("https://").partition(":")
    ctx = context(kind, cp.ca_file)
    first, _ = await connect(host, int(port), ctx, cp.token)  # the ticket to resume
    await asyncio.sleep(0.05)
    apiserver = cp.pids()["kube-apiserver"]
    c0, s0, t0 = time.process_time(), _proc_cpu_seconds(apiserver) or 0.0, time.monotonic()
    held, resumed = [first], 0
    for _ in range(n):
        writer, reused = await connect(host, int(port), ctx, cp.token)
        held.append(writer)
        resumed += reused
    c1, s1, t1 = time.process_time(), _proc_cpu_seconds(apiserver) or 0.0, time.monotonic()
    for w in held:
        w.close()  # type: ignore[attr-defined]
    return 1000 * (c1 - c0) / n, 1000 * (s1 - s0) / n, 1000 * (t1 - t0) / n, resumed


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--connections", type=int, default=100)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    figures: dict[str, list[tuple[float, float, float, int]]] = {"plain": [], "resuming": []}
    with ControlPlane(binaries_dir()) as cp:
        for r in range(args.rounds):
            for kind in figures:
                got = uvloop.run(one_round(cp, kind, args.connections))
                figures[kind].append(got)
                print(
                    f"round {r} {kind:9} ms a connection: ours {got[0]:.2f}, "
                    f"kube-apiserver {got[1]:.2f}, wall {got[2]:.2f}; resumed {got[3]}",
                    flush=True,
                )
    for kind, rows in figures.items():
        ours, server, wall = (statistics.median(r[i] for r in rows) for i in range(3))
        print(
            f"{kind:9} median ms a connection: ours {ours:.2f}, kube-apiserver {server:.2f}, wall {wall:.2f}"
        )


if __name__ == "__main__":
    main()
