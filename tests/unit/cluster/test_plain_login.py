"""The start-up prefetch's kubeconfig reader logs in as kubernetes_asyncio's loader does
for the common logins, and leaves everything else to that loader (None)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched.cluster import plain_login
from kubesched.cluster.kubeconfig import load_client_configuration


def write(tmp_path: Path, cluster: dict[str, Any], user: dict[str, Any]) -> str:
    path = tmp_path / "config"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "other", "cluster": {"server": "https://wrong:1"}},
                    {"name": "c", "cluster": cluster},
                ],
                "users": [{"name": "u", "user": user}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return str(path)


def b64(text: str) -> str:
    return base64.standard_b64encode(text.encode()).decode()


def contents(path: str | None) -> str | None:
    return Path(path).read_text() if path else None


CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "token and CA data": (
        {"server": "https://10.0.0.1:6443/", "certificate-authority-data": b64("CA")},
        {"token": "abc"},
    ),
    "client certificate files, relative to the kubeconfig": (
        {"server": "https://api.example:443", "certificate-authority": "ca.crt"},
        {"client-certificate": "me.crt", "client-key": "me.key"},
    ),
    "client certificate data, TLS verification off": (
        {"server": "https://api.example", "insecure-skip-tls-verify": True},
        {"client-certificate-data": b64("CERT"), "client-key-data": b64("KEY")},
    ),
    "plain HTTP, no user": ({"server": "http://127.0.0.1:8080"}, {}),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_the_login_is_the_real_loaders(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HTTPS_PROXY", raising=False)
    monkeypatch.delenv("https_proxy", raising=False)
    for name in ("ca.crt", "me.crt", "me.key"):
        (tmp_path / name).write_text(name.upper())
    cluster, user = CASES[case]
    path = write(tmp_path, cluster, user)
    temp = tmp_path / "temp"
    temp.mkdir()
    login = plain_login.read(path, str(temp))
    cfg = await load_client_configuration(path)
    assert login is not None
    assert login.host == cfg.host
    assert login.token == (await cfg.get_api_key_with_prefix("BearerToken") or "")
    assert login.verify == cfg.verify_ssl
    if cfg.host.startswith("https"):
        assert contents(login.ca_file) == contents(cfg.ssl_ca_cert)
        assert contents(login.cert_file) == contents(cfg.cert_file)
        assert contents(login.key_file) == contents(cfg.key_file)


@pytest.mark.parametrize(
    ("cluster", "user"),
    [
        ({"server": "https://a", "proxy-url": "http://proxy:3128"}, {"token": "t"}),
        ({"server": "https://a", "tls-server-name": "kubernetes"}, {"token": "t"}),
        ({"server": "https://a"}, {"exec": {"command": "aws", "apiVersion": "v1"}}),
        ({"server": "https://a"}, {"username": "me", "password": "secret"}),
        ({"server": "https://a"}, {"tokenFile": "/run/token"}),
    ],
)
def test_other_logins_are_left_to_the_real_loader(
    cluster: dict[str, Any], user: dict[str, Any], tmp_path: Path
) -> None:
    assert plain_login.read(write(tmp_path, cluster, user)) is None


def test_several_files_a_proxy_or_an_unreadable_file_are_left_to_the_real_loader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, {"server": "https://a"}, {"token": "t"})
    assert plain_login.read(path) is not None
    monkeypatch.setenv("KUBECONFIG", f"{path}:{path}")
    assert plain_login.read(None) is None
    assert plain_login.read(str(tmp_path / "missing")) is None
    (tmp_path / "bad").write_text("{not yaml")
    assert plain_login.read(str(tmp_path / "bad")) is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy:3128")
    assert plain_login.read(path) is None


def test_in_a_pod_the_service_account_logs_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("KUBECONFIG", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config
    (tmp_path / "token").write_text("sa-token\n")
    (tmp_path / "ca.crt").write_text("CA")
    monkeypatch.setattr(plain_login, "SERVICE_ACCOUNT", tmp_path)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    assert plain_login.read(None) == plain_login.Login(
        host="https://[fd00::1]:443", ca_file=str(tmp_path / "ca.crt"), token="Bearer sa-token"
    )
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    assert plain_login.read(None) is None  # not in a cluster: the real loader says so
