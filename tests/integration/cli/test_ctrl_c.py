"""Ctrl-C ends a command with exit status 130 and no traceback: while its modules load,
while it simulates, while it waits for a server."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def listening() -> Iterator[int]:
    """A port that accepts connections and never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield s.getsockname()[1]


def _inside_main(pid: int, within: float = 30.0) -> None:
    """Until ``pid`` runs kubesched's own code: PyYAML's C loader is mapped (Linux:
    /proc/PID/maps), which every command loads inside ``main``, whose Ctrl-C is exit 130
    (one during its imports once they are done: ``ctrl_c_deferred``). Earlier, a Ctrl-C
    is Python's own, as for any Python program: during the interpreter's start or runpy's
    import of the package (exit -2; on a loaded machine that window can pass half a
    second, seen in CI). Elsewhere: no wait."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z":
                return  # it ended already
            maps = Path(f"/proc/{pid}/maps").read_text()
        except OSError:
            # gone (reaped), or its maps unreadable for a moment while it execs the
            # second interpreter: the likely cause of one exit -2 seen on 2026-12-05,
            # a Ctrl-C sent during that interpreter's start
            if not Path(f"/proc/{pid}").exists():
                return
            maps = ""
        if "/_yaml." in maps:
            return
        time.sleep(0.01)


_AS_FROM_A_TERMINAL = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, '-m', 'kubesched', *sys.argv[1:]])"
)
"""``kubesched ARGV`` with SIGINT's default disposition, as a terminal starts it: a test
run started in the background by a shell without job control (``cmd &`` in a script, no
``timeout`` in between) has SIGINT ignored, which its children inherit, and Python then
installs no KeyboardInterrupt handler (seen: both tests below failing in a run launched
so, passing in the foreground)."""


def _interrupt(argv: list[str], wait: float) -> tuple[int, str, str, float]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _AS_FROM_A_TERMINAL, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _inside_main(proc.pid)
    time.sleep(wait)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    return proc.returncode, out, err, time.monotonic() - sent


_CTRL_C_WHILE_IMPORTING = """
import os, signal, sys
import kubesched.cli as cli
real = cli._parser
def parser(*args):
    os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C as the command's modules load
    made = real(*args)
    print("imported", flush=True)
    return made
cli._parser = parser
sys.exit(cli.main(["version"]))
"""


def test_a_ctrl_c_while_the_modules_load_stops_the_command_once_they_are_loaded() -> None:
    # raised inside an import, a KeyboardInterrupt can be lost there (explain --server
    # then waited for its answer) or become another error: it waits for their end
    done = subprocess.run(
        [sys.executable, "-c", _CTRL_C_WHILE_IMPORTING],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout) == (130, "imported\n"), done.stderr
    assert "Traceback" not in done.stderr


_DEFERRED = """
import os, signal
from kubesched.cli.common import ctrl_c_deferred
try:
    with ctrl_c_deferred():
        os.kill(os.getpid(), signal.SIGINT)
        print("the block ran on", flush=True)
    print("not reached", flush=True)
except KeyboardInterrupt:
    print("interrupted as it ended", flush=True)
try:
    os.kill(os.getpid(), signal.SIGINT)
    print("not reached either", flush=True)
except KeyboardInterrupt:
    print("interrupted at once after it", flush=True)
"""


def test_ctrl_c_deferred_raises_as_the_block_ends_and_only_for_the_block() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _DEFERRED], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.splitlines() == [
        "the block ran on",
        "interrupted as it ended",
        "interrupted at once after it",
    ], done.stderr


@pytest.mark.timeout(90)
def test_ctrl_c_stops_a_long_simulation() -> None:
    argv = ["simulate", "--workload", "SchedulingBasic", "--nodes", "2000", "--pods", "30000"]
    code, out, err, took = _interrupt(argv, wait=6)
    assert (code, out) == (130, "")
    assert "Traceback" not in err
    assert took < 15


@pytest.mark.timeout(90)
def test_ctrl_c_stops_a_wait_for_a_server(listening: int) -> None:
    argv = ["explain", "ns/p", "--server", f"http://127.0.0.1:{listening}"]
    for wait in (0.0, 5):  # while importing, and while waiting for the answer
        code, out, err, took = _interrupt(argv, wait)
        assert (code, out) == (130, "")
        assert "Traceback" not in err
        assert took < 15
