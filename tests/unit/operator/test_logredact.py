"""Credentials are masked in log records: messages, arguments, tracebacks."""

from __future__ import annotations

import io
import logging

import aiohttp
import pytest
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from kubesched.operator.logredact import MASK, RedactCredentials, install, redact

TOKEN = "eyJhbGciOiJSUzI1NiJ9.c2VjcmV0.c2lnbmF0dXJl"


@pytest.mark.parametrize(
    "text",
    [
        f"Authorization: Bearer {TOKEN}",
        f"{{'Authorization': 'Bearer {TOKEN}', 'Accept': 'application/json'}}",
        f"headers=<CIMultiDictProxy('Authorization': 'Bearer {TOKEN}')>",
        f"bearer {TOKEN}",
        f"token: {TOKEN}",
        f"ConnectionInfo(server='https://x', token='{TOKEN}', scheme='Bearer')",
        f"client-key-data: {TOKEN}",
        f"-----BEGIN RSA PRIVATE KEY-----\n{TOKEN}\n-----END RSA PRIVATE KEY-----",
    ],
)
def test_the_credential_is_masked(text: str) -> None:
    out = redact(text)
    assert TOKEN not in out and MASK in out, out


def test_ordinary_lines_are_untouched() -> None:
    line = "pod default/web-1 bound to node n1 (profile kubesched, 3 tokens of 5 left)"
    assert redact(line) == line


def _logger() -> tuple[logging.Logger, io.StringIO]:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    logger = logging.getLogger(f"test.logredact.{id(out)}")
    logger.propagate = False
    logger.addHandler(handler)
    install(logger)
    install(logger)  # idempotent
    assert sum(isinstance(f, RedactCredentials) for f in handler.filters) == 1
    return logger, out


def test_arguments_and_aiohttp_exceptions_are_masked() -> None:
    """aiohttp's ClientResponseError repr carries the request and its headers."""
    logger, out = _logger()
    headers = CIMultiDictProxy(CIMultiDict({"Authorization": f"Bearer {TOKEN}"}))
    info = aiohttp.RequestInfo(URL("https://api/x"), "GET", headers, URL("https://api/x"))
    err = aiohttp.ClientResponseError(info, (), status=401, message="Unauthorized")
    assert TOKEN in repr(err)  # what is being guarded against
    logger.warning("request failed: %r", err)
    try:
        raise RuntimeError(f"wrapped {err!r}")
    except RuntimeError:
        logger.exception("while binding")
    text = out.getvalue()
    assert TOKEN not in text
    assert "request failed" in text and "while binding" in text and "401" in text
