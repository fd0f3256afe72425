"""Semantic versions as the Kubernetes CEL semver library reads them (semver 2.0.0,
strict like blang/semver's ``Parse``; ``normalize`` as ``semver(s, true)`` does)."""

from __future__ import annotations

import re

__all__ = ["SemverError", "compare", "normalize_and_parse", "parse"]

_IDENT = re.compile(r"^[0-9A-Za-z-]+$")

Version = tuple[int, int, int, tuple[int | str, ...]]


class SemverError(ValueError):
    pass


def parse(s: str) -> Version:
    if not s:
        raise SemverError("Version string empty")
    main, _, build = s.partition("+")
    if "+" in s and (not build or not all(_IDENT.match(p) for p in build.split("."))):
        raise SemverError(f"Invalid character(s) found in build meta data {build!r}")
    core, dash, pre = main.partition("-")
    parts = core.split(".")
    if len(parts) != 3:
        raise SemverError("No Major.Minor.Patch elements found")
    nums = []
    for what, p in zip(("major", "minor", "patch"), parts, strict=True):
        if not p.isdigit() or not p.isascii():
            raise SemverError(f"Invalid character(s) found in {what} number {p!r}")
        if len(p) > 1 and p[0] == "0":
            raise SemverError(f"{what.capitalize()} number must not contain leading zeroes {p!r}")
        nums.append(int(p))
    ids: list[int | str] = []
    if dash:
        for p in pre.split("."):
            if not p or not _IDENT.match(p):
                raise SemverError(f"Invalid character(s) found in prerelease {p!r}")
            if p.isdigit():
                if len(p) > 1 and p[0] == "0":
                    raise SemverError(
                        f"Version prerelease number must not contain leading zeroes {p!r}"
                    )
                ids.append(int(p))
            else:
                ids.append(p)
    return nums[0], nums[1], nums[2], tuple(ids)


def normalize_and_parse(s: str) -> Version:
    s = s.removeprefix("v")
    parts = s.split(".", 2)
    for i, p in enumerate(parts):
        if len(p) > 1:
            p = p.lstrip("0")
            if not p or not p[0].isdigit():
                p = "0" + p
            parts[i] = p
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise SemverError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return parse(".".join(parts))


def _cmp_id(a: int | str, b: int | str) -> int:
    if isinstance(a, int) and isinstance(b, int):
        return (a > b) - (a < b)
    if isinstance(a, int):
        return -1
    if isinstance(b, int):
        return 1
    return (a > b) - (a < b)


def compare(a: Version, b: Version) -> int:
    """Precedence per semver 2.0.0 (build metadata ignored)."""
    for x, y in zip(a[:3], b[:3], strict=True):
        if x != y:
            return 1 if x > y else -1
    pa, pb = a[3], b[3]
    if not pa or not pb:
        return (not pa) - (not pb)
    for xi, yi in zip(pa, pb, strict=False):
        c = _cmp_id(xi, yi)
        if c:
            return c
    return (len(pa) > len(pb)) - (len(pa) < len(pb))


def format_version(v: Version) -> str:
    core = f"{v[0]}.{v[1]}.{v[2]}"
    return core + ("-" + ".".join(str(p) for p in v[3]) if v[3] else "")
