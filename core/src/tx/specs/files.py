"""AppDefs in files: load and dump YAML and JSON documents.

The document is the dict of :func:`appdef_to_dict` (the one cattrs converter of tx,
:mod:`tx.specs._convert`); this module is the serialization layer above the model
(:mod:`tx.specs.api` never imports it)::
    name: trainer
    roles:
      - name: worker
        image: /opt/app
        entrypoint: python
        args: [-m, train]
        num_replicas: 2
        resource: {cpu: 2, gpu: 0, memMB: 1024}
        mounts:
          - {type: bind, src_path: /data, dst_path: /data}

Fields left out take their defaults; unknown keys are errors. ``tx run app.yaml`` runs
such a file. PyYAML, cattrs and json are imported only when a function here is called.
"""
from __future__ import annotations

import json
import os
from typing import IO, Any, Dict, Mapping, Optional, Tuple, Union

from tx.specs.api import AppDef, AppDefFormatError

__all__ = [
    "appdef_from_dict", "appdef_to_dict", "appdef_to_json", "appdef_to_yaml", "dump_appdef",
    "load_appdef", "parse_appdef", "PathOrStream", "STORED_APPDEF_VERSION", "appdef_to_stored",
    "appdef_from_stored", "read_stored_appdef", "read_stored_appdef_and_options", "storable_run_options",
    "stored_run_options",
]

_YAML_EXT = (".yaml", ".yml")
_JSON_EXT = (".json",)
_FORMATS = ("yaml", "json")

PathOrStream = Union[str, "os.PathLike[str]", IO[str]]


def _fmt_of(name: str, text: Optional[str] = None) -> str:
    """``json`` or ``yaml`` from the file extension; unknown extensions are sniffed:
    a document starting with ``{`` or ``[`` is JSON, anything else YAML."""
    ext = os.path.splitext(name)[1].lower()
    if ext in _JSON_EXT:
        return "json"
    if ext in _YAML_EXT or text is None:
        return "yaml"
    return "json" if text.lstrip()[:1] in ("{", "[") else "yaml"


def _parse_yaml(text: str, name: str) -> Any:
    import yaml  # deferred: PyYAML/cattrs only when a document is read or written

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f":{mark.line + 1}" if mark is not None else ""
        what = e.problem or e.context or "syntax error"
        if e.problem and e.context and e.context_mark is not None:
            what += f" ({e.context} started on line {e.context_mark.line + 1})"
        raise AppDefFormatError(f"{name}{where}: invalid YAML: {what}") from None
    except yaml.YAMLError as e:
        raise AppDefFormatError(f"{name}: invalid YAML: {' '.join(str(e).split())}") from None


def _parse_json(text: str, name: str) -> Any:

    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise AppDefFormatError(f"{name}:{e.lineno}: invalid JSON: {e.msg} (column {e.colno})") from None


def parse_appdef(text: str, fmt: str = "yaml", name: str = "<string>") -> AppDef:
    """Build an AppDef from YAML or JSON text.

    Args:
        text: the document.
        fmt: ``yaml`` or ``json`` (YAML also reads JSON).
        name: what error messages call the document (a file name).

    Raises:
        tx.specs.AppDefFormatError: a syntax error (``name:LINE: invalid YAML: ...``) or a
            bad field (``name: roles[0].num_replicas: expected int, got 'two'``).
        ValueError: ``fmt`` is neither ``yaml`` nor ``json``.
    """
    if fmt not in _FORMATS:
        raise ValueError(f"fmt must be 'yaml' or 'json', got {fmt!r}")
    data = _parse_json(text, name) if fmt == "json" else _parse_yaml(text, name)
    from tx.specs._convert import structure_appdef  # deferred: PyYAML/cattrs only when a document is read or written

    try:
        return structure_appdef(data)
    except AppDefFormatError as e:
        err = AppDefFormatError(f"{name}: {e}")
        err.errors = getattr(e, "errors", [])  # type: ignore[attr-defined]
        raise err from None


def appdef_to_dict(app: AppDef) -> Dict[str, Any]:
    """``app`` as a dict of plain JSON/YAML types, every field written (mounts tagged by
    ``type``, enums by name). Imports cattrs on first use.

    Raises:
        TypeError: ``app`` is not an AppDef.
    """
    from tx.specs._convert import unstructure_appdef  # deferred: PyYAML/cattrs only when a document is read or written

    return unstructure_appdef(app)


def appdef_from_dict(data: Any, trusted: bool = False) -> AppDef:
    """The AppDef of a dict as :func:`appdef_to_dict` writes it (fields left out take their
    defaults; unknown keys and wrong types are errors).

    Args:
        trusted: ``data`` is what :func:`appdef_to_dict` wrote (tx's own stored copy): it
            is built directly, without importing cattrs (~20 ms), and checked by the full
            converter only if that fails.

    Raises:
        tx.specs.AppDefFormatError: every bad field, named by its path
            (``roles[1].num_replicas: expected int, got 'two'``), in one line.
    """
    from tx.specs._convert import (  # deferred: PyYAML/cattrs only when a document is read or written
        structure_appdef,
        trusted_appdef,
    )

    if trusted:
        try:
            return trusted_appdef(data)
        except (KeyError, TypeError, ValueError, AttributeError):
            pass
    return structure_appdef(data)


def load_appdef(path: Union[str, "os.PathLike[str]"]) -> AppDef:
    """Load an AppDef from a file: ``.yaml``/``.yml`` as YAML, ``.json`` as JSON, any
    other name by its content (``{`` first: JSON, else YAML). Text is read as UTF-8.

    Raises:
        tx.specs.AppDefFormatError: the file cannot be read (``app.yaml: cannot read: No
            such file or directory``), has a syntax error (``app.yaml:3: invalid YAML:
            ...``) or a bad field (``app.yaml: roles[1].num_replicas: expected int, got
            'two'``); always one line.
    """
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise AppDefFormatError(f"{name}: cannot read: {why}") from None
    return parse_appdef(text, _fmt_of(name, text), name)


def appdef_to_yaml(app: AppDef) -> str:
    """``app`` as a YAML document (block style, fields in declaration order).

    Raises:
        TypeError: ``app`` is not an AppDef.
    """
    import yaml  # deferred: PyYAML/cattrs only when a document is read or written

    from tx.specs._convert import unstructure_appdef  # deferred: PyYAML/cattrs only when a document is read or written

    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(
        unstructure_appdef(app), Dumper=dumper, sort_keys=False, default_flow_style=False,
        allow_unicode=True,
    )


def appdef_to_json(app: AppDef) -> str:
    """``app`` as a JSON document (2-space indent, ending with a newline).

    Raises:
        TypeError: ``app`` is not an AppDef, or its metadata holds values JSON cannot
            represent.
    """

    from tx.specs._convert import unstructure_appdef  # deferred: PyYAML/cattrs only when a document is read or written

    return json.dumps(unstructure_appdef(app), indent=2, ensure_ascii=False) + "\n"


def dump_appdef(app: AppDef, path_or_stream: PathOrStream, fmt: Optional[str] = None) -> None:
    """Write ``app`` to a file path or a text stream as YAML or JSON.

    Args:
        fmt: ``yaml`` or ``json``; None: ``json`` for a ``.json`` path, else ``yaml``.

    Raises:
        ValueError: ``fmt`` is neither ``yaml`` nor ``json``.
        TypeError: ``app`` is not an AppDef.
        OSError: the file cannot be written.
    """
    if fmt is None:
        is_path = isinstance(path_or_stream, (str, os.PathLike))
        fmt = _fmt_of(os.fspath(path_or_stream)) if is_path else "yaml"  # type: ignore[arg-type]
    if fmt not in _FORMATS:
        raise ValueError(f"fmt must be 'yaml' or 'json', got {fmt!r}")
    text = appdef_to_json(app) if fmt == "json" else appdef_to_yaml(app)
    if isinstance(path_or_stream, (str, os.PathLike)):
        with open(os.fspath(path_or_stream), "w", encoding="utf-8") as f:
            f.write(text)
    else:
        path_or_stream.write(text)


#: the version of the format :func:`appdef_to_stored` writes (its ``tx_appdef`` key)
STORED_APPDEF_VERSION = 1


def storable_run_options(cfg: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """The run options of a submission as a scheduler keeps them with the job: the entries
    of ``cfg`` whose values JSON represents as they are (None, bool, int, float, str, lists
    of those, dicts of str to those); others (a path object, a callable) are left out. A
    scheduler leaves out options that hold credentials before it calls this.

    Args:
        cfg: the run options after defaults (``runopts.resolve``); None: none.
    """
    def safe(value: Any) -> bool:
        if value is None or isinstance(value, (bool, int, float, str)):
            return True
        if isinstance(value, (list, tuple)):
            return all(safe(v) for v in value)
        if isinstance(value, dict):
            return all(isinstance(k, str) and safe(v) for k, v in value.items())
        return False

    return {str(k): (list(v) if isinstance(v, tuple) else v) for k, v in (cfg or {}).items() if safe(v)}


def appdef_to_stored(app: AppDef, limit: Optional[int] = None,
                     cfg: Optional[Mapping[str, Any]] = None) -> Optional[str]:
    """The copy of ``app`` a scheduler keeps with the job (a label, an annotation, a file, an
    environment variable), one format for every backend: compact JSON
    ``{"tx_appdef": 1, "app": <appdef_to_dict(app)>, "run_options": {...}}``. Where that is
    longer than ``limit`` bytes (UTF-8), the AppDef's dict zlib-compressed and
    base64-encoded, ``{"tx_appdef": 1, "zlib": "<base64>", "run_options": {...}}``; where
    that too is longer, the same without the run options; None where that too is longer
    (the caller then says so, see :func:`read_stored_appdef`). ``run_options`` (read back by
    :func:`stored_run_options`) is absent in copies without ``cfg`` and in those of a tx
    before it; a tx that does not know the key ignores it.

    Args:
        limit: the most bytes (UTF-8) the backend's place holds; None: no limit.
        cfg: the run options the app is submitted with, after defaults, less those that
            hold credentials (:func:`storable_run_options` keeps the JSON-safe ones).

    Raises:
        TypeError: ``app`` is not an AppDef, or its metadata holds values JSON cannot
            represent.
    """
    import base64  # deferred: only schedulers that store the AppDef need them
    import zlib  # deferred: as base64

    data = appdef_to_dict(app)
    extra = {"run_options": storable_run_options(cfg)} if cfg is not None else {}
    text = json.dumps({"tx_appdef": STORED_APPDEF_VERSION, "app": data, **extra}, separators=(",", ":"),
                      ensure_ascii=False)
    if limit is None or len(text.encode()) <= limit:
        return text
    packed = base64.b64encode(zlib.compress(json.dumps(data, separators=(",", ":")).encode(), 9)).decode()
    for keep in (extra, {}):
        text = json.dumps({"tx_appdef": STORED_APPDEF_VERSION, "zlib": packed, **keep}, separators=(",", ":"),
                          ensure_ascii=False)
        if len(text.encode()) <= limit:
            return text
    return None


def stored_run_options(text: Optional[Union[str, bytes]]) -> Optional[Dict[str, Any]]:
    """The run options kept in a copy :func:`appdef_to_stored` wrote, for
    ``DescribeAppResponse.metadata["run_options"]``; None where the copy has none (written
    without ``cfg``, by an older tx, or left out for size), or is no such copy (never an
    error: :func:`read_stored_appdef` says what is wrong with it)."""
    try:
        doc = json.loads(text) if text else None
    except (ValueError, TypeError):
        return None
    return _run_options_of(doc)


def _run_options_of(doc: Any) -> Optional[Dict[str, Any]]:
    """The ``run_options`` of a parsed stored copy; None where it has none."""
    options = doc.get("run_options") if isinstance(doc, dict) else None
    return options if isinstance(options, dict) else None


def appdef_from_stored(text: Union[str, bytes]) -> AppDef:
    """The AppDef of what :func:`appdef_to_stored` wrote.

    Raises:
        tx.specs.AppDefFormatError: ``text`` is not such a copy, or a newer tx wrote it
            (``stored AppDef has version 2; this tx reads up to 1``).
    """
    try:
        doc = json.loads(text)
    except (ValueError, TypeError) as e:
        raise AppDefFormatError(f"stored AppDef is not JSON: {e}") from None
    return _appdef_of(doc)


def _appdef_of(doc: Any) -> AppDef:
    """The AppDef of a parsed stored copy (see :func:`appdef_from_stored`)."""
    import base64  # deferred: only schedulers that store the AppDef need them
    import binascii  # deferred: as base64
    import zlib  # deferred: as base64

    version = doc.get("tx_appdef") if isinstance(doc, dict) else None
    if not isinstance(version, int):
        raise AppDefFormatError("not a stored AppDef (no tx_appdef version)")
    if version > STORED_APPDEF_VERSION:
        raise AppDefFormatError(
            f"stored AppDef has version {version}; this tx reads up to {STORED_APPDEF_VERSION}")
    data = doc.get("app")
    if data is None and isinstance(doc.get("zlib"), str):
        try:
            data = json.loads(zlib.decompress(base64.b64decode(doc["zlib"])))
        except (binascii.Error, zlib.error, ValueError) as e:
            raise AppDefFormatError(f"stored AppDef cannot be unpacked: {e}") from None
    return appdef_from_dict(data, trusted=True)


def read_stored_appdef(text: Optional[Union[str, bytes]], where: str,
                       limit: Optional[int] = None) -> Tuple[Optional[AppDef], str]:
    """What a scheduler's describe sets from the copy it kept with the job: ``(app, "")``,
    or ``(None, why)`` with one line for ``DescribeAppResponse.metadata["app_not_stored"]``
    (never an error: describe still answers with the roles it rebuilt).

    Args:
        text: the stored copy, None or "" where the job has none.
        where: the place, for the message (``the job's annotation tx.dev/appdef``).
        limit: the most bytes that place holds, if the scheduler leaves the copy out past it.
    """
    app, why, _ = read_stored_appdef_and_options(text, where, limit)
    return app, why


def read_stored_appdef_and_options(
        text: Optional[Union[str, bytes]], where: str, limit: Optional[int] = None,
) -> Tuple[Optional[AppDef], str, Optional[Dict[str, Any]]]:
    """:func:`read_stored_appdef` and :func:`stored_run_options` of ``text`` from one parse
    (a stored copy is up to the backend's limit, 224 KiB in a Kubernetes annotation):
    ``(app, why, run_options)``, what a scheduler's describe sets as ``app``,
    ``metadata["app_not_stored"]`` (``""`` where the AppDef was read) and
    ``metadata["run_options"]``. Never an error; arguments as :func:`read_stored_appdef`'s.
    """
    if not text:
        why = (f"compressed, it exceeds the {limit} bytes that holds, or the job was not submitted by tx"
               if limit else "the job was not submitted by tx, or by an older one")
        return None, f"no copy of the AppDef in {where} ({why}); roles rebuilt from the job", None
    try:
        doc = json.loads(text)
    except (ValueError, TypeError) as e:
        return None, f"{where}: stored AppDef is not JSON: {e}; roles rebuilt from the job", None
    options = _run_options_of(doc)
    try:
        return _appdef_of(doc), "", options
    except AppDefFormatError as e:
        return None, f"{where}: {e}; roles rebuilt from the job", options
