"""Loads kubernetes_asyncio's generated models and API classes on first use, not on import.

``import kubernetes_asyncio`` (or anything under it, such as its kubeconfig loader, or
Kopf, which imports ``kubernetes_asyncio.client.V1ObjectMeta`` when the package is
installed) executes ``kubernetes_asyncio/__init__.py``, ``client/__init__.py``,
``client/api/__init__.py`` and ``client/models/__init__.py``, which import every API
class and all ~770 generated model modules: about 50 MiB of resident memory in every
``kubesched run`` process, for classes it never touches (kubesched decodes pods and
nodes itself, see ``kubesched.cluster.informer``, and writes raw JSON).

:func:`install` registers those four packages in ``sys.modules`` *without* running their
``__init__`` bodies. Each gets a module ``__getattr__`` (PEP 562) that reads the names
the real ``__init__`` would have bound (``from X import Y as Z``, ``import X as Z``,
literal assignments such as ``__version__`` and ``__all__``) from its source with
:mod:`ast`, and imports only the module that defines the name asked for, the first
time it is asked for. Everything else is the real package: its ``__path__``,
``__file__`` and ``__spec__``, its submodules, its code. ``from
kubernetes_asyncio.client import V1Lease`` still works and loads ``v1_lease.py`` alone;
``ApiClient`` still deserializes responses (it looks models up with ``getattr`` on
``kubernetes_asyncio.client.models``).

Fail-safe: if an ``__init__`` contains anything but docstrings, imports and literal
assignments (a future release changed its shape), that package's real ``__init__`` is
executed in full on first use, exactly as a plain import would have. :func:`install`
does nothing if kubernetes_asyncio is already imported or not installed.

It is installed by ``kubesched/__init__.py``, so every kubesched process (``run``,
``bench``, the tests) gets it before Kopf or kubesched imports the client.
"""

from __future__ import annotations

import ast
import importlib
import importlib.machinery
import importlib.util
import re
import sys
import threading
import types
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "CALLED_LATER",
    "DEFERRED",
    "LAZY_PACKAGES",
    "WITHOUT_AIOHTTP",
    "defer",
    "defer_calls",
    "install",
    "loaded_models",
]

LAZY_PACKAGES = (
    "kubernetes_asyncio",
    "kubernetes_asyncio.client",
    "kubernetes_asyncio.client.api",
    "kubernetes_asyncio.client.models",
)
"""Parents before children: each child is found through its (already lazy) parent."""

_MODELS = "kubernetes_asyncio.client.models."

Binding = tuple[str, str | None]
"""Where a name comes from: (module, attribute), or (module, None) for the module itself."""


def loaded_models() -> list[str]:
    """The generated model modules imported so far in this process."""
    return sorted(name for name in sys.modules if name.startswith(_MODELS))


def _read_init(origin: str) -> tuple[dict[str, Binding], dict[str, Any]] | None:
    """The names an ``__init__.py`` binds, or None if it does more than import and assign
    literals (then it must run for real). Read line by line when every line has one of
    the plain shapes the generated ``__init__`` files are made of (:func:`_scan`: about 3
    ms for ``client/__init__.py``'s 1700 lines, against 11 for parsing it);
    parsed with :mod:`ast` otherwise, which then decides."""
    data = Path(origin).read_bytes()
    try:
        source = data.decode("utf-8")
    except UnicodeDecodeError:  # another encoding, declared: the parser reads it
        return _parse(data, origin)
    return _scan(source) or _parse(source, origin)


_FROM = re.compile(r"from ([A-Za-z_][\w.]*) import ([A-Za-z_]\w*)(?: as ([A-Za-z_]\w*))?")
_IMPORT = re.compile(r"import ([A-Za-z_][\w.]*) as ([A-Za-z_]\w*)")
_ASSIGN = re.compile(r"([A-Za-z_]\w*) = (\S.*)")
_ITEM = re.compile(r"\s+\"([^\"\\]*)\",?|\s+'([^'\\]*)',?")


def _scan(source: str) -> tuple[dict[str, Binding], dict[str, Any]] | None:
    """:func:`_parse`'s answer for a source each of whose lines is blank, a comment, part
    of a triple-quoted docstring, ``from a.b import C [as D]``, ``import a.b as c``,
    ``NAME = <a literal on one line>`` or part of ``NAME = [`` (a plain string a line)
    ``]``; None for anything else (not an answer: the source is parsed then)."""
    bindings: dict[str, Binding] = {}
    constants: dict[str, Any] = {}
    quote = ""  # the open docstring's quotes
    items: list[str] | None = None  # the open list's strings
    for line in source.splitlines():
        if quote:
            if quote in line:
                if not line.rstrip().endswith(quote) or line.count(quote) != 1:
                    return None
                quote = ""
            continue
        text = line.rstrip()
        if items is not None:
            if text == "]":
                items = None
            elif m := _ITEM.fullmatch(text):
                items.append(m[1] if m[1] is not None else m[2])
            else:
                return None
            continue
        if not text or text.startswith("#"):
            continue
        if text.startswith(('"""', "'''")):
            quote = text[:3]
            if len(text) >= 6 and text.endswith(quote) and text.count(quote) == 2:
                quote = ""  # a docstring on one line
            elif text.count(quote) != 1:
                return None
            continue
        if m := _FROM.fullmatch(text):
            if m[1] != "__future__":
                bindings[m[3] or m[2]] = (m[1], m[2])
        elif m := _IMPORT.fullmatch(text):
            bindings[m[2]] = (m[1], None)
        elif m := _ASSIGN.fullmatch(text):
            if m[2] == "[":
                constants[m[1]] = items = []
                continue
            try:
                constants[m[1]] = ast.literal_eval(m[2])
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                return None
        else:
            return None
    return None if quote or items is not None else (bindings, constants)


def _parse(source: str | bytes, origin: str) -> tuple[dict[str, Binding], dict[str, Any]] | None:
    """:func:`_read_init` with the source parsed: None if it does more than import and
    assign literals."""
    tree = ast.parse(source, filename=origin)
    bindings: dict[str, Binding] = {}
    constants: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # docstring
        if isinstance(node, ast.ImportFrom):
            if node.module == "__future__":
                continue
            if node.level or node.module is None:
                return None
            for alias in node.names:
                if alias.name == "*":
                    return None
                bindings[alias.asname or alias.name] = (node.module, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname is None:
                    return None
                bindings[alias.asname] = (alias.name, None)
        elif (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            try:
                constants[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                return None
        else:
            return None
    return bindings, constants


class _LazyInit:
    """A lazy package's ``__getattr__``: resolves one name at a time, on first access."""

    def __init__(self, module: types.ModuleType, spec: importlib.machinery.ModuleSpec) -> None:
        self._module = module
        self._spec = spec
        self._bindings: dict[str, Binding] | None = None
        self._lock = threading.RLock()

    def _table(self) -> dict[str, Binding]:
        with self._lock:
            if self._bindings is None:
                assert self._spec.origin is not None
                read = _read_init(self._spec.origin)
                if read is None:
                    # not the shape this module understands: run the real __init__
                    del self._module.__dict__["__getattr__"]
                    assert self._spec.loader is not None
                    self._spec.loader.exec_module(self._module)
                    self._bindings = {}
                else:
                    self._bindings, constants = read
                    for name, value in constants.items():
                        self._module.__dict__.setdefault(name, value)
            return self._bindings

    def names(self) -> list[str]:
        """``dir(package)``: what the real ``__init__`` would have bound, loaded or not."""
        return sorted(set(self._table()) | set(self._module.__dict__))

    def __call__(self, name: str) -> Any:
        table = self._table()
        if name in self._module.__dict__:
            return self._module.__dict__[name]
        binding = table.get(name)
        if binding is None:
            raise AttributeError(f"module {self._module.__name__!r} has no attribute {name!r}")
        source, attribute = binding
        target = importlib.import_module(source)
        value = target if attribute is None else getattr(target, attribute)
        setattr(self._module, name, value)
        return value


DEFERRED = ("urllib3",)
"""Imported by kubernetes_asyncio's ``Configuration`` for one function (HTTP basic auth,
which kubesched never uses) and otherwise unused: about a tenth of ``kubesched run``'s
imports on the way to its first bind. Loaded (as a whole) on first attribute use."""


def defer(names: tuple[str, ...] = DEFERRED) -> list[str]:
    """Register each of ``names`` as a module whose code runs the first time one of its
    attributes is used (a PEP 562 ``__getattr__``, as the lazy packages above; the
    standard library's ``LazyLoader`` loads on ``import`` itself in Python 3.11); returns
    those deferred (one already imported, or not installed, is left alone)."""
    deferred: list[str] = []
    for name in names:
        if name in sys.modules:
            continue
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            continue
        _register(name, spec)
        deferred.append(name)
    return deferred


def _register(
    name: str, spec: importlib.machinery.ModuleSpec, called_later: tuple[str, ...] = ()
) -> None:
    """Put ``name`` in ``sys.modules`` as a module of ``spec`` whose code runs at the first
    use of an attribute (:class:`_Deferred`), each of ``called_later`` bound already to a
    stand-in that runs it and calls the real one."""
    module = importlib.util.module_from_spec(spec)
    deferred = _Deferred(module, spec)
    module.__getattr__ = deferred  # type: ignore[method-assign]
    for attr in called_later:
        module.__dict__[attr] = _called_later(deferred, attr)
    sys.modules[name] = module


class _Deferred:
    """A deferred module's ``__getattr__``: runs the module's code, then answers."""

    def __init__(self, module: types.ModuleType, spec: importlib.machinery.ModuleSpec) -> None:
        self._module = module
        self._spec = spec
        self._lock = threading.RLock()

    def __call__(self, name: str) -> Any:
        if name == "__path__" and self._spec.submodule_search_locations is None:
            # the import system asks a module it imports from whether it is a package
            raise AttributeError(name)
        return self.load(name)

    def load(self, name: str) -> Any:
        """The module's ``name``, its code run first if it has not yet."""
        with self._lock:
            if self._module.__dict__.get("__getattr__") is self:
                del self._module.__dict__["__getattr__"]
                assert self._spec.loader is not None
                self._spec.loader.exec_module(self._module)
        return getattr(self._module, name)


WITHOUT_AIOHTTP = ("kubernetes_asyncio.client.rest",)
"""Deferred too, once the lazy packages are in place (it is found through them): the
REST client ``ApiClient`` builds, which imports aiohttp. The kubeconfig loader imports
``ApiClient`` (for ``new_client_from_config``), and ``kubesched run`` builds none before
its first bind (the Lease's is the only one): aiohttp's import waits for the first
request that needs it (:mod:`kubesched.cluster.aio`)."""

CALLED_LATER = {"kubernetes_asyncio.config.openid": ("OpenIDRequestor",)}
"""Modules whose names are imported early but called late: each name stands for a
function that runs the module's code (deferred, as :func:`defer`'s) and calls the real
one. The kubeconfig loader imports ``OpenIDRequestor``, whose module imports aiohttp and
evaluates aiohttp's classes in its annotations, and calls it only to refresh an OIDC
token."""


def defer_calls(modules: Mapping[str, tuple[str, ...]] = CALLED_LATER) -> list[str]:
    """Register each module of ``modules`` as a deferred one (:func:`defer`) in which the
    names listed are already bound, to stand-ins that load the module and call the real
    name; returns those registered (one already imported, or not installed, is left
    alone). Found without importing their parent package, so a parent that imports them
    binds the stand-ins."""
    done: list[str] = []
    for name, callables in modules.items():
        if name in sys.modules:
            continue
        parent, _, _ = name.rpartition(".")
        top = importlib.util.find_spec(name.partition(".")[0])
        if top is None or top.submodule_search_locations is None:
            continue
        where = [str(Path(p, *parent.split(".")[1:])) for p in top.submodule_search_locations]
        spec = importlib.machinery.PathFinder.find_spec(name, where)
        if spec is None or spec.loader is None:
            continue
        _register(name, spec, callables)
        done.append(name)
    return done


def _called_later(deferred: _Deferred, attr: str) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        return deferred.load(attr)(*args, **kwargs)

    call.__name__ = call.__qualname__ = attr
    return call


def install(packages: tuple[str, ...] = LAZY_PACKAGES) -> bool:
    """Register ``packages`` (parents first) as lazy packages, and :func:`defer` urllib3,
    :data:`WITHOUT_AIOHTTP` and :data:`CALLED_LATER`; True if it did (see the module
    docstring)."""
    if any(name in sys.modules for name in packages):
        return False
    defer()
    added: list[str] = []
    try:
        for name in packages:
            spec = importlib.util.find_spec(name)
            if spec is None or spec.origin is None or spec.submodule_search_locations is None:
                raise ImportError(name)
            module = importlib.util.module_from_spec(spec)
            lazy = _LazyInit(module, spec)
            module.__getattr__ = lazy  # type: ignore[method-assign]
            module.__dir__ = lazy.names  # type: ignore[method-assign]
            sys.modules[name] = module
            added.append(name)
            parent, _, child = name.rpartition(".")
            if parent:
                setattr(sys.modules[parent], child, module)
    except ImportError:
        for name in added:  # not installed (or not a package): leave imports as they were
            del sys.modules[name]
        return False
    defer(WITHOUT_AIOHTTP)
    defer_calls()
    return True
