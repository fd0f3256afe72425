"""Where the API server is and how to log in: a kubeconfig file or the pod's service account.

:func:`load_client_configuration` resolves it as kubectl does (an explicit file,
``KUBECONFIG`` (several files joined with ``:``), ``~/.kube/config``, then the in-cluster
service account) and turns every way this can fail (a missing or unreadable file,
invalid YAML, a file without a current context, no configuration at all outside a
cluster) into a :class:`KubeconfigError` whose message names the file and the problem,
for the command line to print as one line.
"""

from __future__ import annotations

import os
import urllib.parse
import urllib.request
from pathlib import Path

import yaml
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config

__all__ = ["KubeconfigError", "load_client_configuration"]


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


async def load_client_configuration(kubeconfig: str | None = None) -> k8s_client.Configuration:
    """The usual resolution: an explicit file, ``KUBECONFIG``, ``~/.kube/config``, then the
    in-cluster service account (kubectl's order; in a pod there is no ~/.kube/config).
    Raises :class:`KubeconfigError`."""
    cfg = k8s_client.Configuration()
    path, origin = _source(kubeconfig)
    if path:
        _check_files(path, origin)
        try:
            await k8s_config.load_kube_config(config_file=path, client_configuration=cfg)
        except yaml.YAMLError as e:
            raise KubeconfigError(f"kubeconfig {path} ({origin}): {_yaml_problem(e)}") from None
        except OSError as e:
            raise KubeconfigError(
                f"kubeconfig {path} ({origin}): cannot read: {e.strerror or e}"
            ) from None
        except (k8s_config.ConfigException, ValueError, TypeError, KeyError) as e:
            message = str(e).replace(f" in {path}", "").rstrip(".")
            raise KubeconfigError(f"kubeconfig {path} ({origin}): {message}") from None
    else:
        try:
            k8s_config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        except k8s_config.ConfigException as e:
            raise KubeconfigError(
                "no kubeconfig (no --kubeconfig, KUBECONFIG unset, no ~/.kube/config) and "
                f"not in a cluster ({str(e).rstrip('.')})"
            ) from None
    if not cfg.proxy:
        # HTTPS_PROXY/NO_PROXY, resolved once here instead of on every request (see
        # kubesched.cluster.sessions.session_for)
        host = urllib.parse.urlsplit(str(cfg.host)).hostname or ""
        proxies = urllib.request.getproxies()
        if proxies.get("https") and not urllib.request.proxy_bypass(host):
            cfg.proxy = proxies["https"]
    return cfg
