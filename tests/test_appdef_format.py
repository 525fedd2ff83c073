"""docs/appdef-format.md and core/src/tx/specs/appdef.schema.json: every example of the
page is valid under the schema and loads in tx; tx's own output (every field written)
is valid too; and the schema rejects what tx rejects."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from tx.specs import AppDefFormatError
from tx.specs.files import appdef_to_dict, parse_appdef
from tx.testing.backends import require_module

jsonschema = require_module("jsonschema", "validates AppDef files against the schema: pip install jsonschema")

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "appdef-format.md"
SCHEMA = REPO / "core" / "src" / "tx" / "specs" / "appdef.schema.json"


def _examples():
    return re.findall(r"```(yaml|json)\n(.*?)```", DOC.read_text(), re.S)


@pytest.fixture(scope="module")
def validator():
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_page_has_an_example_per_feature():
    text = "".join(body for _, body in _examples())
    assert len(_examples()) >= 14
    for feature in ("args:", "env:", "num_replicas:", "${replica_id}", "${rank0_env}", "resource:",
                    "capabilities:", "devices:", "image:", "max_retries:", "retry_policy:", "min_replicas:",
                    "port_map:", "type: bind", "type: volume", "type: device", "metadata:", '"roles": ['):
        assert feature in text, f"no example uses {feature}"


@pytest.mark.parametrize("lang,body", _examples(), ids=lambda v: v if v in ("yaml", "json") else None)
def test_every_example_is_valid_and_loads(validator, lang, body):
    doc = json.loads(body) if lang == "json" else yaml.safe_load(body)
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(doc)]
    assert not errors, errors
    app = parse_appdef(body, fmt=lang)
    assert app.name == doc["name"]
    # what tx writes back (every field) is valid as well
    assert not list(validator.iter_errors(appdef_to_dict(app)))


def test_the_schema_ships_in_the_package():
    import importlib.resources

    shipped = importlib.resources.files("tx.specs") / "appdef.schema.json"
    assert json.loads(shipped.read_text()) == json.loads(SCHEMA.read_text())


BAD = [
    "name: a\nroles: [{name: r, entrypiont: x}]",
    "name: a\nroles: [{name: r, num_replicas: 0}]",
    "name: a\nroles: [{name: r, num_replicas: '2'}]",
    "name: a\nroles: [{name: r, max_retries: -1}]",
    "name: a\nroles: [{name: r, min_replicas: -1}]",
    "name: a\nroles: [{name: r, args: [1]}]",
    "name: a\nroles: [{name: r, env: {PORT: 8080}}]",
    "name: a\nroles: [{name: r, retry_policy: sometimes}]",
    "name: a\nroles: [{name: r, resource: {cpu: 1}}]",
    "name: a\nroles: [{name: r, resource: {cpu: 1, gpu: 0, memMB: 1, disk: 5}}]",
    "name: a\nroles: [{name: r, mounts: [{src_path: /a, dst_path: /b}]}]",
    "name: a\nroles: [{name: r, mounts: [{type: nfs, src_path: /a, dst_path: /b}]}]",
    "name: a\nroles: [{name: r, mounts: [{type: device, src_path: /a, dst_path: /b, permissions: x}]}]",
    "name: a\nroles: [{name: r, mounts: [{type: volume, src_path: /a, dst_path: /b}]}]",
    "name: a\nmetadata: {a: 1}",
    "name: ''",
    "roles: []",
    "name: a\nextra: 1",
]


@pytest.mark.parametrize("text", BAD)
def test_schema_rejects_what_tx_rejects(validator, text):
    assert list(validator.iter_errors(yaml.safe_load(text))), f"the schema accepts {text!r}"
    with pytest.raises(AppDefFormatError):
        parse_appdef(text)


def test_examples_run(tx, tmp_path):
    """The page's first examples run as they are on the local scheduler."""
    examples = [body for lang, body in _examples() if lang == "yaml"]
    smallest = next(b for b in examples if b.startswith("name: hello"))
    (tmp_path / "app.yaml").write_text(smallest)
    p = tx("run", "-s", "local_cwd", "app.yaml")
    assert p.returncode == 0 and "echo/0 hello world" in p.stdout, p.stderr
    shell = next(b for b in examples if b.startswith("name: shell"))
    (tmp_path / "shell.yaml").write_text(shell)
    p = tx("run", "-s", "local_cwd", "shell.yaml")
    assert p.returncode == 0 and "sh/0 hello from " in p.stdout, p.stderr
