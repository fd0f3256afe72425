"""Process start to first bind against a stub API server: kubesched's own start (its
imports, settings, set-up and first cycle) without the API server's share, for A/B runs of
checkouts (docs/benchmarks.md, "Start-up").

    git worktree add --detach /tmp/before <commit>
    python docs/startup-stub.py --tree /tmp/before --tree . --runs 15

The stub serves HTTPS with a CA of its own (named in the kubeconfig, as a real cluster's
is): one node and ``--pods`` pending pods, empty lists of every other kind, 404 for the
CRDs, watches that stay open and quiet; it takes every write. The figure is the time from
starting ``python -m kubesched run`` (``PYTHONPATH=<tree>/operator``, its modules compiled
first) to the stub receiving the first Binding. The checkouts are alternated; read the
medians. Not a test, and not a comparison with kube-scheduler: startup-harness.py is that.
"""

# ruff: noqa: ASYNC110, ASYNC220, ASYNC240 (a measuring script: its blocking calls are
# outside the timed window, and nothing else runs in its loop)

from __future__ import annotations

import argparse
import asyncio
import compileall
import ipaddress
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from aiohttp import web


def certificates(directory: Path) -> tuple[Path, Path, Path]:
    """(CA certificate, server certificate, server key) for 127.0.0.1, written there."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.now(UTC)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def builder(subject: str, key: Any, serial: int) -> x509.CertificateBuilder:
        return (
            x509.CertificateBuilder()
            .subject_name(name(subject))
            .issuer_name(name("stub-ca"))
            .public_key(key.public_key())
            .serial_number(serial)
            .not_valid_before(now - timedelta(minutes=5))
            .not_valid_after(now + timedelta(days=1))
        )

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = builder("stub-ca", ca_key, 1).add_extension(
        x509.BasicConstraints(ca=True, path_length=None), critical=True
    )
    server = builder("127.0.0.1", key, 2).add_extension(
        x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
        critical=False,
    )
    paths = directory / "ca.pem", directory / "server.pem", directory / "server.key"
    pem = serialization.Encoding.PEM
    paths[0].write_bytes(ca.sign(ca_key, hashes.SHA256()).public_bytes(pem))
    paths[1].write_bytes(server.sign(ca_key, hashes.SHA256()).public_bytes(pem))
    paths[2].write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return paths


class Stub:
    """The API server's answers (see the module docstring); ``bound`` is when the first
    Binding came (monotonic), or None."""

    def __init__(self, pods: int, list_seconds: float = 0.0) -> None:
        self.list_seconds = list_seconds
        capacity = {"cpu": "4", "memory": "32Gi", "pods": "110"}
        meta = {"resourceVersion": "1", "creationTimestamp": "2026-01-01T00:00:00Z"}
        self.lists: dict[str, list[dict[str, Any]]] = {
            "/api/v1/nodes": [
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": "n1", "uid": "n1", **meta},
                    "status": {
                        "capacity": capacity,
                        "allocatable": capacity,
                        "conditions": [{"type": "Ready", "status": "True"}],
                    },
                }
            ],
            "/api/v1/pods": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": f"p{i}", "namespace": "default", "uid": f"u{i}", **meta},
                    "spec": {
                        "schedulerName": "kubesched",
                        "containers": [
                            {
                                "name": "c",
                                "image": "pause",
                                "resources": {"requests": {"cpu": "1m"}},
                            }
                        ],
                    },
                    "status": {"phase": "Pending"},
                }
                for i in range(pods)
            ],
        }
        self.bound: float | None = None

    async def answer(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        if request.method != "GET":
            if path.endswith("/binding") and self.bound is None:
                self.bound = time.monotonic()
            return web.json_response({"kind": "Status", "status": "Success"}, status=201)
        if path == "/version":
            return web.json_response({"major": "1", "minor": "37", "gitVersion": "v1.37.2"})
        if request.query.get("watch") in ("1", "true"):
            response = web.StreamResponse()
            await response.prepare(request)
            await asyncio.sleep(3600)
            return response
        if path.startswith(("/apis/kubesched.dev", "/apis/scheduling.x-k8s.io")) or (
            path.startswith("/apis/scheduling.k8s.io/") and "/v1/" not in path + "/"
        ):
            return web.json_response({"kind": "Status", "code": 404}, status=404)
        items = self.lists.get(path, [])
        if path == "/api/v1/pods":
            await asyncio.sleep(self.list_seconds)  # a real server encoding thousands
        return web.json_response(
            {
                "kind": "List",
                "apiVersion": "v1",
                "metadata": {"resourceVersion": "1"},
                "items": items,
            }
        )


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tree", action="append", default=[], help="a kubesched checkout (repeatable)")
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--pods", type=int, default=50)
    p.add_argument(
        "--list-seconds",
        type=float,
        default=0.0,
        help="how long the pods' LIST takes to answer (a real API server's time for many)",
    )
    args = p.parse_args()
    trees = [str(Path(t).resolve()) for t in args.tree or ["."]]
    for tree in trees:
        compileall.compile_dir(Path(tree) / "operator" / "kubesched", quiet=2)
    stub = Stub(args.pods, args.list_seconds)
    with tempfile.TemporaryDirectory(prefix="kubesched-stub-") as temp:
        ca, cert, key = certificates(Path(temp))
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(cert, key)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", stub.answer)
        runner = web.AppRunner(app, shutdown_timeout=0.1)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls)
        await site.start()
        port = runner.addresses[0][1]
        kubeconfig = Path(temp) / "kubeconfig"
        kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: stub\n"
            f"clusters: [{{name: stub, cluster: {{server: 'https://127.0.0.1:{port}', "
            f"certificate-authority: '{ca}'}}}}]\n"
            "users: [{name: stub, user: {token: stub}}]\n"
            "contexts: [{name: stub, context: {cluster: stub, user: stub}}]\n"
        )
        times: dict[str, list[float]] = {t: [] for t in trees}
        for run in range(args.runs):
            for tree in trees:
                stub.bound = None
                started = time.monotonic()
                argv = [sys.executable, "-m", "kubesched", "run", "--kubeconfig", str(kubeconfig)]
                argv += ["--no-leader-elect", "--port", "0", "--log-level", "error"]
                proc = subprocess.Popen(
                    argv,
                    env={**os.environ, "PYTHONPATH": f"{tree}/operator"},
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                while stub.bound is None and time.monotonic() - started < 60:
                    await asyncio.sleep(0.001)
                proc.kill()
                proc.wait()
                if stub.bound is None:
                    raise SystemExit(f"{tree}: no bind within 60 s")
                times[tree].append(stub.bound - started)
                print(f"{tree:40s} run {run}: first bind {times[tree][-1]:.3f} s", flush=True)
                await asyncio.sleep(0.3)
        await runner.cleanup()
    for tree, values in times.items():
        print(
            f"{tree:40s} median {statistics.median(values):.3f} s of "
            f"{sorted(round(v, 3) for v in values)}"
        )


if __name__ == "__main__":
    asyncio.run(main())
