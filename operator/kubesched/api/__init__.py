"""kubesched.api"""

__all__ = ["field_docstrings"]

_FIELD_DOCSTRINGS = [True]


def field_docstrings(read: bool | None = None) -> bool:
    """Whether the API and plugin-args models read their fields' docstrings (pydantic's
    ``use_attribute_docstrings``: a field's docstring becomes its description in the CRD
    schemas :mod:`kubesched.api.crdgen` writes). Decided when a model class is built:
    reading them parses the source of every model's module, about 15% of what ``kubesched
    run`` imports, and nothing in a running scheduler uses a description, so the
    ``kubesched run`` command turns it off (``read``) before importing them."""
    if read is not None:
        _FIELD_DOCSTRINGS[0] = read
    return _FIELD_DOCSTRINGS[0]
