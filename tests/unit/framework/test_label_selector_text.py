"""The string form of a label selector (``kubectl -l``, ``?labelSelector=``,
``--profile-selector``): what it matches, and the refusals a user sees."""

from __future__ import annotations

import pytest

from kubesched.framework.labels import parse_label_selector

TEAM_A = {"kubesched.dev/release": "team-a"}
TEAM_B = {"kubesched.dev/release": "team-b", "tier": "gpu"}
NONE: dict[str, str] = {}

MATCHES = {
    # selector: (matches TEAM_A, TEAM_B, NONE)
    "": (True, True, True),
    "kubesched.dev/release=team-a": (True, False, False),
    "kubesched.dev/release == team-a": (True, False, False),
    "kubesched.dev/release!=team-a": (False, True, True),
    "kubesched.dev/release": (True, True, False),
    "!kubesched.dev/release": (False, False, True),
    "kubesched.dev/release in (team-a, team-c)": (True, False, False),
    "kubesched.dev/release notin (team-a)": (False, True, True),
    "kubesched.dev/release,tier=gpu": (False, True, False),
}


@pytest.mark.parametrize(("text", "expected"), MATCHES.items(), ids=list(MATCHES))
def test_matches(text: str, expected: tuple[bool, bool, bool]) -> None:
    sel = parse_label_selector(text)
    assert tuple(sel.matches(labels) for labels in (TEAM_A, TEAM_B, NONE)) == expected


def test_numeric_comparisons() -> None:
    sel = parse_label_selector("gen>2,gen<10")
    assert [sel.matches({"gen": g}) for g in ("2", "3", "10", "x")] == [False, True, False, False]


BAD = {
    "no-key": ("=b", "cannot parse"),
    "space-in-value": ("a=b c", "cannot parse"),
    "bad-key": ("Bad_Key/x=y", "'Bad_Key/x' is not a valid label key"),
    "bad-value": ("a=-b", "'-b' is not a valid label value"),
    "long-value": ("a=" + "v" * 64, "is not a valid label value"),
    "empty-set": ("a in ()", "needs values"),
    "open-set": ("a in (x", "cannot parse"),
    "trailing-comma": ("a=b,", "a requirement is missing"),
    "not-a-number": ("a>b", "'b' is not an integer"),
}


@pytest.mark.parametrize(("text", "message"), BAD.values(), ids=list(BAD))
def test_refused_with_the_bad_part_named(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_label_selector(text)
