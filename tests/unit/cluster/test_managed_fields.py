"""managedFields cut out of a body before decoding: what decodes is what the API server
sent, less managedFields, whatever the objects hold; a body written in another key order
is decoded whole."""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.cluster.managed_fields import without_managed_fields

JSON = dict[str, Any]

# Strings as users write them, with the characters a cut could trip on.
text = st.text(alphabet=st.sampled_from('ab:/."{}[],\\ \n]é'), max_size=12)


def field_set(depth: int) -> st.SearchStrategy[JSON]:
    """A fieldsV1 tree: keys with a path prefix, objects all the way down."""
    key = st.one_of(
        st.just("."),
        st.builds(lambda p, k: p + k, st.sampled_from(["f:", "k:", "v:", "i:"]), text),
        st.builds(lambda v: "k:" + json.dumps({"name": v}), text),
    )
    leaf: st.SearchStrategy[JSON] = st.just({})
    if depth == 0:
        return leaf
    return st.dictionaries(key, st.one_of(leaf, field_set(depth - 1)), max_size=3)


managed_entry = st.fixed_dictionaries(
    {
        "manager": text,
        "operation": st.sampled_from(["Update", "Apply"]),
        "apiVersion": st.just("v1"),
        "time": st.just("2026-11-29T02:37:28Z"),
        "fieldsType": st.just("FieldsV1"),
        "fieldsV1": field_set(3),
    },
    optional={"subresource": st.sampled_from(["status", "binding"])},
)


@st.composite
def api_object(draw: st.DrawFn, kind: str = "Pod") -> JSON:
    """A Pod or Node as kube-apiserver writes it: ObjectMeta's fields in struct order,
    managedFields last, then spec and status."""
    meta: JSON = {"name": draw(text.filter(bool)), "uid": draw(text)}
    if draw(st.booleans()):
        meta["namespace"] = draw(text)
    meta["resourceVersion"] = "7"
    for field in ("labels", "annotations"):
        if draw(st.booleans()):
            meta[field] = draw(st.dictionaries(text, text, max_size=3))
    if draw(st.booleans()):
        meta["finalizers"] = draw(st.lists(text, max_size=2))
    if draw(st.booleans()):
        meta["managedFields"] = draw(st.lists(managed_entry, min_size=1, max_size=3))
    spec = {"containers": [{"name": draw(text), "args": draw(st.lists(text, max_size=3))}]}
    return {
        "kind": kind,
        "apiVersion": "v1",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def comma_ended(value: Any) -> bool:
    if isinstance(value, str):
        return value.endswith(",")
    if isinstance(value, dict):
        return any(comma_ended(k) or comma_ended(v) for k, v in value.items())
    if isinstance(value, list):
        return any(comma_ended(v) for v in value)
    return False


def decoded_without(body: bytes) -> Any:
    """What the informers keep: the decode, managedFields dropped (by
    :func:`kubesched.cluster.managed_fields.trim` where the body was left whole)."""
    doc = orjson.loads(body)
    objects = doc["items"] if "items" in doc else [doc.get("object", doc)]
    for obj in objects:
        obj["metadata"].pop("managedFields", None)
    return doc


@settings(max_examples=300, deadline=None)
@given(st.lists(api_object(), max_size=4))
def test_a_list_decodes_as_the_server_sent_it_less_managed_fields(items: list[JSON]) -> None:
    body = orjson.dumps({"kind": "PodList", "metadata": {"resourceVersion": "9"}, "items": items})
    cut = without_managed_fields(body)
    assert decoded_without(cut) == decoded_without(body)
    if any("managedFields" in i["metadata"] for i in items):
        # left whole only when a string in managedFields ends in a comma (a bare `,"`)
        assert (cut == body) == any(
            comma_ended(i["metadata"].get("managedFields", [])) for i in items
        )


@settings(max_examples=200, deadline=None)
@given(api_object("Node"), st.sampled_from(["ADDED", "MODIFIED", "DELETED"]))
def test_a_watch_event_decodes_as_sent_less_managed_fields(obj: JSON, kind: str) -> None:
    body = orjson.dumps({"type": kind, "object": obj})
    assert decoded_without(without_managed_fields(body)) == decoded_without(body)


def test_kube_apiservers_own_bodies_are_cut() -> None:
    """The shape of every pod the API server sends (its managers, fieldsV1 paths)."""
    pod = {
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "labels": {"app": "x"},
            "managedFields": [
                {
                    "manager": "kube-scheduler",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": "2026-11-29T02:37:28Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {
                        "f:status": {"f:conditions": {'k:{"type":"PodScheduled"}': {".": {}}}}
                    },
                    "subresource": "status",
                }
            ],
        },
        "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80}]}]},
    }
    body = orjson.dumps({"type": "MODIFIED", "object": pod})
    cut = without_managed_fields(body)
    assert b"managedFields" not in cut
    assert orjson.loads(cut) == decoded_without(body)


@settings(max_examples=200, deadline=None)
@given(api_object())
def test_sorted_keys_are_decoded_whole(obj: JSON) -> None:
    """A custom resource's keys come sorted: managedFields is followed by other ObjectMeta
    fields (name, namespace, ...), and the body is left as it is."""
    obj["metadata"].setdefault("managedFields", [{"manager": "m", "fieldsV1": {}}])
    body = orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)
    assert without_managed_fields(body) == body


def test_a_manager_named_like_the_markers_cannot_move_the_cut() -> None:
    obj = {
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "managedFields": [{"manager": 'x"]},"spec":{"nodeName":"evil"', "fieldsV1": {}}],
        },
        "spec": {"schedulerName": "kubesched"},
    }
    body = orjson.dumps(obj)
    assert orjson.loads(without_managed_fields(body)) == {
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"schedulerName": "kubesched"},
    }


def test_a_field_after_managed_fields_keeps_the_body_whole() -> None:
    """A later ObjectMeta field written after managedFields (not kube-apiserver's order
    today) is never cut away with it."""
    body = (
        b'{"metadata":{"name":"p","managedFields":[{"manager":"m","fieldsV1":{}}],'
        b'"ownerReferences":[{"name":"o"}]},"spec":{}}'
    )
    assert without_managed_fields(body) == body
