"""``torchx.tracker.backend.fsspec``: TorchX 0.7.0's fsspec tracker backend over tx's file
tracker (:mod:`tx.tracker.backend.fsspec`).

``FsspecTracker(fs, root_dir)`` is tx's class (same constructor, same ``TrackerBase``
methods). :func:`create` takes TorchX's configuration: an fsspec URL of a ``key=value`` file
(``#`` comments; ``protocol`` and ``root_path`` required; other keys, dotted for nesting,
become the filesystem's options), as
https://github.com/pytorch/torchx/blob/v0.7.0/torchx/tracker/backend/fsspec.py reads it.
The files under ``root_path`` are tx's layout (JSON records; see tx's module), not TorchX's:
runs recorded by TorchX 0.7.0 are not read back.
"""
import time
from typing import Any, Dict, Mapping

from tx.tracker.backend.fsspec import FsspecTracker, decode_run_id, encode_run_id

__all__ = ["FsspecTracker", "create", "generate_filename"]


def generate_filename() -> str:
    """A file name unique per call in one process: the time in nanoseconds."""
    return str(time.time_ns())


def _encode_torchx_run_id(run_id: str) -> str:
    """The directory name of ``run_id`` under the tracker's root (tx's encoding,
    :func:`tx.tracker.backend.fsspec.encode_run_id`); :func:`_decode_torchx_run_id` inverts it."""
    return encode_run_id(run_id)


def _decode_torchx_run_id(key: str) -> str:
    """The run id of directory name ``key`` (inverse of :func:`_encode_torchx_run_id`)."""
    return decode_run_id(key)


def _put_config(key: str, value: str, config: Dict[str, Any]) -> None:
    first, dot, rest = key.partition(".")
    if not dot:
        config[key] = value
    elif not rest:
        raise ValueError(f"Illegal config key `{key}`. Key should not have a `.` suffix")
    else:
        _put_config(rest, value, config.setdefault(first, {}))


def _read_config(config_file: str) -> Mapping[str, Any]:
    """The ``key=value`` lines of the file at fsspec URL ``config_file`` as a dict (keys
    with dots nest: ``a.b=c`` -> ``{"a": {"b": "c"}}``; lines starting with ``#`` and lines
    without ``=`` or a value are skipped).

    Raises:
        ValueError: a key ends with ``.``.
        OSError: the file cannot be read.
    """
    import fsspec  # deferred: fsspec only when this tracker is created (as tx's own backend)

    data: Dict[str, Any] = {}
    with fsspec.open(config_file, "rt") as f:
        for line in f:
            if line.startswith("#"):
                continue
            k, sep, v = line.partition("=")
            if k and sep and v.strip():
                _put_config(k.strip(), v.strip(), data)
    return data


def create(config_file: str) -> FsspecTracker:
    """TorchX's entry point (``[tracker:fsspec] config = <file URL>``): an
    :class:`FsspecTracker` on ``fsspec.filesystem(protocol, **other keys)`` at ``root_path``
    (see :func:`_read_config` for the file's form).

    Raises:
        ValueError: the file lacks ``protocol`` or ``root_path``, or has a bad key.
    """
    import fsspec  # deferred: fsspec only when this tracker is created (as tx's own backend)

    config = dict(_read_config(config_file))
    if "protocol" not in config or "root_path" not in config:
        raise ValueError(f"Please specify 'protocol' and 'root_path' in {config_file}")
    protocol = config.pop("protocol")
    root = config.pop("root_path")
    return FsspecTracker(fsspec.filesystem(protocol, **config), root)
