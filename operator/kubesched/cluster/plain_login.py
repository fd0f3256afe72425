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

:func:`parse` gives the login as read (:class:`Plain`, files named or carried as data,
nothing written yet), which the prefetch child hands the scheduler's process on its
pipe: ``kubesched run`` then builds its client configuration from it
(:func:`kubesched.cluster.kubeconfig.load_client_configuration`) without importing
kubernetes_asyncio's loader and yaml (about 24 ms of its start). So where the two could
differ, :func:`parse` answers None: a file the kubeconfig names that does not exist, an
empty value, a service account token with surrounding white space.
"""

from __future__ import annotations

import base64
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["File", "Login", "Plain", "login", "parse", "read"]

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")

_USER_KEYS = frozenset(
    {"token", "client-certificate", "client-certificate-data", "client-key", "client-key-data"}
)
_CLUSTER_KEYS = frozenset(
    {"server", "certificate-authority", "certificate-authority-data", "insecure-skip-tls-verify"}
)
_TEXT = (_USER_KEYS | _CLUSTER_KEYS) - {"insecure-skip-tls-verify"}
"""The fields read as text: each must be a string, and not empty."""


@dataclass(frozen=True)
class Login:
    """What an HTTP client needs: the server, its CA, our certificate or token."""

    host: str
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    token: str = ""
    verify: bool = True


File = tuple[str, str]
"""Where a CA, certificate or key is: ``("file", path)`` (the path the real loader
resolves: absolute, relative to the kubeconfig's directory) or ``("data", base64)``."""


@dataclass(frozen=True)
class Plain:
    """A login as read (:func:`parse`), before any file is written: JSON-able
    (:meth:`to_json`, :meth:`from_json`)."""

    host: str
    token: str = ""
    """``Bearer <token>``, or empty."""
    verify: bool = True
    ca: File | None = None
    cert: File | None = None
    key: File | None = None
    service_account: bool = False
    """The pod's service account: its token file is re-read as the kubelet rotates it."""

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "token": self.token,
            "verify": self.verify,
            "ca": self.ca,
            "cert": self.cert,
            "key": self.key,
            "service_account": self.service_account,
        }

    @classmethod
    def from_json(cls, doc: Any) -> Plain | None:
        """The login :meth:`to_json` wrote; None for anything else."""
        if not isinstance(doc, dict):
            return None
        files: dict[str, File | None] = {}
        for name in ("ca", "cert", "key"):
            where = doc.get(name)
            if where is None:
                files[name] = None
            elif (
                isinstance(where, (list, tuple))
                and len(where) == 2
                and where[0] in ("file", "data")
                and isinstance(where[1], str)
            ):
                files[name] = (str(where[0]), where[1])
            else:
                return None
        host, token = doc.get("host"), doc.get("token")
        verify, sa = doc.get("verify"), doc.get("service_account")
        if not (isinstance(host, str) and isinstance(token, str)):
            return None
        if not (isinstance(verify, bool) and isinstance(sa, bool)):
            return None
        return cls(host, token, verify, files["ca"], files["cert"], files["key"], sa)


def read(kubeconfig: str | None, temp_dir: str | None = None) -> Login | None:
    """The login of ``kubeconfig`` (None: the usual resolution), or None when this reader
    does not do what it needs (see the module doc). Certificate data is written to files
    in ``temp_dir`` (the caller removes them)."""
    plain = parse(kubeconfig)
    return None if plain is None else login(plain, temp_dir)


def login(plain: Plain, temp_dir: str | None = None) -> Login:
    """``plain`` with its certificate data written to files in ``temp_dir``."""

    def file_of(where: File | None) -> str | None:
        if where is None:
            return None
        how, value = where
        if how == "file":
            return value
        handle, name = tempfile.mkstemp(dir=temp_dir)
        with os.fdopen(handle, "wb") as f:
            f.write(base64.standard_b64decode(value))
        return name

    return Login(
        host=plain.host,
        ca_file=file_of(plain.ca),
        cert_file=file_of(plain.cert),
        key_file=file_of(plain.key),
        token=plain.token,
        verify=plain.verify,
    )


def parse(kubeconfig: str | None) -> Plain | None:
    """The login of ``kubeconfig`` as read, or None (see :func:`read`)."""
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
        return _from_file(path)
    except Exception:  # unreadable, invalid YAML, odd shapes: the real loader words it
        return None


def _in_cluster() -> Plain | None:
    host, port = (
        os.environ.get("KUBERNETES_SERVICE_HOST"),
        os.environ.get("KUBERNETES_SERVICE_PORT"),
    )
    token_file, ca = SERVICE_ACCOUNT / "token", SERVICE_ACCOUNT / "ca.crt"
    if not host or not port or not token_file.is_file() or not ca.is_file():
        return None
    token = token_file.read_text()
    if not token or token != token.strip() or not ca.read_bytes():
        return None
    if ":" in host or "%" in host:
        host = f"[{host}]"  # IPv6
    return Plain(
        host=f"https://{host}:{port}",
        ca=("file", str(ca)),
        token=f"Bearer {token}",
        service_account=True,
    )


def _named(entries: Any, name: Any, key: str) -> dict[str, Any] | None:
    for entry in entries or ():
        if isinstance(entry, dict) and entry.get("name") == name:
            found = entry.get(key)
            return found if isinstance(found, dict) else None
    return None


def _from_file(path: str) -> Plain | None:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(path, encoding="utf-8") as f:
        doc = yaml.load(f, Loader=loader)
    if not isinstance(doc, dict):
        return None
    context = _named(doc.get("contexts"), doc.get("current-context"), "context")
    if context is None:
        return None
    cluster = _named(doc.get("clusters"), context.get("cluster"), "cluster")
    user = _named(doc.get("users"), context.get("user"), "user") or {}
    if cluster is None or set(cluster) - _CLUSTER_KEYS or set(user) - _USER_KEYS:
        return None  # a proxy, a TLS server name, an exec plugin, a password...
    if any(not isinstance(v, str) or not v for k, v in {**cluster, **user}.items() if k in _TEXT):
        return None  # an empty or odd value: the real loader's reading of it
    host = cluster.get("server", "").rstrip("/")
    if not host.startswith(("https://", "http://")):
        return None
    verify = cluster.get("insecure-skip-tls-verify", False)
    if not isinstance(verify, bool):
        return None
    base = os.path.abspath(os.path.dirname(path))

    def where(section: dict[str, Any], key: str) -> File | None:
        data = section.get(f"{key}-data")
        if data:
            return ("data", data)
        name = section.get(key)
        if not name:
            return None
        resolved = os.path.normpath(os.path.join(base, name))
        if not os.path.isfile(resolved):
            raise FileNotFoundError(resolved)  # the real loader says which file
        return ("file", resolved)

    token = user.get("token", "")
    https = host.startswith("https://")
    return Plain(
        host=host,
        ca=where(cluster, "certificate-authority") if https else None,
        cert=where(user, "client-certificate") if https else None,
        key=where(user, "client-key") if https else None,
        token=f"Bearer {token}" if token else "",
        verify=not verify,
    )
