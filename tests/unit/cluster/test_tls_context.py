"""The TLS context of kubesched's sessions (kubesched.cluster.sessions.tls_context): one
for every session with the same settings, made again when a file changes, and no CA
bundle loaded for a server that is not verified."""

from __future__ import annotations

import os
import ssl
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s_client

from kubesched.cluster.sessions import tls_context
from tests.tls import self_signed_ca


def _cfg(ca: Path | None, *, verify: bool = True) -> k8s_client.Configuration:
    cfg = k8s_client.Configuration(host="https://127.0.0.1:6443")
    cfg.ssl_ca_cert = str(ca) if ca else None
    cfg.verify_ssl = verify
    return cfg


def _names(ctx: ssl.SSLContext) -> list[str]:
    """The common names of the CA certificates ``ctx`` has loaded."""
    names: list[str] = []
    for cert in ctx.get_ca_certs():
        subject: Any = cert["subject"]  # ((("commonName", "x"),), ...)
        names += [value for rdn in subject for key, value in rdn if key == "commonName"]
    return names


def test_sessions_with_the_same_settings_share_one_context(tmp_path: Path) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_bytes(self_signed_ca("first"))

    ctx = tls_context(_cfg(ca))

    assert tls_context(_cfg(ca)) is ctx  # the pools, Kopf's sessions: one load
    assert _names(ctx) == ["first"]
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname


def test_a_file_changed_on_disk_makes_a_new_context(tmp_path: Path) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_bytes(self_signed_ca("first"))
    ctx = tls_context(_cfg(ca))

    ca.write_bytes(self_signed_ca("rotated"))
    st = ca.stat()
    os.utime(ca, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # a coarse clock

    again = tls_context(_cfg(ca))
    assert again is not ctx
    assert _names(again) == ["rotated"]


def test_a_server_not_verified_loads_no_ca_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = tmp_path / "bundle.pem"
    bundle.write_bytes(self_signed_ca("system"))
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))  # what a default context would load

    ctx = tls_context(_cfg(None, verify=False))

    assert ctx.verify_mode == ssl.CERT_NONE and not ctx.check_hostname
    assert ctx.get_ca_certs() == []
