"""The published CRD schemas as strict JSON-schema validators (shared by the fake API
server and the dryrun tests)."""
from __future__ import annotations

import os
from typing import Any, Dict, Tuple


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
