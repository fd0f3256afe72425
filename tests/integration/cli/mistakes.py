"""What a user's mistake on the command line must look like: one line
``kubesched: error: ...`` naming the problem, exit status 2, nothing on stdout, never a
traceback; in the test's process, or in a process of its own as a user meets it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kubesched.cli import main


def fill(text: str, files: Path, closed_port: int) -> str:
    return text.replace("{tmp}", str(files)).replace("{closed}", str(closed_port))


def the_one_line(code: int, out: str, err: str) -> str:
    assert (code, out) == (2, ""), err
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("kubesched: error: "), err
    return lines[0]


def in_process(
    argv: list[str],
    env: dict[str, str],
    files: Path,
    closed_port: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> str:
    """``main(argv)`` with ``env`` set: its one line, ``{tmp}`` and ``{closed}`` filled."""
    for k, v in env.items():
        monkeypatch.setenv(k, fill(v, files, closed_port))
    code = main([fill(a, files, closed_port) for a in argv])
    out, err = capsys.readouterr()
    return the_one_line(code, out, err)


def in_a_process(
    argv: list[str],
    env: dict[str, str],
    files: Path,
    closed_port: int,
    monkeypatch: pytest.MonkeyPatch,
) -> str:
    """``python -m kubesched ARGV``: as ``kubesched run`` meets it, its early listing
    importing in another thread while the settings are refused and nothing else imported
    yet (in-process, the test runner has imported everything)."""
    for k, v in env.items():
        monkeypatch.setenv(k, fill(v, files, closed_port))
    done = subprocess.run(
        [sys.executable, "-m", "kubesched", *(fill(a, files, closed_port) for a in argv)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return the_one_line(done.returncode, done.stdout, done.stderr)
