"""Where the API server is and how to log in, read without kubernetes_asyncio: for the
start-up prefetch (:mod:`kubesched.cluster.prefetch`) only.

kubernetes_asyncio's loader imports aiohttp, urllib3 and its configuration classes: about
half a CPU second on a busy 2-core machine before the first LIST could be sent. The
common logins need none of it: the pod's service account (``kubesched run`` in a
cluster), or a kubeconfig whose user has a token or a client certificate. :func:`read`
resolves the file as :func:`kubesched.cluster.kubeconfig.load_client_configuration` does
(an explicit file, ``KUBECONFIG``, ``~/.kube/config``, then the service account) and
returns None for anything else (several files, an exec or auth-provider plugin, a
password, a proxy, a TLS server name, ``tokenFile``, a context other than the current
one, an ``HTTPS_PROXY``): the prefetch then uses the real loader. Nothing here raises: a file it cannot
read is None as well, and the real loader words the problem for the user.
"""

from __future__ import annotations

import base64
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Login", "read"]

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")

_USER_KEYS = frozenset(
    {"token", "client-certificate", "client-certificate-data", "client-key", "client-key-data"}
)
_CLUSTER_KEYS = frozenset(
    {"server", "certificate-authority", "certificate-authority-data", "insecure-skip-tls-verify"}
)


@dataclass(frozen=True)
class Login:
    """What an HTTP client needs: the server, its CA, our certificate or token."""

    host: str
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    token: str = ""
    verify: bool = True


def read(kubeconfig: str | None, temp_dir: str | None = None) -> Login | None:
    """The login of ``kubeconfig`` (None: the usual resolution), or None when this reader
    does not do what it needs (see the module doc). Certificate data is written to files
    in ``temp_dir`` (the caller removes them)."""
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy")):
        return None  # the real loader decides whether the server is bypassed
    try:
        path = kubeconfig or os.environ.get("KUBECONFIG") or ""
        if not path:
            home = Path.home() / ".kube" / "config"
            path = str(home) if home.exists() else ""
        if not path:
            return _in_cluster()
        if os.pathsep in path:
            return None  # several files, merged: the real loader
        return _from_file(Path(path), temp_dir)
    except Exception:  # unreadable, invalid YAML, odd shapes: the real loader words it
        return None


def _in_cluster() -> Login | None:
    host, port = (
        os.environ.get("KUBERNETES_SERVICE_HOST"),
        os.environ.get("KUBERNETES_SERVICE_PORT"),
    )
    token_file, ca = SERVICE_ACCOUNT / "token", SERVICE_ACCOUNT / "ca.crt"
    if not host or not port or not token_file.is_file() or not ca.is_file():
        return None
    token = token_file.read_text().strip()
    if not token:
        return None
    if ":" in host:
        host = f"[{host}]"  # IPv6
    return Login(host=f"https://{host}:{port}", ca_file=str(ca), token=f"Bearer {token}")


def _named(entries: Any, name: Any, key: str) -> dict[str, Any] | None:
    for entry in entries or ():
        if isinstance(entry, dict) and entry.get("name") == name:
            found = entry.get(key)
            return found if isinstance(found, dict) else None
    return None


def _from_file(path: Path, temp_dir: str | None) -> Login | None:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    doc = yaml.load(path.read_text(), Loader=loader)
    if not isinstance(doc, dict):
        return None
    context = _named(doc.get("contexts"), doc.get("current-context"), "context")
    if context is None:
        return None
    cluster = _named(doc.get("clusters"), context.get("cluster"), "cluster")
    user = _named(doc.get("users"), context.get("user"), "user") or {}
    if cluster is None or set(cluster) - _CLUSTER_KEYS or set(user) - _USER_KEYS:
        return None  # a proxy, a TLS server name, an exec plugin, a password...
    host = str(cluster.get("server") or "").rstrip("/")
    if not host.startswith(("https://", "http://")):
        return None
    base = path.parent

    def file_of(section: dict[str, Any], key: str) -> str | None:
        data = section.get(f"{key}-data")
        if data:
            handle, name = tempfile.mkstemp(dir=temp_dir)
            with os.fdopen(handle, "wb") as f:
                f.write(base64.standard_b64decode(str(data)))
            return name
        value = section.get(key)
        return str(base / str(value)) if value else None

    token = str(user.get("token") or "")
    return Login(
        host=host,
        ca_file=file_of(cluster, "certificate-authority"),
        cert_file=file_of(user, "client-certificate"),
        key_file=file_of(user, "client-key"),
        token=f"Bearer {token}" if token else "",
        verify=not cluster.get("insecure-skip-tls-verify"),
    )
