"""``torchx.runner.config``: tx's settings (:mod:`tx.config`) with TorchX 0.7's signatures
and meanings.

* ``dirs`` is TorchX's: the **first** directory wins key by key (tx's own functions take
  the list lowest precedence first: here it is reversed for them). Without ``dirs``, the
  files are tx's search (the working directory, its parents, then home; the nearest
  wins), unless :data:`DEFAULT_CONFIG_DIRS` was replaced (TorchX's tests patch it): then
  that list, first wins.
* ``$TORCHXCONFIG``/``$TXCONFIG`` naming a missing file is a ``FileNotFoundError``.
* ``apply``, ``load`` and ``dump`` create the schedulers they need to learn their run
  options through this module's :func:`get_scheduler_factories` (TorchX's way: a name not
  there is a ``ValueError``); tx's (:mod:`tx.config.run_options`) take the options from
  the caller. ``load`` ignores keys that are no run option, with a warning, as TorchX does.
"""
import configparser
import io
import sys
from typing import IO, Any, Dict, Iterable, List, Mapping, MutableMapping, Optional

from tx.config import *  # noqa: F401,F403
from tx.config import files as _files
from tx.config import search_dirs
from tx.config import run_options as _run_options
from tx.config.torchx import convert_torchx_config, find_torchx_config  # noqa: F401
from tx.schedulers.api import Scheduler, get_scheduler_factories  # noqa: F401
from tx.specs.runopts import CfgVal, runopt, runopts  # noqa: F401
from tx_torchx_compat.torchx.specs.api import get_type_name  # noqa: F401 - TorchX's naming

#: the separator of ``[prefix:name]`` section names
CONFIG_PREFIX_DELIM = ":"
#: the directories searched when ``dirs`` is not given, in TorchX's sense: the first wins
#: (tx's search at import: the working directory, its parents, home; see the module
#: docstring for when a replaced list is used)
DEFAULT_CONFIG_DIRS = search_dirs()
_DEFAULT_AT_IMPORT = DEFAULT_CONFIG_DIRS


def _tx_dirs(dirs: Optional[Iterable[str]]) -> Optional[List[str]]:
    """tx's ``dirs`` (lowest precedence first) for TorchX's (first wins); None: tx's search."""
    if not dirs:
        if DEFAULT_CONFIG_DIRS is _DEFAULT_AT_IMPORT:
            return None  # tx's search, from the working directory of now
        dirs = DEFAULT_CONFIG_DIRS
    return list(dirs)[::-1]


def _env_file_missing(e: Exception) -> FileNotFoundError:
    return FileNotFoundError(str(e))


def find_configs(dirs: Optional[Iterable[str]] = None) -> List[str]:
    """TorchX's ``find_configs``: the config files in effect, the first winning (``dirs``
    in TorchX's sense); ``$TORCHXCONFIG`` (or ``$TXCONFIG``) alone when set.

    Raises:
        FileNotFoundError: ``$TORCHXCONFIG``/``$TXCONFIG`` names no file.
    """
    try:
        return _files.find_configs(_tx_dirs(dirs))[::-1]
    except _files.ConfigError as e:
        raise _env_file_missing(e) from None


def load_sections(prefix: str, dirs: Optional[Iterable[str]] = None) -> Dict[str, Dict[str, str]]:
    """TorchX's ``load_sections``: ``{name: {key: value}}`` of the ``[prefix:name]`` sections
    (``name`` not empty), a key from the first file (``dirs`` in TorchX's sense) that sets it.

    Raises:
        FileNotFoundError: ``$TORCHXCONFIG``/``$TXCONFIG`` names no file.
        tx.config.ConfigError: a file is not valid INI.
    """
    try:
        _files.find_configs(_tx_dirs(dirs))
    except _files.ConfigError as e:
        raise _env_file_missing(e) from None
    # an empty name (``[component:]``) is no section to TorchX
    return {k: v for k, v in _files.load_sections(prefix, _tx_dirs(dirs)).items() if k}


def get_configs(prefix: str, name: str, dirs: Optional[Iterable[str]] = None) -> Dict[str, str]:
    """TorchX's ``get_configs``: section ``[prefix:name]`` (see :func:`load_sections`)."""
    return load_sections(prefix, dirs).get(name, {})


def get_config(prefix: str, name: str, key: str, dirs: Optional[Iterable[str]] = None) -> Optional[str]:
    """TorchX's ``get_config``: ``key`` of section ``[prefix:name]``, None if unset."""
    return get_configs(prefix, name, dirs).get(key)


def _run_opts_of(scheduler: str) -> runopts:
    """The run options of scheduler ``scheduler`` of :func:`get_scheduler_factories`
    (created, as TorchX does).

    Raises:
        ValueError: no such scheduler (TorchX's error).
    """
    factories = get_scheduler_factories()
    if scheduler not in factories:
        raise ValueError(f"`{scheduler}` is not a registered scheduler. Valid scheduler names: "
                         f"{', '.join(sorted(factories))}")
    sched = factories[scheduler](session_name="_")
    try:
        return sched.run_opts()
    finally:
        close = getattr(sched, "close", None)
        if callable(close):
            close()


def apply(
    scheduler: str,
    cfg: MutableMapping[str, CfgVal],
    dirs: Optional[Iterable[str]] = None,
    *,
    opts: Optional[runopts] = None,
) -> MutableMapping[str, CfgVal]:
    """TorchX's ``apply(scheduler, cfg, dirs=None)``: fill keys missing from ``cfg`` from
    the ``[<scheduler>]`` section of the config files in effect (:func:`find_configs`),
    each :func:`load`-ed in turn, so the first file wins. A :class:`runopts` passed as
    ``dirs`` (tx before 0.1.0) is taken as ``opts``.

    Raises:
        FileNotFoundError: ``$TORCHXCONFIG``/``$TXCONFIG`` names no file.
        ValueError: without ``opts``, no such scheduler.
        tx.config.ConfigError: a bad value.
    """
    if isinstance(dirs, runopts):
        opts, dirs = dirs, None
    for path in find_configs(dirs):  # as TorchX: each file loaded in turn, the first winning
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        if opts is None:
            probe = configparser.ConfigParser(interpolation=None)
            probe.read_string(text)
            if not probe.has_section(scheduler):
                continue  # nothing to apply: no scheduler needs creating
            opts = _run_opts_of(scheduler)
        named = io.StringIO(text)
        named.name = path  # type: ignore[misc] - errors name the file
        load(scheduler, named, cfg, opts=opts)
    return cfg


def load(scheduler: str, f: IO[str], cfg: MutableMapping[str, CfgVal], *,
         opts: Optional[runopts] = None) -> MutableMapping[str, CfgVal]:
    """TorchX's ``load(scheduler, f, cfg)`` (:func:`tx.config.run_options.load`); as in
    TorchX, an option written ``None`` (what :func:`dump` writes for an option without a
    default) is put in ``cfg`` as None (tx's own ``load`` leaves it out), and a key that is
    no run option is ignored with a warning on stderr (tx's is an error).

    Raises:
        tx.config.ConfigError: unreadable INI text or a bad value.
        ValueError: without ``opts``, no such scheduler.
    """
    text = f.read()
    given = set(cfg)
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign] - keys as written
    parser.read_string(text)
    if not parser.has_section(scheduler):
        return cfg
    if opts is None:
        opts = _run_opts_of(scheduler)
    for key, raw in list(parser.items(scheduler)):
        if key in given:
            parser.remove_option(scheduler, key)
        elif raw.strip() == "None":  # what dump writes for an option without a default
            cfg[key] = None
            parser.remove_option(scheduler, key)
        elif opts.get(key) is None:
            print(f"torchx: warning: `{key} = {raw}` in the [{scheduler}] section of the config file is not a "
                  f"run option of `{scheduler}`; ignored, as TorchX does", file=sys.stderr)
            parser.remove_option(scheduler, key)
    kept = io.StringIO()
    parser.write(kept)
    kept.seek(0)
    kept.name = str(getattr(f, "name", "<config>"))  # type: ignore[misc] - errors name the file
    _run_options.load(scheduler, kept, cfg, opts)
    return cfg


def dump(f: IO[str], schedulers: Any = None, required_only: bool = False) -> None:
    """TorchX's ``dump(f, schedulers=None, required_only=False)``: ``schedulers`` names
    schedulers of :func:`get_scheduler_factories` (None: all of them; one whose SDK is
    missing is left out) or maps names to :class:`runopts` (:func:`tx.config.run_options.dump`).

    Raises:
        ValueError: a name that is not a scheduler.
    """
    if isinstance(schedulers, Mapping):
        _run_options.dump(f, schedulers, required_only)
        return
    opts = {}
    for name in (list(schedulers) if schedulers else list(get_scheduler_factories())):
        try:
            opts[name] = _run_opts_of(name)
        except ModuleNotFoundError:  # as TorchX: a scheduler whose SDK is missing is left out
            continue
    _run_options.dump(f, opts, required_only)

#: the variable naming the one config file to read (TorchX 0.7's name)
ENV_TORCHXCONFIG = "TORCHXCONFIG"
