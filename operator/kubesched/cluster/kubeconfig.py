"""Where the API server is and how to log in: a kubeconfig file or the pod's service account.

:func:`load_client_configuration` resolves it as kubectl does (an explicit file,
``KUBECONFIG`` (several files joined with ``:``), ``~/.kube/config``, then the in-cluster
service account) and turns every way this can fail (a missing or unreadable file,
invalid YAML, a file without a current context, no configuration at all outside a
cluster) into a :class:`KubeconfigError` whose message names the file and the problem,
for the command line to print as one line.

Given the login the start-up prefetch already read (:mod:`kubesched.cluster.plain_login`:
a service account, or a kubeconfig whose user has a token or a client certificate), it
builds the same configuration from that instead, and kubernetes_asyncio's loader and
yaml (about 24 ms of ``kubesched run``'s start) are imported only for the other logins.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubernetes_asyncio import client as k8s_client

from kubesched.cluster import plain_login

if TYPE_CHECKING:
    import yaml

__all__ = ["KubeconfigError", "load_client_configuration"]

# kubernetes_asyncio logs an exec plugin's failure before raising it: the error says it
# (below), and a command without logging set up would print it twice (logging's last
# resort handler); ``kubesched run``'s own logging still gets the record
logging.getLogger("kubernetes_asyncio").addHandler(logging.NullHandler())

_LOADER_ERRORS = (ValueError, TypeError, KeyError, AttributeError, AssertionError)
"""What kubernetes_asyncio's loader raises on a file it cannot use: its own errors
(``ConfigException``, added where it is imported), and Python's where a field has another
type than it expects (``server: 3``, ``context: 5``)."""

TOKEN_REREAD = 60.0
"""Seconds between two reads of the service account's token file (the kubelet rotates
the token it holds; kubernetes_asyncio's in-cluster loader re-reads it every minute)."""


class KubeconfigError(ValueError):
    """No usable client configuration; the message says which file and why."""


def _source(kubeconfig: str | None) -> tuple[str, str]:
    """(path, where it came from), path empty when there is none."""
    if kubeconfig:
        return kubeconfig, "--kubeconfig"
    env = os.environ.get("KUBECONFIG")
    if env:
        return env, "KUBECONFIG"
    home = Path.home() / ".kube" / "config"
    if home.exists():
        return str(home), "~/.kube/config"
    return "", ""


def _check_files(path: str, origin: str) -> None:
    files = [p for p in path.split(os.pathsep) if p]
    if not files:
        raise KubeconfigError(f"kubeconfig {path!r} ({origin}): no file named")
    usable = [p for p in files if os.path.isfile(p)]
    if usable:
        return
    p = files[0]
    why = "is a directory" if os.path.isdir(p) else "no such file"
    raise KubeconfigError(f"kubeconfig {p} ({origin}): {why}")


def _yaml_problem(e: yaml.YAMLError) -> str:
    mark = getattr(e, "problem_mark", None)
    problem = getattr(e, "problem", None) or str(e)
    at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"invalid YAML{at}: {problem}"


async def load_client_configuration(
    kubeconfig: str | None = None, plain: plain_login.Plain | None = None
) -> k8s_client.Configuration:
    """The usual resolution: an explicit file, ``KUBECONFIG``, ``~/.kube/config``, then the
    in-cluster service account (kubectl's order; in a pod there is no ~/.kube/config).
    ``plain``: the login :func:`~kubesched.cluster.plain_login.parse` read for the same
    ``kubeconfig`` (the start-up prefetch's), configured as the real loader would.
    Raises :class:`KubeconfigError`."""
    cfg = k8s_client.Configuration()
    if plain is not None:
        _configure(cfg, plain)
    else:
        await _load(cfg, kubeconfig)
    if not cfg.proxy:
        # HTTPS_PROXY/NO_PROXY, resolved once here instead of on every request (see
        # kubesched.cluster.sessions.session_for)
        host = urllib.parse.urlsplit(str(cfg.host)).hostname or ""
        proxies = urllib.request.getproxies()
        if proxies.get("https") and not urllib.request.proxy_bypass(host):
            cfg.proxy = proxies["https"]
    return cfg


async def _load(cfg: k8s_client.Configuration, kubeconfig: str | None) -> None:
    """kubernetes_asyncio's loader, its failures worded for the user."""
    import yaml
    from kubernetes_asyncio import config as k8s_config

    path, origin = _source(kubeconfig)
    if path:
        _check_files(path, origin)
        try:
            await k8s_config.load_kube_config(config_file=path, client_configuration=cfg)
        except yaml.YAMLError as e:
            raise KubeconfigError(f"kubeconfig {path} ({origin}): {_yaml_problem(e)}") from None
        except OSError as e:
            raise KubeconfigError(f"kubeconfig {path} ({origin}): {_os_problem(path, e)}") from None
        except (k8s_config.ConfigException, *_LOADER_ERRORS) as e:
            message = _shape_problem(path) or _loader_message(e, path)
            raise KubeconfigError(f"kubeconfig {path} ({origin}): {message}") from None
    else:
        try:
            k8s_config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        except k8s_config.ConfigException as e:
            raise KubeconfigError(
                "no kubeconfig (no --kubeconfig, KUBECONFIG unset, no ~/.kube/config) and "
                f"not in a cluster ({str(e).rstrip('.')})"
            ) from None


def _configure(cfg: k8s_client.Configuration, plain: plain_login.Plain) -> None:
    """What the real loader sets for ``plain``'s login: the server, its CA, our
    certificate or token; certificate data in files of this process (removed at its
    exit, as the real loader's are); the service account's token re-read
    every :data:`TOKEN_REREAD` seconds."""
    data = any(w is not None and w[0] == "data" for w in (plain.ca, plain.cert, plain.key))
    login = plain_login.login(plain, _login_dir() if data else None)
    cfg.host = login.host
    cfg.ssl_ca_cert = login.ca_file
    cfg.cert_file = login.cert_file
    cfg.key_file = login.key_file
    cfg.verify_ssl = login.verify
    if login.token:
        cfg.api_key["BearerToken"] = login.token
    if plain.service_account:
        cfg.refresh_api_key_hook = _TokenFile(plain_login.SERVICE_ACCOUNT / "token", plain.token)


class _TokenFile:
    """A ``refresh_api_key_hook`` re-reading the service account's token file (kept
    as it was when the file is gone or empty for a moment, while the kubelet swaps it)."""

    clock = staticmethod(time.monotonic)

    def __init__(self, path: Path, token: str) -> None:
        self.path = path
        self.token = token
        self.read_at = self.clock()

    def __call__(self, cfg: k8s_client.Configuration) -> None:
        now = self.clock()
        if now - self.read_at >= TOKEN_REREAD:
            self.read_at = now
            try:
                text = self.path.read_text()
            except OSError:
                text = ""
            if text:
                self.token = f"Bearer {text}"
        cfg.api_key["BearerToken"] = self.token


_dirs: list[str] = []


def _login_dir() -> str:
    """The directory of this process's certificate data files, removed at its exit."""
    if not _dirs:
        _dirs.append(tempfile.mkdtemp(prefix="kubesched-login-"))
        atexit.register(shutil.rmtree, _dirs[0], True)
    return _dirs[0]


# -- saying what is wrong with a file the loader refused ------------------------------------
_STRINGS = {
    "cluster": (
        "server",
        "certificate-authority",
        "certificate-authority-data",
        "tls-server-name",
        "proxy-url",
    ),
    "context": ("cluster", "user", "namespace"),
    "user": (
        "token",
        "tokenFile",
        "client-certificate",
        "client-certificate-data",
        "client-key",
        "client-key-data",
        "username",
        "password",
    ),
}
"""The fields kubectl reads as strings, per entry kind."""


def _files_of(path: str) -> list[tuple[str, Any]]:
    """Each file of ``path`` (``:``-joined) with its document; those that cannot be read
    or parsed are left out (the loader's own error says so)."""
    import yaml

    out: list[tuple[str, Any]] = []
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    for name in (p for p in path.split(os.pathsep) if p):
        try:
            with open(name, encoding="utf-8") as f:
                out.append((name, yaml.load(f, Loader=loader)))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue
    return out


def _kind(value: object) -> str:
    """What ``value`` is, never what it says (a misplaced token, password or key)."""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "a mapping"


def _shape_problem(path: str) -> str | None:
    """Where a file of ``path`` is not shaped as a kubeconfig (an empty file, a list, a
    ``clusters`` that is not a list, a ``cluster`` or ``server`` of another type), or
    None if every file is: the loader's own message then says what it missed."""
    files = _files_of(path)
    for name, doc in files:
        where = f"{name}: " if len(files) > 1 else ""
        problem = _doc_problem(doc)
        if problem:
            return where + problem
    return None


class _Misshapen(Exception):
    """Where a kubeconfig document is not shaped as one, and how."""


def _bodies(doc: Any, key: str, entry: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each item of the list ``doc[key]`` (clusters, contexts, users) as where it is and
    its ``entry`` mapping (cluster, context, user); items without one are passed over, and
    a document that is not a mapping has none. Raises :class:`_Misshapen` at the first
    list, item, name or entry of another type."""
    items = doc.get(key) if isinstance(doc, dict) else None
    if items is None:
        return
    if not isinstance(items, list):
        raise _Misshapen(f"{key}: expected a list, got {_kind(items)}")
    for i, item in enumerate(items):
        at = f"{key}[{i}]"
        if not isinstance(item, dict):
            raise _Misshapen(f"{at}: expected a mapping with name and {entry}, got {_kind(item)}")
        name = item.get("name")
        if name is not None and not isinstance(name, str):
            raise _Misshapen(f"{at}.name: expected a string, got {_kind(name)}")
        if isinstance(name, str):
            at = f"{at} ({name})"
        body = item.get(entry)
        if body is None:
            continue
        if not isinstance(body, dict):
            raise _Misshapen(f"{at}.{entry}: expected a mapping, got {_kind(body)}")
        yield f"{at}.{entry}", body


def _doc_problem(doc: Any) -> str | None:
    if doc is None:
        return "the file is empty"
    if not isinstance(doc, dict):
        return f"not a kubeconfig: expected a mapping with clusters, contexts and users, got {_kind(doc)}"
    current = doc.get("current-context")
    if current is not None and not isinstance(current, str):
        return f"current-context: expected a context's name, got {_kind(current)}"
    try:
        for key, entry in (("clusters", "cluster"), ("contexts", "context"), ("users", "user")):
            for at, body in _bodies(doc, key, entry):
                for field in _STRINGS[entry]:
                    value = body.get(field)
                    if value is not None and not isinstance(value, str):
                        return f"{at}.{field}: expected a string, got {_kind(value)}"
                run = body.get("exec") if entry == "user" else None
                if run is not None and not (
                    isinstance(run, dict) and isinstance(run.get("command"), str)
                ):
                    return f"{at}.exec: expected a mapping with a command, got {_kind(run)}"
    except _Misshapen as e:
        return str(e)
    return None


_OBJECT = re.compile(r"<[\w.]+ object at 0x[0-9a-fA-F]+>")
"""How the loader prints a node of the file it could not read as a name."""


def _loader_message(e: BaseException, path: str) -> str:
    """The loader's message, without the file's name (the line names it) and the objects
    it prints as ``<... ConfigNode object at 0x...>``; Python's error's name where it
    has no words (an ``assert`` of the loader)."""
    text = _OBJECT.sub("(something that is not a name)", str(e).replace(f" in {path}", ""))
    return text.rstrip(".") or f"not a usable kubeconfig ({type(e).__name__})"


def _os_problem(path: str, e: OSError) -> str:
    """An OSError while loading: the kubeconfig file itself unreadable, or a file or
    command it names (an exec plugin's command not found or not executable)."""
    named = e.filename if isinstance(e.filename, str) else None
    if named is None or named in path.split(os.pathsep):
        return f"cannot read: {e.strerror or e}"
    commands = set()
    for _, doc in _files_of(path):
        try:
            for _, user in _bodies(doc, "users", "user"):
                if isinstance(user.get("exec"), dict):
                    commands.add(str(user["exec"].get("command")))
        except _Misshapen:
            continue
    what = "its exec plugin's command" if named in commands else "a file it names"
    return f"{what} {named}: {e.strerror or e}"
