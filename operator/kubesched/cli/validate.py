"""``kubesched validate``: check SchedulingProfiles offline, as the operator would.

Input: files, directories (their ``*.yaml``, ``*.yml`` and ``*.json``, recursively, in
name order) and ``-`` (stdin). Each SchedulingProfile gets one line when valid and one
line per problem otherwise, every line starting with where the document is and what it
is, e.g.::

    profiles.yaml: document 2 (SchedulingProfile "x"): Ready=False InvalidPlugin: spec.plugins.score.enabled[0].name: unknown plugin 'Nope' (known: ...)

A KubeSchedulerConfiguration is imported: each of its profiles becomes a
SchedulingProfile (:mod:`kubesched.cli.kubeschedconfig`), checked the same way;
``--convert`` prints the SchedulingProfiles as YAML instead of the report (problems go
to stderr). Documents of other kinds are listed by their kind and skipped. Exit status:
0 if every profile is valid (warnings allowed), 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pydantic
import yaml

from kubesched.cli.common import EXIT_INVALID, EXIT_OK, BadInput
from kubesched.cli.kubeschedconfig import KSC_KIND, scheduling_profiles
from kubesched.simulator.scenario import Document, parse_documents, read_documents

__all__ = ["add", "check_profile"]

EXTENSIONS = (".yaml", ".yml", ".json")
DEFAULT_SCHEDULER = "default-scheduler"
PROFILE_KIND = "SchedulingProfile"
PROFILE_API = "kubesched.dev/v1alpha1"


@dataclass
class Finding:
    """What ``check_profile`` found about one SchedulingProfile."""

    errors: list[tuple[str, str]] = field(default_factory=list)
    """(reason, message) per problem; the message starts with the field path."""
    warnings: list[str] = field(default_factory=list)
    scheduler_name: str = ""


def _files(paths: list[str]) -> list[str]:
    out: list[str] = []
    for path in paths:
        if not os.path.exists(path) and path != "-":
            raise BadInput(f"{path}: no such file or directory")
        if path == "-" or not os.path.isdir(path):  # a file, a pipe (<(helm template ...))
            out.append(path)
            continue
        found = sorted(
            os.path.join(root, name)
            for root, _, names in os.walk(path)
            for name in names
            if name.endswith(EXTENSIONS)
        )
        if not found:
            raise BadInput(f"{path}: no {', '.join(EXTENSIONS)} files in the directory")
        out.extend(found)
    return out


def _read(path: str) -> list[Document]:
    if path == "-":
        return parse_documents(sys.stdin.read(), "<stdin>")
    return read_documents(path)


def check_profile(spec: Any) -> Finding:
    """Every problem of one SchedulingProfile spec the operator would refuse, and the
    warnings for a valid one that probably does not do what was meant."""
    from kubesched.api.profile import ProfileSpec
    from kubesched.profile_status import pydantic_messages
    from kubesched.profiles import ProfileError, compile_profile, default_registry

    found = Finding()
    if spec is None or spec == {}:
        found.warnings.append(
            "no spec: kube-scheduler's default plugins, serving schedulerName 'kubesched'"
        )
        spec = {}
    if not isinstance(spec, Mapping):
        found.errors.append(("InvalidSpec", f"spec: expected an object, got {spec!r}"))
        return found
    parsed: ProfileSpec | None = None
    try:
        parsed = ProfileSpec.model_validate(dict(spec))
    except pydantic.ValidationError as e:
        found.errors.extend(("InvalidSpec", m) for m in pydantic_messages(e, "spec"))
    # The plugins and their args, from the raw spec: reported even when another field
    # of the spec is wrong.
    registry = default_registry()
    configs = spec.get("pluginConfig")
    for i, pc in enumerate(configs if isinstance(configs, list) else ()):
        name = pc.get("name") if isinstance(pc, Mapping) else None
        if not isinstance(name, str) or not name:
            continue  # the schema's error
        plug = registry.get(name)
        if plug is None:
            found.errors.append(
                ("InvalidPlugin", f"spec.pluginConfig[{i}].name: unknown plugin {name!r}")
            )
            continue
        args = pc.get("args")
        try:
            plug.parse_args(dict(args) if isinstance(args, Mapping) else {})
        except pydantic.ValidationError as e:
            prefix = f"spec.pluginConfig[{i}].args"
            found.errors.extend(("InvalidArgs", m) for m in pydantic_messages(e, prefix))
    plugins = spec.get("plugins")
    for point, pset in plugins.items() if isinstance(plugins, Mapping) else ():
        enabled = pset.get("enabled") if isinstance(pset, Mapping) else None
        for j, ref in enumerate(enabled if isinstance(enabled, list) else ()):
            name = ref.get("name") if isinstance(ref, Mapping) else None
            if isinstance(name, str) and name and name not in registry:
                found.errors.append(
                    (
                        "InvalidPlugin",
                        f"spec.plugins.{point}.enabled[{j}].name: unknown plugin {name!r} "
                        f"(known: {', '.join(registry.names())})",
                    )
                )
    if found.errors or parsed is None:
        return found
    try:
        compiled = compile_profile(parsed)
    except ProfileError as e:
        found.errors.append((e.reason, f"spec.{e.message}"))
        return found
    found.scheduler_name = parsed.scheduler_name
    if parsed.scheduler_name == DEFAULT_SCHEDULER:
        found.warnings.append(
            "spec.schedulerName: 'default-scheduler' is kube-scheduler's: both would "
            "schedule the same pods, unless kube-scheduler is not running"
        )
    chain = {
        n.partition(":")[0] for names in compiled.framework.chain.names().values() for n in names
    }
    for i, pc in enumerate(parsed.plugin_config):
        if pc.name not in chain:
            found.warnings.append(
                f"spec.pluginConfig[{i}]: args for {pc.name!r}, which is not enabled: "
                "they have no effect"
            )
    return found


def _label(doc: Document) -> str:
    obj = doc.obj
    if not isinstance(obj, Mapping):
        return f"{doc.source}: document {doc.index}"
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    name = str((meta or {}).get("name") or "")
    ns = (meta or {}).get("namespace")
    what = f"{obj.get('kind') or 'object without kind'}"
    if name:
        what += f" {(ns + '/') if isinstance(ns, str) and ns else ''}{name}"
        if obj.get("kind") == PROFILE_KIND:
            what = f'{PROFILE_KIND} "{name}"'
    where = f"{doc.source}: document {doc.index}"
    if doc.item is not None:
        where += f" items[{doc.item}]"
    return f"{where} ({what})"


def _validate(args: argparse.Namespace) -> int:
    out = sys.stderr if args.convert else sys.stdout
    code = EXIT_OK
    profiles: list[tuple[str, dict[str, Any]]] = []  # (label, object)
    from kubesched.simulator.scenario import ScenarioError

    for path in _files(args.files):
        try:
            docs = _read(path)
        except ScenarioError as e:
            print(e, file=out)
            code = EXIT_INVALID
            continue
        if not docs:
            print(f"{path}: no documents in the file", file=out)
            code = EXIT_INVALID
        for doc in docs:
            obj = doc.obj
            label = _label(doc)
            kind = obj.get("kind") if isinstance(obj, Mapping) else None
            if kind == KSC_KIND:
                converted, problems, notes = scheduling_profiles(obj)
                for p in problems:
                    print(f"{label}: {p}", file=out)
                for n in notes:
                    print(f"{label}: warning: {n}", file=out)
                code = EXIT_INVALID if problems else code
                for i, profile in enumerate(converted):
                    name = profile["metadata"]["name"]
                    profiles.append(
                        (f'{label} profiles[{i}] (SchedulingProfile "{name}")', profile)
                    )
                continue
            if kind != PROFILE_KIND:
                print(f"{label}: skipped: not a SchedulingProfile", file=out)
                continue
            if obj.get("apiVersion") != PROFILE_API:
                print(
                    f"{label}: Ready=False InvalidSpec: apiVersion: expected {PROFILE_API}, "
                    f"got {obj.get('apiVersion')!r}",
                    file=out,
                )
                code = EXIT_INVALID
                continue
            profiles.append((label, obj))
    if not profiles and code == EXIT_OK:
        print("no SchedulingProfile (or KubeSchedulerConfiguration) in the input", file=out)
        return EXIT_INVALID
    serving: dict[str, str] = {}
    for label, obj in profiles:
        found = check_profile(obj.get("spec"))
        name = found.scheduler_name
        if name and name in serving:
            found.errors.append(
                (
                    "SchedulerNameConflict",
                    f"spec.schedulerName: {name!r} is already served by {serving[name]}",
                )
            )
        elif name:
            serving[name] = label
        for reason, message in found.errors:
            print(f"{label}: Ready=False {reason}: {message}", file=out)
        for w in found.warnings:
            print(f"{label}: warning: {w}", file=out)
        if found.errors:
            code = EXIT_INVALID
        elif not args.convert:
            print(f"{label}: Ready=True Compiled", file=out)
    if args.convert:
        sys.stdout.write(
            yaml.safe_dump_all([obj for _, obj in profiles], sort_keys=False, explicit_start=True)
        )
    out.flush()
    return code


def add(sub: Any) -> None:
    p = sub.add_parser(
        "validate",
        help="check SchedulingProfiles offline (or convert a KubeSchedulerConfiguration)",
        description="Check SchedulingProfiles with the operator's validation and messages "
        "(unknown plugins, plugins at points they do not implement, plugin args, two "
        "QueueSort plugins, schedulerName conflicts among the inputs), every problem of "
        "every document on its own line, and warn about valid profiles that probably do "
        "not do what was meant. A KubeSchedulerConfiguration's profiles are checked as "
        "the SchedulingProfiles they become (--convert prints those). Exit status 0 if "
        "every profile is valid, 1 otherwise.",
    )
    p.add_argument(
        "files",
        metavar="PATH",
        nargs="+",
        help="a YAML/JSON file (one or more documents), a directory (its *.yaml, *.yml, "
        "*.json, recursively) or - for stdin",
    )
    p.add_argument(
        "--convert",
        action="store_true",
        help="print the SchedulingProfiles (a KubeSchedulerConfiguration's converted) as "
        "YAML for kubectl apply; the report goes to stderr",
    )
    p.set_defaults(handler=_validate)
