"""The published CRD schemas as strict JSON-schema validators (shared by the fake API
server and the dryrun tests)."""
from __future__ import annotations

import os
import re
from typing import Any, Dict, Optional, Tuple


def strict(schema: Any) -> Any:
    """A CRD's structural schema with unknown fields rejected (``additionalProperties:
    false`` wherever ``properties`` are listed and unknown fields are not preserved), as the
    API server rejects them with ``fieldValidation=Strict``."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if "properties" in out and "additionalProperties" not in out and not out.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


def load_crds(directory: str) -> Dict[str, Tuple[str, Any]]:
    """``"<group>/<version>/<plural>"`` -> (kind, jsonschema validator) for every CRD version
    in the YAML files under ``directory``."""
    import jsonschema
    import yaml

    out: Dict[str, Tuple[str, Any]] = {}
    for root, _, files in os.walk(directory):
        for f in sorted(files):
            if not f.endswith(".yaml"):
                continue
            with open(os.path.join(root, f)) as fh:
                crd = yaml.load(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
            spec = crd["spec"]
            for ver in spec["versions"]:
                schema = strict(ver["schema"]["openAPIV3Schema"])
                schema["properties"].setdefault("metadata", {"type": "object"})
                out[f"{spec['group']}/{ver['name']}/{spec['names']['plural']}"] = (
                    spec["names"]["kind"], jsonschema.Draft7Validator(schema))
    return out


#: the Kubernetes version whose OpenAPI schemas (as carried by kubernetes-validate) the fake
#: API server and the dryrun tests validate core objects against
KUBE_VERSION = "1.37"

_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class CoreSchemas:
    """Strict validators of the core kinds (Pod, Service, Job, ConfigMap, Secret, ...) from
    kubernetes-validate's schemas of :data:`KUBE_VERSION`, built once per kind (unknown
    fields rejected)."""

    def __init__(self, version: str = KUBE_VERSION) -> None:
        import kubernetes_validate.utils as kvu

        self.version = version
        full = [v for v in kvu.all_versions() if kvu.major_minor(v) == version]
        if not full:
            raise ValueError(f"kubernetes-validate {kvu.__version__} carries no schemas of Kubernetes {version}")
        self._dir = f"kubernetes-json-schema/v{full[-1]}-local-strict"
        self._kvu = kvu
        self._registry: Any = None
        self._validators: Dict[Tuple[str, str], Any] = {}

    def validator(self, api_version: str, kind: str) -> Any:
        """The validator of ``kind`` in ``api_version`` (``None`` when the version has none)."""
        key = (api_version, kind)
        if key not in self._validators:
            import jsonschema
            from referencing import Registry, Resource

            api = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
            try:
                schema = self._kvu.schema_contents(f"{self._dir}/{kind.lower()}-{api}.json", self.version)
            except FileNotFoundError:
                self._validators[key] = None
                return None
            if self._registry is None:
                defs = self._kvu.schema_contents(f"{self._dir}/_definitions.json", self.version)
                self._registry = Resource.from_contents(defs) @ Registry()
            registry = Resource.from_contents(schema) @ self._registry
            self._validators[key] = jsonschema.Draft202012Validator(schema, registry=registry)
        return self._validators[key]


def first_error(validator: Any, obj: Any, prefix: str = "") -> Optional[str]:
    """``"<field path>: <what is wrong>"`` of the first schema error of ``obj`` (in field
    order), or None when it validates."""
    errors = sorted(validator.iter_errors(obj), key=lambda e: [str(p) for p in e.absolute_path])
    if not errors:
        return None
    e = errors[0]
    path = prefix + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in e.absolute_path)
    return f"{path.lstrip('.') or '<root>'}: {e.message}"


def meta_error(meta: Dict[str, Any], prefix: str = "metadata") -> Optional[str]:
    """What the API server's ObjectMeta validation rejects in labels and annotations (the
    JSON schemas only check their types): label keys ``[prefix/]name`` (prefix a DNS
    subdomain of at most 253 characters, name at most 63 of ``[-A-Za-z0-9_.]`` starting and
    ending alphanumeric), label values at most 63 such characters, annotation keys as label
    keys, annotations at most 256 KiB together."""
    def key_error(key: str) -> Optional[str]:
        pre, _, name = key.rpartition("/")
        if pre and (len(pre) > 253 or not _DNS_SUBDOMAIN.match(pre)):
            return "prefix part must be a lowercase RFC 1123 subdomain"
        if not name or len(name) > 63 or not _LABEL_NAME.match(name):
            return ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                    "with an alphanumeric character, at most 63 characters")
        return None

    for k, v in (meta.get("labels") or {}).items():
        why = key_error(k)
        if why:
            return f'{prefix}.labels: Invalid value: "{k}": {why}'
        if not isinstance(v, str) or len(v) > 63 or not _LABEL_NAME.match(v):
            return (f'{prefix}.labels: Invalid value: "{v}": a valid label must be an empty string or consist of '
                    "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
                    "character, at most 63 characters")
    annotations = meta.get("annotations") or {}
    for k in annotations:
        why = key_error(k)
        if why:
            return f'{prefix}.annotations: Invalid value: "{k}": {why}'
    size = sum(len(k) + len(str(v)) for k, v in annotations.items())
    if size > 256 * 1024:
        return f"{prefix}.annotations: Too long: must have at most 262144 bytes"
    return None
