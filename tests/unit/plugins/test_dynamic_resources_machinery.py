"""The DRA machinery DynamicResources imports on first use (``machinery``): every name
the plugin is typed against is handed out at run time, the very object of its source
module. A name typed but not handed out passes mypy and fails on the first pod with a
claim; this catches it without such a pod."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from kubesched.plugins.dynamic_resources import machinery


def _typed_names() -> dict[str, tuple[str, ...]]:
    """The ``if TYPE_CHECKING:`` imports of machinery.py, by source module."""
    tree = ast.parse(Path(machinery.__file__).read_text())
    out: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.module is not None
                out.setdefault(imp.module, []).extend(a.name for a in imp.names)
    return {module: tuple(names) for module, names in out.items()}


def test_every_typed_name_is_handed_out_from_its_module() -> None:
    assert _typed_names() == machinery.SOURCES
    for source, names in machinery.SOURCES.items():
        module = importlib.import_module(source)
        for name in names:
            assert getattr(machinery, name) is getattr(module, name), (source, name)
