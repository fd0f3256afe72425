"""kubesched.lazy_kube_client: kubernetes_asyncio's generated models stay unloaded in
``kubesched run``, and kubeconfig loading (tokens, client certificates, CA data, exec
plugins, the in-cluster service account) still works through kubernetes_asyncio."""

from __future__ import annotations

import base64
import importlib
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubesched import lazy_kube_client

# a fresh interpreter: in the pytest process kubernetes_asyncio may already be imported
# eagerly by another test module, and then install() rightly does nothing
PROBE = textwrap.dedent(
    """
    import asyncio, json, sys
    from pathlib import Path

    import kubesched.operator.run  # kopf, the handlers, the kube adapter
    from kubesched.cluster.kubeconfig import load_client_configuration
    from kubesched.lazy_kube_client import loaded_models

    async def load(path):
        cfg = await load_client_configuration(path)
        auth = await cfg.get_api_key_with_prefix("BearerToken")
        read = lambda f: Path(f).read_text() if f else None
        return {
            "host": cfg.host,
            "authorization": auth,
            "ca": read(cfg.ssl_ca_cert),
            "cert": read(cfg.cert_file),
            "key": read(cfg.key_file),
            "verify_ssl": cfg.verify_ssl,
        }

    def incluster(token_file, ca_file):
        from kubernetes_asyncio.client import Configuration
        from kubernetes_asyncio.config.incluster_config import InClusterConfigLoader

        cfg = Configuration()
        env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
        InClusterConfigLoader(token_file, ca_file, environ=env).load_and_set(cfg)
        auth = asyncio.run(cfg.get_api_key_with_prefix("BearerToken"))
        return {"host": cfg.host, "authorization": auth, "ca": Path(cfg.ssl_ca_cert).read_text()}

    args = json.loads(sys.argv[1])
    out = {name: asyncio.run(load(path)) for name, path in args["kubeconfigs"].items()}
    out["incluster"] = incluster(args["token_file"], args["ca_file"])
    out["models"] = loaded_models()
    out["apis"] = sorted(m for m in sys.modules if m.startswith("kubernetes_asyncio.client.api."))
    out["aiohttp"] = "aiohttp" in sys.modules
    print(json.dumps(out))
    """
)

CA = "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n"
CERT = "-----BEGIN CERTIFICATE-----\nCLIENT\n-----END CERTIFICATE-----\n"
KEY = "-----BEGIN PRIVATE KEY-----\nKEY\n-----END PRIVATE KEY-----\n"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _kubeconfig(path: Path, user: dict[str, Any]) -> str:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "c",
                "cluster": {
                    "server": "https://127.0.0.1:6443",
                    "certificate-authority-data": _b64(CA),
                },
            }
        ],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path.write_text(json.dumps(doc))  # JSON is YAML
    return str(path)


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("kubeconfigs")
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "kind": "ExecCredential",
        "status": {"token": "from-exec-plugin"},
    }
    exec_user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": sys.executable,
            "args": ["-c", f"print({json.dumps(json.dumps(credential))})"],
        }
    }
    (tmp / "token").write_text("service-account-token")  # as the kubelet writes it
    (tmp / "ca.crt").write_text(CA)
    args = {
        "kubeconfigs": {
            "token": _kubeconfig(tmp / "token.yaml", {"token": "static-token"}),
            "certs": _kubeconfig(
                tmp / "certs.yaml",
                {"client-certificate-data": _b64(CERT), "client-key-data": _b64(KEY)},
            ),
            "exec": _kubeconfig(tmp / "exec.yaml", exec_user),
        },
        "token_file": str(tmp / "token"),
        "ca_file": str(tmp / "ca.crt"),
    }
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_run_imports_no_urllib3_until_basic_auth_needs_it() -> None:
    code = textwrap.dedent(
        """
        import sys
        import kubesched.operator.run
        from kubernetes_asyncio.client import Configuration
        lazy = "__getattr__" in vars(sys.modules["urllib3"])
        c = Configuration()
        c.username, c.password = "me", "secret"
        print(lazy, c.get_basic_auth_token(), "__getattr__" in vars(sys.modules["urllib3"]))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "Basic", "bWU6c2VjcmV0", "False"]


def test_run_imports_no_generated_models_or_api_classes(probe: dict[str, Any]) -> None:
    # Kopf asks for V1ObjectMeta and V1OwnerReference; nothing else is loaded
    # (eagerly, all ~770 model modules and ~65 API modules would be)
    assert len(probe["models"]) <= 5, probe["models"]
    assert probe["apis"] == []


def test_run_and_its_kubeconfig_loading_import_no_aiohttp(probe: dict[str, Any]) -> None:
    # a static token, client certificates, an exec plugin and the service account loaded:
    # aiohttp waits for the first request that needs it (kubesched.cluster.aio)
    assert probe["aiohttp"] is False


OIDC_PROBE = """
import sys
import kubesched.cluster.kubeconfig
from kubernetes_asyncio.config import kube_config
print("aiohttp" in sys.modules)
requestor = kube_config.OpenIDRequestor("id", "secret", "https://issuer.example")
print(type(requestor).__module__, type(requestor).__name__, "aiohttp" in sys.modules)
from kubernetes_asyncio.config.openid import OpenIDRequestor
print(OpenIDRequestor is type(requestor))
"""


def test_an_oidc_login_still_gets_kubernetes_asyncios_requestor() -> None:
    # the loader binds a stand-in (lazy_kube_client.CALLED_LATER); calling it loads the
    # real module, aiohttp with it, and makes the real requestor
    out = subprocess.run(
        [sys.executable, "-c", OIDC_PROBE], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out == [
        "False",
        "kubernetes_asyncio.config.openid OpenIDRequestor True",
        "True",
    ]


def test_static_token_and_ca_data(probe: dict[str, Any]) -> None:
    got = probe["token"]
    assert got["host"] == "https://127.0.0.1:6443"
    assert got["authorization"] == "Bearer static-token"
    assert got["ca"] == CA
    assert got["verify_ssl"] is True


def test_client_certificate_and_key_data(probe: dict[str, Any]) -> None:
    got = probe["certs"]
    assert (got["cert"], got["key"], got["ca"]) == (CERT, KEY, CA)
    assert got["authorization"] is None


def test_exec_plugin_token(probe: dict[str, Any]) -> None:
    assert probe["exec"]["authorization"] == "Bearer from-exec-plugin"


def test_in_cluster_service_account(probe: dict[str, Any]) -> None:
    got = probe["incluster"]
    assert got["host"] == "https://10.0.0.1:443"
    assert got["authorization"] == "Bearer service-account-token"
    assert got["ca"] == CA


# -- the mechanism, on a package of our own ----------------------------------------


@pytest.fixture
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    pkg = tmp_path / "lazydemo"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        '"""A package that imports everything eagerly."""\n'
        "from __future__ import annotations\n"
        '__version__ = "1.2"\n'
        '__all__ = ["Heavy", "Light"]\n'
        "from lazydemo.heavy import Heavy\n"
        "from lazydemo.light import Light as Light\n"
        "import lazydemo.sub as sub\n"
    )
    (pkg / "heavy.py").write_text("class Heavy:\n    pass\n")
    (pkg / "light.py").write_text("class Light:\n    pass\n")
    (pkg / "sub" / "__init__.py").write_text("def odd():\n    return 'ran'\nVALUE = odd()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield pkg
    for name in [m for m in sys.modules if m == "lazydemo" or m.startswith("lazydemo.")]:
        del sys.modules[name]


def test_names_load_on_first_use_only(demo: Path) -> None:
    assert lazy_kube_client.install(("lazydemo", "lazydemo.sub"))
    lazydemo = importlib.import_module("lazydemo")

    assert "lazydemo.heavy" not in sys.modules
    assert lazydemo.__version__ == "1.2"
    assert lazydemo.Light.__name__ == "Light"
    assert "lazydemo.heavy" not in sys.modules
    namespace: dict[str, Any] = {}
    exec("from lazydemo import Heavy", namespace)
    assert namespace["Heavy"].__module__ == "lazydemo.heavy"
    namespace = {}
    exec("from lazydemo import *", namespace)
    assert {"Heavy", "Light"} <= set(namespace)
    assert {"Heavy", "Light", "sub", "__version__"} <= set(dir(lazydemo))
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        _ = lazydemo.missing


def test_an_init_of_another_shape_runs_in_full(demo: Path) -> None:
    # lazydemo.sub defines a function: not just imports and literals, so it runs for real
    assert lazy_kube_client.install(("lazydemo", "lazydemo.sub"))
    sub = importlib.import_module("lazydemo.sub")

    assert sub.VALUE == "ran"
    assert sub.odd() == "ran"


def test_a_deferred_module_runs_on_first_attribute_use(demo: Path) -> None:
    assert lazy_kube_client.defer(("lazydemo",)) == ["lazydemo"]
    namespace: dict[str, Any] = {}
    exec("import lazydemo", namespace)  # an import alone runs nothing
    assert "lazydemo.heavy" not in sys.modules
    assert namespace["lazydemo"].Heavy.__name__ == "Heavy"  # first use runs its code
    assert "lazydemo.heavy" in sys.modules
    assert lazy_kube_client.defer(("lazydemo", "no_such_module_here")) == []


def test_install_is_a_no_op_when_already_imported_or_absent(demo: Path) -> None:
    lazydemo = importlib.import_module("lazydemo")

    assert "lazydemo.heavy" in sys.modules  # a plain import ran the real __init__
    assert not lazy_kube_client.install(("lazydemo",))
    assert sys.modules["lazydemo"] is lazydemo
    assert not lazy_kube_client.install(("no_such_package_here",))
    assert "no_such_package_here" not in sys.modules


# -- reading an __init__: line by line, or parsed --------------------------------------


@pytest.mark.parametrize("package", lazy_kube_client.LAZY_PACKAGES)
def test_kubernetes_asyncios_inits_are_read_line_by_line_as_the_parser_reads_them(
    package: str,
) -> None:
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.origin is not None
    source = Path(spec.origin).read_text(encoding="utf-8")

    scanned = lazy_kube_client._scan(source)

    assert scanned is not None, f"{spec.origin}: a line of a shape the line reader skips"
    assert scanned == lazy_kube_client._parse(source, spec.origin)
    assert len(scanned[0]) > 5  # it did read the names (client's: about 1700)


PLAIN = '"""Doc."""\n# a comment\nfrom a.b import C\nfrom a import D as E\nimport a.f as f\nX = 1\n'


@pytest.mark.parametrize(
    "source",
    [
        PLAIN,
        '"""A docstring\nover lines, with from x import y inside\n"""\nfrom a import B\n',
        "'''single'''\nfrom __future__ import annotations\nV = '1.0'  # the version\n",
        "A = ['x', 'y']\n\n\n",
    ],
)
def test_plain_inits_are_read_line_by_line(source: str) -> None:
    scanned = lazy_kube_client._scan(source)

    assert scanned is not None
    assert scanned == lazy_kube_client._parse(source, "x.py")


@pytest.mark.parametrize(
    "odd",
    [
        "from a import (B,\n    C)\n",  # parenthesized: the parser reads it
        "from a import B, C\n",
        "from . import b\n",  # relative: the parser says no
        "import a\n",
        "from a import *\n",
        "X = f()\n",
        "X = [\n    1,\n]\n",  # a literal over lines: the parser reads it
        "x: int = 1\n",
        "if True:\n    from a import B\n",
        'S = """a\nb"""\n',
        '"""doc""" + x\n',
        '"""doc\nend""" ; y\n',
        '"""never closed\n',
        "from a import B; run()\n",
        "a = b = 1\n",
        '__all__ = [\n    "a", "b",\n]\n',  # two a line
        '__all__ = [\n    "a",\n    x,\n]\n',
        '__all__ = [\n    "a",\n',  # never closed
    ],
)
def test_other_shapes_are_left_to_the_parser(odd: str, tmp_path: Path) -> None:
    source = PLAIN + odd
    init = tmp_path / "__init__.py"
    init.write_text(source)

    assert lazy_kube_client._scan(source) is None
    try:
        parsed = lazy_kube_client._parse(source, str(init))
    except SyntaxError:
        return  # not Python: importing it for real says so
    assert lazy_kube_client._read_init(str(init)) == parsed


def test_a_list_of_strings_over_lines_is_read_line_by_line() -> None:
    source = PLAIN + '__all__ = [\n    "C",\n    \'E\',\n    "f"\n]\nY = 2\n'

    scanned = lazy_kube_client._scan(source)

    assert scanned is not None
    assert scanned == lazy_kube_client._parse(source, "x.py")
    assert scanned[1]["__all__"] == ["C", "E", "f"]
