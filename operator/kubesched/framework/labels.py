"""Label selectors and node selectors, compiled once and matched many times.

Semantics follow apimachinery: a ``LabelSelector`` with no requirements matches
everything, a missing (None) selector matches nothing; ``In``/``NotIn`` with values,
``Exists``/``DoesNotExist`` without. Node selector terms are ORed; requirements in a
term are ANDed; a term with no requirements matches nothing; ``Gt``/``Lt`` compare
integers; ``matchFields`` supports ``metadata.name``.
Errors raise ``ObjectError`` naming the field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kubesched.framework.types import ObjectError

if TYPE_CHECKING:
    from kubesched.framework.types import Node, Pod

__all__ = [
    "EVERYTHING",
    "NOTHING",
    "LabelSelector",
    "NodeSelector",
    "NodeSelectorTerm",
    "RequiredNodeAffinity",
    "Requirement",
    "compile_label_selector",
    "compile_node_selector",
    "compile_requirement",
    "parse_label_selector",
    "required_node_selector",
]

_LABEL_OPS = ("In", "NotIn", "Exists", "DoesNotExist")
_NODE_OPS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


class Requirement:
    __slots__ = ("key", "op", "values")

    def __init__(self, key: str, op: str, values: Sequence[str] = ()) -> None:
        self.key = key
        self.op = op
        self.values = frozenset(values)

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.op
        if op == "In":
            v = labels.get(self.key)
            return v is not None and v in self.values
        if op == "NotIn":
            v = labels.get(self.key)
            return v is None or v not in self.values
        if op == "Exists":
            return self.key in labels
        if op == "DoesNotExist":
            return self.key not in labels
        v = labels.get(self.key)
        if v is None:
            return False
        try:
            n = int(v)
        except ValueError:
            return False
        (bound,) = self.values
        return n > int(bound) if op == "Gt" else n < int(bound)

    def __repr__(self) -> str:
        return f"{self.key} {self.op} {sorted(self.values)}"


class LabelSelector:
    """A compiled ``metav1.LabelSelector``."""

    __slots__ = ("exprs", "match_labels", "nothing")

    def __init__(
        self,
        match_labels: Mapping[str, str] | None = None,
        exprs: Sequence[Requirement] = (),
        *,
        nothing: bool = False,
    ) -> None:
        self.match_labels = dict(match_labels or {})
        self.exprs = tuple(exprs)
        self.nothing = nothing

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        for k, v in self.match_labels.items():
            if labels.get(k) != v:
                return False
        return all(r.matches(labels) for r in self.exprs)

    def is_empty(self) -> bool:
        """Matches everything."""
        return not self.nothing and not self.match_labels and not self.exprs

    def keys(self) -> set[str]:
        return set(self.match_labels) | {r.key for r in self.exprs}


EVERYTHING = LabelSelector()
NOTHING = LabelSelector(nothing=True)


def _list(obj: object, field: str) -> list[object]:
    if obj is None:
        return []
    if not isinstance(obj, list):
        raise ObjectError(f"{field}: expected a list, got {type(obj).__name__}")
    return obj


def compile_requirement(
    d: object, field: str, ops: tuple[str, ...], *, numeric: bool = False
) -> Requirement:
    """A selector requirement (``key``, ``operator`` among ``ops``, ``values``), checked;
    ``ObjectError`` names the first bad part under ``field``."""
    if not isinstance(d, Mapping):
        raise ObjectError(f"{field}: expected an object")
    key = d.get("key")
    if not isinstance(key, str) or not key:
        raise ObjectError(f"{field}.key: required")
    op = d.get("operator")
    if op not in ops:
        raise ObjectError(f"{field}.operator: must be one of {', '.join(ops)}, got {op!r}")
    values = d.get("values") or []
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ObjectError(f"{field}.values: must be a list of strings")
    if op in ("In", "NotIn") and not values:
        raise ObjectError(f"{field}.values: must be non-empty for operator {op}")
    if op in ("Exists", "DoesNotExist") and values:
        raise ObjectError(f"{field}.values: must be empty for operator {op}")
    if op in ("Gt", "Lt"):
        if len(values) != 1:
            raise ObjectError(f"{field}.values: must have exactly one element for operator {op}")
        try:
            int(values[0])
        except ValueError:
            raise ObjectError(f"{field}.values[0]: must be an integer for operator {op}") from None
    return Requirement(key, op, values)


def compile_label_selector(sel: object, field: str = "labelSelector") -> LabelSelector:
    """None -> matches nothing; {} -> matches everything."""
    if sel is None:
        return NOTHING
    if not isinstance(sel, Mapping):
        raise ObjectError(f"{field}: expected an object")
    ml = sel.get("matchLabels") or {}
    if not isinstance(ml, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in ml.items()
    ):
        raise ObjectError(f"{field}.matchLabels: keys and values must be strings")
    exprs = [
        compile_requirement(e, f"{field}.matchExpressions[{i}]", _LABEL_OPS)
        for i, e in enumerate(_list(sel.get("matchExpressions"), f"{field}.matchExpressions"))
    ]
    return LabelSelector(ml, exprs)


class NodeSelectorTerm:
    __slots__ = ("fields", "labels")

    def __init__(self, labels: Sequence[Requirement], fields: Sequence[Requirement]) -> None:
        self.labels = tuple(labels)
        self.fields = tuple(fields)

    def matches(self, node_labels: Mapping[str, str], node_name: str) -> bool:
        if not self.labels and not self.fields:
            return False
        if not all(r.matches(node_labels) for r in self.labels):
            return False
        if self.fields:
            f = {"metadata.name": node_name}
            return all(r.matches(f) for r in self.fields)
        return True


def compile_node_selector_term(d: object, field: str) -> NodeSelectorTerm:
    if not isinstance(d, Mapping):
        raise ObjectError(f"{field}: expected an object")
    labels = [
        compile_requirement(e, f"{field}.matchExpressions[{i}]", _NODE_OPS)
        for i, e in enumerate(_list(d.get("matchExpressions"), f"{field}.matchExpressions"))
    ]
    fields = []
    for i, e in enumerate(_list(d.get("matchFields"), f"{field}.matchFields")):
        r = compile_requirement(e, f"{field}.matchFields[{i}]", ("In", "NotIn"))
        if r.key != "metadata.name":
            raise ObjectError(f"{field}.matchFields[{i}].key: only metadata.name is supported")
        fields.append(r)
    return NodeSelectorTerm(labels, fields)


class NodeSelector:
    """Required node affinity: terms are ORed."""

    __slots__ = ("terms",)

    def __init__(self, terms: Sequence[NodeSelectorTerm]) -> None:
        self.terms = tuple(terms)

    def matches(self, node_labels: Mapping[str, str], node_name: str) -> bool:
        return any(t.matches(node_labels, node_name) for t in self.terms)


def compile_node_selector(d: object, field: str) -> NodeSelector:
    if not isinstance(d, Mapping):
        raise ObjectError(f"{field}: expected an object")
    terms = d.get("nodeSelectorTerms")
    if not isinstance(terms, list):
        raise ObjectError(f"{field}.nodeSelectorTerms: required")
    return NodeSelector(
        [
            compile_node_selector_term(t, f"{field}.nodeSelectorTerms[{i}]")
            for i, t in enumerate(terms)
        ]
    )


REQUIRED_FIELD = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"


def required_node_selector(pod: Pod) -> Any:
    """The pod's required node affinity as written (a NodeSelector object), or None."""
    na = pod.affinity.get("nodeAffinity")
    if not isinstance(na, Mapping):
        return None
    return na.get("requiredDuringSchedulingIgnoredDuringExecution")


class RequiredNodeAffinity:
    """A pod's ``nodeSelector`` AND its required node affinity (kube's
    GetRequiredNodeAffinity), the one rule NodeAffinity's Filter, PodTopologySpread's
    ``nodeAffinityPolicy: Honor`` and a DaemonSet's node choice share. The terms are ORed;
    a term that does not parse matches no node and the others still count (kube drops the
    term's error), unless built ``strict``; a term with no requirements matches nothing."""

    __slots__ = ("selector", "terms")

    def __init__(
        self, selector: Mapping[str, str], terms: Sequence[NodeSelectorTerm] | None
    ) -> None:
        self.selector = tuple(selector.items())
        self.terms = None if terms is None else tuple(terms)

    @classmethod
    def from_node_selector(cls, raw: Any, field: str, *, strict: bool) -> RequiredNodeAffinity:
        """From a ``NodeSelector`` object (``{nodeSelectorTerms: [...]}``); ``strict``
        raises ObjectError on what does not parse."""
        raw_terms = raw.get("nodeSelectorTerms") if isinstance(raw, Mapping) else None
        if strict and not isinstance(raw_terms, list):
            raise ObjectError(f"{field}.nodeSelectorTerms: required")
        terms = []
        for i, t in enumerate(raw_terms or ()):
            try:
                terms.append(compile_node_selector_term(t, f"{field}.nodeSelectorTerms[{i}]"))
            except ObjectError:
                if strict:
                    raise
        return cls({}, terms)

    @classmethod
    def of_pod(
        cls, pod: Pod, *, strict: bool = False, field: str = REQUIRED_FIELD
    ) -> RequiredNodeAffinity:
        required = required_node_selector(pod)
        if required is None:
            return cls(pod.node_selector, None)
        return cls(pod.node_selector, cls.from_node_selector(required, field, strict=strict).terms)

    @property
    def empty(self) -> bool:
        """Neither a node selector nor required terms: every node matches."""
        return not self.selector and self.terms is None

    def matches(self, labels: Mapping[str, str], name: str) -> bool:
        for k, v in self.selector:
            if labels.get(k) != v:
                return False
        if self.terms is None:
            return True
        return any(t.matches(labels, name) for t in self.terms)

    def match_node(self, node: Node) -> bool:
        return self.matches(node.labels, node.name)


# -- the string form (kubectl -l, ?labelSelector=, --profile-selector) ------------------------

_NAME = r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_KEY = re.compile(rf"(?:[a-z0-9](?:[-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_NAME}")
_VALUE = re.compile(rf"(?:{_NAME})?")
_TERM = re.compile(
    r"\s*(?:(?P<not>!)\s*(?P<absent>[^\s=!<>(),]+)"
    r"|(?P<key>[^\s=!<>(),]+)\s*(?:"
    r"(?P<eq>==|=|!=)\s*(?P<value>[^\s=!<>(),]*)"
    r"|(?P<cmp>[<>])\s*(?P<bound>[^\s=!<>(),]+)"
    r"|\s(?P<set>in|notin)\s*\((?P<values>[^()]*)\)"
    r")?)\s*(?:,|$)"
)


def parse_label_selector(text: str) -> LabelSelector:
    """apimachinery's string syntax (``labels.Parse``): comma-separated requirements,
    ANDed: ``key``, ``!key``, ``key=value`` (or ``==``), ``key!=value`` (also true when
    the label is missing), ``key in (a,b)``, ``key notin (a,b)``, ``key>1``, ``key<1``.
    An empty string matches everything. Raises ``ValueError`` naming the bad part."""
    reqs: list[Requirement] = []
    pos, text = 0, text.strip()
    while pos < len(text):
        m = _TERM.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"label selector {text!r}: cannot parse at {text[pos:]!r}")
        pos = m.end()
        if pos == len(text) and text.endswith(","):
            raise ValueError(f"label selector {text!r}: a requirement is missing after ','")
        key = m["absent"] or m["key"]
        if not _KEY.fullmatch(key):
            raise ValueError(f"label selector {text!r}: {key!r} is not a valid label key")
        if m["absent"]:
            reqs.append(Requirement(key, "DoesNotExist"))
        elif m["eq"]:
            value = m["value"]
            if not _VALUE.fullmatch(value):
                raise ValueError(f"label selector {text!r}: {value!r} is not a valid label value")
            reqs.append(Requirement(key, "NotIn" if m["eq"] == "!=" else "In", [value]))
        elif m["cmp"]:
            if not m["bound"].isdigit():
                raise ValueError(f"label selector {text!r}: {m['bound']!r} is not an integer")
            reqs.append(Requirement(key, "Gt" if m["cmp"] == ">" else "Lt", [m["bound"]]))
        elif m["set"]:
            values = [v.strip() for v in m["values"].split(",")]
            if values == [""]:
                raise ValueError(f"label selector {text!r}: {m['set']} () needs values")
            bad = [v for v in values if not _VALUE.fullmatch(v)]
            if bad:
                raise ValueError(f"label selector {text!r}: {bad[0]!r} is not a valid label value")
            reqs.append(Requirement(key, "In" if m["set"] == "in" else "NotIn", values))
        else:
            reqs.append(Requirement(key, "Exists"))
    return LabelSelector(exprs=reqs)
