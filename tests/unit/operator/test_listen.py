"""The endpoints' sockets, taken when ``kubesched run`` starts: a port in use or an address
not of this host is one line naming the flags (the CLI prints it without a traceback)."""

from __future__ import annotations

import socket

import pytest

from kubesched.operator.listen import ListenError, listen


def test_port_zero_takes_a_free_port_that_accepts_connections() -> None:
    socks = listen("127.0.0.1", 0)
    try:
        port = socks[0].getsockname()[1]
        assert port > 0
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            pass
    finally:
        for s in socks:
            s.close()


def test_every_address_of_the_host_gets_the_same_port() -> None:
    resolved = {info[4][0] for info in socket.getaddrinfo("localhost", 0, type=socket.SOCK_STREAM)}
    try:
        socks = listen("localhost", 0)
    except ListenError as e:  # ::1 resolved but IPv6 off in this sandbox
        pytest.skip(f"localhost cannot be bound on every address here: {e}")
    try:
        assert {s.getsockname()[0] for s in socks} == resolved
        assert len({s.getsockname()[1] for s in socks}) == 1
    finally:
        for s in socks:
            s.close()


def test_a_port_in_use_is_one_line_naming_the_flags() -> None:
    taken = socket.create_server(("127.0.0.1", 0))
    port = taken.getsockname()[1]
    try:
        with pytest.raises(ListenError) as err:
            listen("127.0.0.1", port)
    finally:
        taken.close()
    assert str(err.value) == (
        f"--bind-address 127.0.0.1 --port {port}: cannot listen on 127.0.0.1:{port}: "
        "address already in use"
    )


def test_an_address_that_is_not_this_hosts_is_refused() -> None:
    with pytest.raises(ListenError, match=r"^--bind-address 192\.0\.2\.1 --port 0: cannot listen"):
        listen("192.0.2.1", 0)  # TEST-NET-1: never a local address


def test_a_name_that_does_not_resolve_is_refused() -> None:
    with pytest.raises(
        ListenError, match=r"'no-such-host\.invalid' is not an address of this host"
    ):
        listen("no-such-host.invalid", 0)


def test_the_port_is_free_again_once_closed() -> None:
    socks = listen("127.0.0.1", 0)
    port = socks[0].getsockname()[1]
    for s in socks:
        s.close()
    again = listen("127.0.0.1", port)  # SO_REUSEADDR: a restart takes the same port at once
    for s in again:
        s.close()
