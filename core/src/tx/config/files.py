"""``.txconfig`` files: where they are found, how they are read, and their sections.

``.txconfig`` is an INI file with defaults for the CLI, run options and components.

The format is TorchX's ``.torchxconfig`` (https://pytorch.org/torchx/latest/runner.config.html)::

    [cli:run]                 # defaults for `tx run` flags
    scheduler = local_cwd
    component = dist.ddp

    [local_cwd]               # run options of a scheduler (typed by its runopts)
    log_dir = /tmp/tx-logs

    [component:dist.ddp]      # default component arguments
    j = 1x2

    [tx:tracker]              # the trackers jobs record to: one `name =` line each
    file =
    [tracker:file]            # a tracker's config (see tracker_configs)
    config = /shared/tx-runs

Files searched: ``$TXCONFIG`` alone when set (it must exist); else every ``.txconfig`` in
the working directory and its parents up to the filesystem root (as git finds its
repository), then ``~/.txconfig``. Where several set a key, the nearest file wins: the
working directory's over its parents', a project's over the user's (TorchX lets the home
file win; tx follows git and tox here). So a project's ``.txconfig`` at its root applies
from every subdirectory. Keys are case-sensitive. Explicit ``-cfg`` values win over all.

TorchX's files: ``$TORCHXCONFIG`` (after ``$TXCONFIG``) is honoured as ``$TXCONFIG`` is;
where no ``.txconfig`` is found, ``.torchxconfig`` files are found and merged the same way
(nearest wins, unlike TorchX, where ``~/.torchxconfig`` wins over the project's), and a
one-line notice says so. ``[torchx:tracker]`` is read as ``[tx:tracker]``.
``tx configure --from-torchx`` converts one (:func:`tx.config.torchx.convert_torchx_config`).

How a section's values become typed run options is :mod:`tx.config.run_options`; the
trackers' sections are read by :mod:`tx.config.trackers`.
"""
from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional

from tx.errors import UserError

if TYPE_CHECKING:
    import configparser

__all__ = [
    "CONFIG_FILE", "ENV_TORCHXCONFIG", "ENV_TXCONFIG", "TORCHX_CONFIG_FILE", "ConfigError",
    "default_config_dirs", "find_configs", "find_files", "get_config", "get_configs",
    "load_sections", "read_ini", "scheduler_section", "search_dirs",
]

CONFIG_FILE = ".txconfig"
ENV_TXCONFIG = "TXCONFIG"
#: TorchX's config file, read where no ``.txconfig`` is found (same sections and keys)
TORCHX_CONFIG_FILE = ".torchxconfig"
#: TorchX's variable naming its config file, honoured as ``TXCONFIG`` is (after it)
ENV_TORCHXCONFIG = "TORCHXCONFIG"


class ConfigError(UserError):
    """A ``.txconfig`` file cannot be read or has a bad value."""


def search_dirs(cwd: Optional[str] = None, home: Optional[str] = None) -> List[str]:
    """The directories searched for config files, nearest (highest precedence) first:
    ``cwd`` (default: the working directory) and each of its parents up to the filesystem
    root, then ``home`` (default ``~``) unless it was already on that path. Absolute paths,
    each once."""
    d = os.path.abspath(cwd if cwd is not None else os.getcwd())
    out: List[str] = []
    while True:
        out.append(d)
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    h = os.path.abspath(home if home is not None else os.path.expanduser("~"))
    if h not in out:
        out.append(h)
    return out


def default_config_dirs() -> List[str]:
    """The directories searched, lowest precedence first (``search_dirs()`` reversed):
    ``~``, then ``/`` down to the working directory."""
    return search_dirs()[::-1]


def find_files(name: str, dirs: Optional[Iterable[str]] = None) -> List[str]:
    """Files called ``name`` in ``dirs`` (default: ``default_config_dirs()``), lowest
    precedence first, each once. Used for ``.txconfig`` and other INI files found the same way."""
    found: List[str] = []
    for d in dirs if dirs is not None else default_config_dirs():
        path = os.path.abspath(os.path.join(d, name))
        if path not in found and os.path.isfile(path):
            found.append(path)
    return found


def find_configs(dirs: Optional[Iterable[str]] = None) -> List[str]:
    """The ``.txconfig`` files in effect, lowest precedence first (later files win key by
    key): ``$TXCONFIG`` alone when set, else those of ``dirs`` (default:
    ``default_config_dirs()``: home, then the filesystem root down to the working directory).

    Raises:
        ConfigError: ``$TXCONFIG`` names a file that does not exist.
    """
    env = os.environ.get(ENV_TXCONFIG)
    if env:
        if not os.path.isfile(env):
            raise ConfigError(f"{ENV_TXCONFIG}={env}: no such file")
        return [env]
    env = os.environ.get(ENV_TORCHXCONFIG)
    if env:
        if not os.path.isfile(env):
            raise ConfigError(f"{ENV_TORCHXCONFIG}={env}: no such file")
        _notice_torchx([env])
        return [env]
    found = find_files(CONFIG_FILE, dirs)
    if not found:
        found = find_files(TORCHX_CONFIG_FILE, dirs)
        if found:
            _notice_torchx(found)
    return found


_noticed: set = set()


def _notice_torchx(paths: List[str]) -> None:
    """Say once per process, in one line on stderr, that TorchX config files are read."""
    key = tuple(paths)
    if key in _noticed:
        return
    _noticed.add(key)
    print(f"tx: no {CONFIG_FILE} found; reading TorchX's {', '.join(paths)} "
          "(`tx configure --from-torchx` converts it)", file=sys.stderr)


class _NoConfig:
    """Stands in for a ConfigParser when no config file exists."""

    def sections(self) -> List[str]:
        return []

    def has_section(self, _name: str) -> bool:
        return False


def new_parser() -> "configparser.ConfigParser":
    """An empty parser as tx reads INI files: no interpolation, case-sensitive keys."""
    import configparser  # deferred: configparser only when a config file exists (the cold run path has none)

    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # type: ignore[assignment, method-assign]
    return parser


def read_ini(text_or_file: Any, where: str) -> "configparser.ConfigParser":
    """Parse INI text (a string, or a file object) as tx does.

    Raises:
        ConfigError: not valid INI (the first line of the parser's message, with ``where``).
    """
    import configparser  # deferred: configparser only when a config file exists

    parser = new_parser()
    try:
        if isinstance(text_or_file, str):
            parser.read_string(text_or_file, source=where)
        else:
            parser.read_file(text_or_file, source=where)
    except configparser.Error as e:
        raise ConfigError(f"{where}: {str(e).splitlines()[0]}") from None
    return parser


def _read(paths: List[str]) -> Any:
    if not paths:
        return _NoConfig()
    import configparser  # deferred: configparser only when a config file exists

    parser = new_parser()
    for p in paths:
        try:
            with open(p, "rb") as fb:
                data = fb.read()
            parser.read_string(data.decode("utf-8"), source=p)
        except UnicodeDecodeError as e:
            line = data.count(b"\n", 0, e.start) + 1
            raise ConfigError(
                f"{p}: not UTF-8 text (byte 0x{data[e.start]:02x} on line {line}, offset {e.start}); save it as UTF-8"
            ) from None
        except (OSError, configparser.Error) as e:
            raise ConfigError(f"{p}: {str(e).splitlines()[0]}") from None
    # TorchX's tracker section, as tx names it (a [tx:tracker] of the same files wins)
    if parser.has_section("torchx:tracker") and not parser.has_section("tx:tracker"):
        parser.add_section("tx:tracker")
        for key, value in parser.items("torchx:tracker"):
            parser.set("tx:tracker", key, value)
    return parser


_cache: Dict[tuple, Any] = {}


def _parser(dirs: Optional[Iterable[str]]) -> Any:
    paths = find_configs(dirs)
    key = tuple((p, os.stat(p).st_mtime_ns) for p in paths)
    if key not in _cache:
        _cache[key] = _read(paths)
    return _cache[key]


def load_sections(prefix: str, dirs: Optional[Iterable[str]] = None) -> Dict[str, Dict[str, str]]:
    """Sections named ``<prefix>:<name>`` as ``{name: {key: value}}``."""
    parser = _parser(dirs)
    out: Dict[str, Dict[str, str]] = {}
    for section in parser.sections():
        p, sep, name = section.partition(":")
        if sep and p == prefix:
            out[name] = dict(parser.items(section))
    return out


def get_configs(prefix: str, name: str, dirs: Optional[Iterable[str]] = None) -> Dict[str, str]:
    """Keys of section ``[<prefix>:<name>]`` (empty when absent)."""
    return load_sections(prefix, dirs).get(name, {})


def get_config(prefix: str, name: str, key: str, dirs: Optional[Iterable[str]] = None) -> Optional[str]:
    """One value of section ``[<prefix>:<name>]``, or None."""
    return get_configs(prefix, name, dirs).get(key)


def scheduler_section(scheduler: str, dirs: Optional[Iterable[str]] = None) -> Dict[str, str]:
    """The raw ``[<scheduler>]`` section."""
    parser = _parser(dirs)
    return dict(parser.items(scheduler)) if parser.has_section(scheduler) else {}


