"""What a refused kubeconfig's error line says when kubernetes_asyncio's loader has no
good words for it: no ``<... object at 0x...>`` from its internals, and a name where
an ``assert`` of the loader said nothing."""

from __future__ import annotations

from kubernetes_asyncio.config import ConfigException

from kubesched.cluster.kubeconfig import _loader_message


def test_the_loaders_objects_and_the_files_name_leave_its_message() -> None:
    e = ConfigException(
        "Invalid kube-config file. Expected object with name "
        "<kubernetes_asyncio.config.kube_config.ConfigNode object at 0x7f5b9453be10> "
        "in /home/me/k.yaml/contexts list"
    )
    said = _loader_message(e, "/home/me/k.yaml")
    assert said == (
        "Invalid kube-config file. Expected object with name (something that is not a "
        "name)/contexts list"
    )


def test_an_assert_without_words_names_the_error() -> None:
    assert _loader_message(AssertionError(), "k.yaml") == "not a usable kubeconfig (AssertionError)"
    plain = ConfigException("Invalid kube-config file. Expected key current-context in k.yaml")
    assert (
        _loader_message(plain, "k.yaml") == "Invalid kube-config file. Expected key current-context"
    )
