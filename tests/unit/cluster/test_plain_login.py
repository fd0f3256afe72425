"""The start-up prefetch's kubeconfig reader logs in as kubernetes_asyncio's loader does
for the common logins, and leaves everything else to that loader (None)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from kubernetes_asyncio.config import incluster_config

from kubesched.cluster import kubeconfig, plain_login
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


def case_file(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The kubeconfig of ``CASES[case]``, with the files it names, and no proxy."""
    monkeypatch.delenv("HTTPS_PROXY", raising=False)
    monkeypatch.delenv("https_proxy", raising=False)
    for name in ("ca.crt", "me.crt", "me.key"):
        (tmp_path / name).write_text(name.upper())
    cluster, user = CASES[case]
    return write(tmp_path, cluster, user)


@pytest.mark.parametrize("case", list(CASES))
async def test_the_login_is_the_real_loaders(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = case_file(case, tmp_path, monkeypatch)
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
    (tmp_path / "token").write_text("sa-token")
    (tmp_path / "ca.crt").write_text("CA")
    monkeypatch.setattr(plain_login, "SERVICE_ACCOUNT", tmp_path)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    assert plain_login.read(None) == plain_login.Login(
        host="https://[fd00::1]:443", ca_file=str(tmp_path / "ca.crt"), token="Bearer sa-token"
    )
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    assert plain_login.read(None) is None  # not in a cluster: the real loader says so

    # a token the real loader would send with its white space: left to it
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    (tmp_path / "token").write_text("sa-token\n")
    assert plain_login.read(None) is None


CONFIGURED = (
    "host",
    "api_key",
    "api_key_prefix",
    "verify_ssl",
    "proxy",
    "tls_server_name",
    "assert_hostname",
    "username",
    "password",
)
"""The Configuration fields a login sets (the CA, certificate and key are compared by
their files)."""


async def same_configuration(plain: plain_login.Plain, path: str | None) -> None:
    real = await load_client_configuration(path)
    fast = await load_client_configuration(path, plain)
    for field in CONFIGURED:
        assert getattr(fast, field) == getattr(real, field), field
    assert await fast.get_api_key_with_prefix("BearerToken") == (
        await real.get_api_key_with_prefix("BearerToken")
    )
    for field, where in (
        ("ssl_ca_cert", plain.ca),
        ("cert_file", plain.cert),
        ("key_file", plain.key),
    ):
        ours, theirs = getattr(fast, field), getattr(real, field)
        assert contents(ours) == contents(theirs), field
        if where is not None and where[0] == "file":
            assert ours == theirs, field  # a file the kubeconfig names: that very file


@pytest.mark.parametrize("case", list(CASES))
async def test_run_configures_the_prefetchs_login_as_the_real_loader_would(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # kubesched run builds its client from the login the early listing read, without
    # kubernetes_asyncio's loader: the same server, CA, certificate, key and token
    path = case_file(case, tmp_path, monkeypatch)
    plain = plain_login.parse(path)
    assert plain is not None
    assert plain_login.Plain.from_json(orjson.loads(orjson.dumps(plain.to_json()))) == plain
    await same_configuration(plain, path)


@pytest.mark.parametrize(
    ("cluster", "user"),
    [
        ({"server": "https://a", "certificate-authority": "nowhere.crt"}, {"token": "t"}),
        ({"server": "https://a", "certificate-authority-data": ""}, {"token": "t"}),
        ({"server": "https://a"}, {"token": ""}),
        ({"server": "https://a", "insecure-skip-tls-verify": "yes"}, {"token": "t"}),
        ({"server": 6443}, {"token": "t"}),
    ],
)
def test_what_the_real_loader_reads_otherwise_is_left_to_it(
    cluster: dict[str, Any], user: dict[str, Any], tmp_path: Path
) -> None:
    # a missing file, an empty or odd value: the real loader's error or reading of it
    assert plain_login.parse(write(tmp_path, cluster, user)) is None


@pytest.mark.parametrize(
    "doc",
    [
        None,
        [],
        {"host": "https://a"},
        {**plain_login.Plain("https://a").to_json(), "ca": ["x", "y"]},
    ],
)
def test_a_login_line_not_written_by_the_child_is_none(doc: Any) -> None:
    assert plain_login.Plain.from_json(doc) is None


async def test_the_service_account_login_rereads_its_token_as_the_real_loader_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("KUBECONFIG", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "token").write_text("first")
    (tmp_path / "ca.crt").write_text("CA")
    monkeypatch.setattr(plain_login, "SERVICE_ACCOUNT", tmp_path)
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(tmp_path / "token"))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(tmp_path / "ca.crt"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    plain = plain_login.parse(None)
    assert plain is not None and plain.service_account
    await same_configuration(plain, None)

    clock = [1000.0]
    monkeypatch.setattr(kubeconfig._TokenFile, "clock", staticmethod(lambda: clock[0]))
    cfg = await load_client_configuration(None, plain)
    (tmp_path / "token").write_text("rotated")  # the kubelet's next token
    clock[0] += kubeconfig.TOKEN_REREAD - 1
    assert await cfg.get_api_key_with_prefix("BearerToken") == "Bearer first"
    clock[0] += 1
    assert await cfg.get_api_key_with_prefix("BearerToken") == "Bearer rotated"
    (tmp_path / "token").unlink()  # swapped out for a moment: the last token stays
    clock[0] += kubeconfig.TOKEN_REREAD
    assert await cfg.get_api_key_with_prefix("BearerToken") == "Bearer rotated"
