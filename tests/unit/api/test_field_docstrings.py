"""Field docstrings are the CRD schemas' descriptions; kubesched run builds its models
without reading them (a process-wide switch, decided when a model class is built)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from kubesched.api import field_docstrings
from kubesched.api.podgroup import PodGroupSpec


def model() -> type[BaseModel]:
    class Args(BaseModel):
        model_config = ConfigDict(use_attribute_docstrings=field_docstrings())

        size: int = 0
        """How many."""

    return Args


def test_descriptions_are_read_unless_switched_off() -> None:
    assert field_docstrings()
    assert model().model_fields["size"].description == "How many."
    try:
        field_docstrings(False)
        assert model().model_fields["size"].description is None
    finally:
        field_docstrings(True)
    # the models this process built describe their fields (crdgen writes them out)
    assert PodGroupSpec.model_fields["min_member"].description
