"""Per-topology-domain counts of the pods on a snapshot's nodes, kept across cycles.

What InterPodAffinity's PreFilter and PreScore sum over every pod of the cluster depends
on a pod only through (a) its namespace and labels, which the incoming pod's terms
select, (b) its own (anti-)affinity terms, which select the incoming pod, and (c) the
values of topology keys on its node. So the index keeps:

- per *label class* (pods with the same namespace and labels), how many of its pods are
  in each domain ``value`` of each topology key asked for so far;
- per *term* of existing pods (equal terms of many pods are one), how many required
  anti-affinity and required affinity occurrences are in each domain of the term's
  topology key, and the signed sum of preferred weights (affinity +, anti-affinity -).

A cycle then costs (label classes + distinct terms + the domains they occupy), not
(pods x nodes). The index follows the snapshot's :class:`PodJournal` (pods assumed,
bound, forgotten, removed). When node labels or the node set changed
(``Snapshot.labels_version``), it compares each row with the node it counted: only the
pods of nodes added, removed or relabelled are counted again, so a node joining or
leaving a large cluster costs (nodes + that node's pods), not every pod. It recounts
everything only when the journal was trimmed past it. Only pods on the snapshot's nodes
count, as in kube-scheduler's snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence

from kubesched.framework.nodeinfo import NodeInfo, PodJournal
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.types import Pod
from kubesched.plugins.inter_pod_affinity.terms import AffinityTerm, PodTerms, WeightedTerm

__all__ = ["AffinityIndex", "Counts", "Domains", "LabelClass", "TermDomains"]

Pair = tuple[str, str]
Counts = dict[Pair, int]
Domains = dict[str, int]
"""Topology value -> count (or weight); no zero entries."""

_MAX_MATCH_MEMO = 4096


def _bump(d: Domains, value: str, n: int) -> None:
    c = d.get(value, 0) + n
    if c:
        d[value] = c
    else:
        del d[value]


class LabelClass:
    """The pods of one namespace with equal labels; ``domains[key][value]`` counts them."""

    __slots__ = ("domains", "labels", "match", "namespace", "size")

    def __init__(self, namespace: str, labels: Mapping[str, str]) -> None:
        self.namespace = namespace
        self.labels = dict(labels)
        self.domains: dict[str, Domains] = {}
        self.size = 0
        self.match: dict[Hashable, bool] = {}
        """Term key -> whether the (namespace-resolved) term selects this class."""

    def matches(self, t: AffinityTerm) -> bool:
        """Whether ``t`` (an incoming pod's term, namespaces resolved) selects these pods."""
        hit = self.match.get(t.key)
        if hit is None:
            if len(self.match) >= _MAX_MATCH_MEMO:
                self.match.clear()
            hit = self.match[t.key] = t.matches_labels(self.namespace, self.labels, None)
        return hit


class TermDomains:
    """One distinct term of existing pods: its occurrences and weights per domain."""

    __slots__ = ("pref", "refs", "req_aff", "req_anti", "term")

    def __init__(self, term: AffinityTerm) -> None:
        self.term = term
        self.req_anti: Domains = {}
        self.req_aff: Domains = {}
        self.pref: Domains = {}
        """Preferred affinity weights minus preferred anti-affinity weights."""
        self.refs = 0
        """Occurrences on pods placed on nodes with the term's topology key."""


_Placed = tuple[LabelClass, Mapping[str, str], PodTerms]


class AffinityIndex:
    """The counts, and the position in a snapshot's journal they are current to."""

    def __init__(self, terms_of: Callable[[Pod], PodTerms]) -> None:
        self._terms_of = terms_of
        self._keys: set[str] = set()
        self._journal: PodJournal | None = None
        self._cursor = 0
        self._labels_version: object = None
        self._clear()

    def _clear(self) -> None:
        self.classes: dict[tuple[str, frozenset[tuple[str, str]]], LabelClass] = {}
        self.terms: dict[Hashable, TermDomains] = {}
        self._placed: dict[str, dict[str, _Placed]] = {}
        """Node name -> pod uid -> what was counted for the pod."""
        self._counted: dict[str, tuple[NodeInfo, Mapping[str, str]]] = {}
        """Node name -> the snapshot row (NodeInfo) and node labels its pods were
        counted from, as of the last :meth:`sync`."""

    @classmethod
    def from_nodes(
        cls, nodes: Iterable[NodeInfo], terms_of: Callable[[Pod], PodTerms]
    ) -> AffinityIndex:
        """A recount over ``nodes`` (those without a node object hold nothing)."""
        idx = cls(terms_of)
        idx._fill(nodes)
        return idx

    def _fill(self, nodes: Iterable[NodeInfo]) -> None:
        for ni in nodes:
            if ni.node is not None:
                self._count_node(ni, ni.node.labels)

    def _count_node(self, ni: NodeInfo, labels: Mapping[str, str]) -> None:
        for p in ni.pods:
            self.add(ni.name, labels, p)
        self._counted[ni.name] = (ni, labels)

    # -- following the snapshot -------------------------------------------------------------
    def sync(self, snap: Snapshot) -> None:
        """Bring the counts to the snapshot's current pods."""
        j = snap.journal
        entries = j.since(self._cursor) if j is self._journal else None
        if entries is None:
            self._clear()
            self._fill(snap.node_infos)
        else:
            recount: set[str] = set()
            if snap.labels_version != self._labels_version:
                recount = self._changed_rows(snap)
            infos = snap.node_infos
            n = len(infos)
            for ni, pod, sign in entries:
                i = ni.index
                node = ni.node
                if node is None or not 0 <= i < n or infos[i] is not ni or ni.name in recount:
                    continue
                if sign > 0:
                    self.add(ni.name, node.labels, pod)
                else:
                    self.remove(ni.name, pod.uid)
            for name in recount:
                self._forget_node(name)
                ni_now = snap.by_name.get(name)
                if ni_now is not None and ni_now.node is not None:
                    self._count_node(ni_now, ni_now.node.labels)
        self._journal = j
        self._cursor = j.end
        self._labels_version = snap.labels_version

    def _changed_rows(self, snap: Snapshot) -> set[str]:
        """Nodes whose pods must be counted again: rows that are new, another NodeInfo or
        relabelled since they were counted, and counted nodes that left the rows. The
        journal's entries cover the rest (the same NodeInfo, the same labels)."""
        changed: set[str] = set()
        by_name = snap.by_name
        for name, (ni, labels) in self._counted.items():
            now = by_name.get(name)
            node = now.node if now is not None else None
            if (
                now is not ni
                or node is None
                or (node.labels is not labels and node.labels != labels)
            ):
                changed.add(name)
        for ni in snap.node_infos:
            if ni.name not in self._counted:
                changed.add(ni.name)
        return changed

    def _forget_node(self, name: str) -> None:
        for uid in list(self._placed.get(name, ())):
            self.remove(name, uid)
        self._counted.pop(name, None)

    # -- maintenance ------------------------------------------------------------------------
    def add(self, node_name: str, labels: Mapping[str, str], pod: Pod) -> None:
        on_node = self._placed.get(node_name)
        if on_node is None:
            on_node = self._placed[node_name] = {}
        elif pod.uid in on_node:
            self.remove(node_name, pod.uid)
        ckey = (pod.namespace, frozenset(pod.labels.items()))
        c = self.classes.get(ckey)
        if c is None:
            c = self.classes[ckey] = LabelClass(pod.namespace, pod.labels)
        terms = self._terms_of(pod)
        on_node[pod.uid] = (c, labels, terms)
        self._account(c, labels, terms, 1)

    def remove(self, node_name: str, uid: str) -> None:
        on_node = self._placed.get(node_name)
        placed = on_node.pop(uid, None) if on_node is not None else None
        if placed is None:
            return
        if not on_node:
            del self._placed[node_name]
        c, labels, terms = placed
        self._account(c, labels, terms, -1)
        if c.size == 0:
            self.classes.pop((c.namespace, frozenset(c.labels.items())), None)

    def _account(
        self, c: LabelClass, labels: Mapping[str, str], terms: PodTerms, sign: int
    ) -> None:
        c.size += sign
        for k in self._keys:
            v = labels.get(k)
            if v is not None:
                _bump(c.domains.setdefault(k, {}), v, sign)
        if terms.required_anti:
            for t in terms.required_anti:
                self._term(t, labels, "req_anti", sign, sign)
        if terms.required_affinity:
            for t in terms.required_affinity:
                self._term(t, labels, "req_aff", sign, sign)
        for w in terms.preferred_affinity:
            self._term(w.term, labels, "pref", w.weight * sign, sign)
        for w in terms.preferred_anti:
            self._term(w.term, labels, "pref", -w.weight * sign, sign)

    def _term(
        self, t: AffinityTerm, labels: Mapping[str, str], kind: str, n: int, sign: int
    ) -> None:
        v = labels.get(t.topology_key)
        if v is None:
            return
        td = self.terms.get(t.key)
        if td is None:
            td = self.terms[t.key] = TermDomains(t)
        d: Domains = getattr(td, kind)
        if n:
            _bump(d, v, n)
        td.refs += sign
        if td.refs == 0:
            del self.terms[t.key]

    def track(self, key: str) -> None:
        """Count label classes per value of ``key`` from now on."""
        if key in self._keys:
            return
        self._keys.add(key)
        for on_node in self._placed.values():
            for c, labels, _ in on_node.values():
                v = labels.get(key)
                if v is not None:
                    _bump(c.domains.setdefault(key, {}), v, 1)

    # -- queries ----------------------------------------------------------------------------
    def has_required_anti(self) -> bool:
        return any(td.req_anti for td in self.terms.values())

    def has_terms(self) -> bool:
        return bool(self.terms)

    def existing_anti_counts(self, pod: Pod, ns_labels: Mapping[str, str]) -> Counts:
        """Existing pods' required anti-affinity terms that select ``pod``, per domain."""
        out: Counts = {}
        for td in self.terms.values():
            if td.req_anti and td.term.matches(pod, ns_labels):
                _add(out, td.term.topology_key, td.req_anti, 1)
        return out

    def affinity_counts(self, terms: Sequence[AffinityTerm]) -> Counts:
        """Pods selected by *all* ``terms``, per domain of each term's key."""
        out: Counts = {}
        if not terms:
            return out
        for t in terms:
            self.track(t.topology_key)
        for c in self.classes.values():
            if all(c.matches(t) for t in terms):
                for t in terms:
                    _add(out, t.topology_key, c.domains.get(t.topology_key), 1)
        return out

    def anti_affinity_counts(self, terms: Sequence[AffinityTerm]) -> Counts:
        """For each term, the pods it selects, per domain of its key (summed)."""
        out: Counts = {}
        for t in terms:
            self.track(t.topology_key)
        for c in self.classes.values():
            for t in terms:
                if c.matches(t):
                    _add(out, t.topology_key, c.domains.get(t.topology_key), 1)
        return out

    def score_counts(
        self,
        pod: Pod,
        ns_labels: Mapping[str, str],
        pref_aff: Sequence[WeightedTerm],
        pref_anti: Sequence[WeightedTerm],
        hard_weight: int,
    ) -> Counts:
        """PreScore's sums: the incoming pod's preferred terms over the pods they select,
        and the existing pods' terms that select the incoming pod."""
        out: Counts = {}
        for w in (*pref_aff, *pref_anti):
            self.track(w.term.topology_key)
        if pref_aff or pref_anti:
            for c in self.classes.values():
                for w in pref_aff:
                    if c.matches(w.term):
                        _add(out, w.term.topology_key, c.domains.get(w.term.topology_key), w.weight)
                for w in pref_anti:
                    if c.matches(w.term):
                        _add(
                            out, w.term.topology_key, c.domains.get(w.term.topology_key), -w.weight
                        )
        for td in self.terms.values():
            if not (td.pref or (hard_weight and td.req_aff)):
                continue
            if td.term.matches(pod, ns_labels):
                tk = td.term.topology_key
                if hard_weight:
                    _add(out, tk, td.req_aff, hard_weight)
                _add(out, tk, td.pref, 1)
        for pair in [p for p, v in out.items() if v == 0]:
            del out[pair]
        return out


def _add(out: Counts, key: str, domains: Domains | None, factor: int) -> None:
    if not domains:
        return
    for v, n in domains.items():
        pair = (key, v)
        out[pair] = out.get(pair, 0) + n * factor
