"""``.txconfig``: INI files with defaults for the CLI, run options and components.

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
``tx configure --from-torchx`` converts one (:func:`convert_torchx_config`).
"""
from __future__ import annotations

from tx.errors import UserError

import os
from typing import IO, Any, Dict, Iterable, List, Mapping, MutableMapping, Optional

from tx.specs.runopts import CfgVal, runopts

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
    import sys

    print(f"tx: no {CONFIG_FILE} found; reading TorchX's {', '.join(paths)} "
          "(`tx configure --from-torchx` converts it)", file=sys.stderr)


class _NoConfig:
    """Stands in for a ConfigParser when no config file exists (skips importing configparser)."""

    def sections(self) -> List[str]:
        return []

    def has_section(self, _name: str) -> bool:
        return False


def _read(paths: List[str]) -> Any:
    if not paths:
        return _NoConfig()
    import configparser

    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # type: ignore[assignment, method-assign]  # case-sensitive keys
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


def _run_opts_of(scheduler: str) -> runopts:
    """The run options of installed scheduler ``scheduler`` (the scheduler is created, as
    TorchX's config functions create it).

    Raises:
        UnknownSchedulerException: no such scheduler installed.
    """
    from tx.runner.api import Runner

    with Runner() as runner:
        return runner.scheduler_run_opts(scheduler)


def _apply_section(
    scheduler: str, section: Mapping[str, str], cfg: MutableMapping[str, CfgVal], opts: runopts, where: str
) -> None:
    for key, raw in section.items():
        if key in cfg:
            continue
        opt = opts.get(key)
        if opt is None:
            raise ConfigError(
                f"[{scheduler}] in {where}: unknown run option {key!r}{opts.suggest(key)}"
            )
        if raw.strip() == "None":
            continue
        try:
            cfg[key] = opt.cast_to_type(raw)
        except ValueError as e:
            raise ConfigError(f"[{scheduler}] {key} in {where}: {e}") from None


def apply(
    scheduler: str,
    cfg: MutableMapping[str, CfgVal],
    dirs_or_opts: Any = None,
    dirs: Optional[Iterable[str]] = None,
    *,
    opts: Optional[runopts] = None,
) -> MutableMapping[str, CfgVal]:
    """Fill keys missing from ``cfg`` from the ``[<scheduler>]`` section of the config
    files in effect (:func:`find_configs`), typed by the scheduler's run options; ``None``
    in the file means unset. Returns ``cfg`` (modified in place).

    TorchX's signature: ``apply(scheduler, cfg, dirs=None)``, ``dirs`` positional or by
    keyword. ``opts`` (keyword) gives the run options; without it the scheduler is created
    to ask for them. A :class:`runopts` in third position is taken as ``opts`` (the order
    of tx before 0.1.0's TorchX signatures).

    Raises:
        ConfigError: a value that does not parse as its option's type, or an unknown key.
        UnknownSchedulerException: without ``opts``, no such scheduler is installed.
        TypeError: directories given both positionally and by keyword.
    """
    if isinstance(dirs_or_opts, runopts):
        opts = dirs_or_opts
    elif dirs_or_opts is not None:
        if dirs is not None:
            raise TypeError("apply() got dirs both positionally and by keyword")
        dirs = dirs_or_opts
    section = scheduler_section(scheduler, dirs)
    if section:
        _apply_section(scheduler, section, cfg, opts if opts is not None else _run_opts_of(scheduler),
                       CONFIG_FILE)
    return cfg


def load(
    scheduler: str, f: IO[str], cfg: MutableMapping[str, CfgVal], *, opts: Optional[runopts] = None
) -> MutableMapping[str, CfgVal]:
    """TorchX's ``load(scheduler, f, cfg)``: fill keys missing from ``cfg`` from the
    ``[<scheduler>]`` section of the INI text in file object ``f``. Returns ``cfg``.

    Raises:
        ConfigError: unreadable INI text, a value of the wrong type, or an unknown key.
        UnknownSchedulerException: without ``opts``, no such scheduler is installed.
    """
    import configparser

    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # type: ignore[assignment, method-assign]
    where = getattr(f, "name", "<config>")
    try:
        parser.read_file(f, source=str(where))
    except configparser.Error as e:
        raise ConfigError(f"{where}: {str(e).splitlines()[0]}") from None
    if parser.has_section(scheduler):
        _apply_section(scheduler, dict(parser.items(scheduler)), cfg,
                       opts if opts is not None else _run_opts_of(scheduler), str(where))
    return cfg


def dump(
    f: IO[str],
    schedulers: Any = None,
    required_only: bool = False,
) -> None:
    """Write a ``.txconfig`` template: one section per scheduler; required options as
    ``#FIXME`` placeholders, optional ones (unless ``required_only``) with their defaults.

    Args:
        f: where to write.
        schedulers: TorchX's ``schedulers``: scheduler names (None: every installed
            scheduler), or a mapping of name -> :class:`runopts`.
        required_only: only the required options.

    Raises:
        UnknownSchedulerException: a name that is not installed.
    """
    from tx.specs.runopts import get_type_name

    if isinstance(schedulers, Mapping):
        scheduler_opts: Mapping[str, runopts] = schedulers
    else:
        from tx.runner.api import Runner

        with Runner() as runner:
            names = list(schedulers) if schedulers is not None else runner.scheduler_backends()
            scheduler_opts = {n: runner.scheduler_run_opts(n) for n in names}
    for name, opts in scheduler_opts.items():
        lines = []
        for key, opt in opts:
            if opt.is_required:
                lines.append(f"{key} = #FIXME: ({get_type_name(opt.opt_type)}) {opt.help[:60]}")
            elif not required_only:
                d = opt.default
                if isinstance(d, list):
                    d = ";".join(d)
                elif isinstance(d, dict):
                    d = ";".join(f"{k}:{v}" for k, v in d.items())
                lines.append(f"{key} = {d}")
        if lines or not required_only:
            f.write(f"[{name}]\n" + "".join(line + "\n" for line in lines) + "\n")


#: ``[cli:gc] keep``: how long ``tx gc`` (and ``tx run`` on the local schedulers) keep
#: finished apps' state and logs, e.g. ``7d``, ``12h``, ``30m``, ``3600`` (seconds)
GC_SECTION = ("cli", "gc")
GC_KEEP = "keep"


def parse_duration(text: str) -> float:
    """Seconds in ``text``: a number with an optional unit ``s``, ``m``, ``h``, ``d`` or
    ``w`` (``90``, ``90s``, ``30m``, ``12h``, ``7d``, ``2w``).

    Raises:
        ValueError: not a non-negative number with one of those units (message for users).
    """
    import re

    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", str(text))
    if not m:
        raise ValueError(f"bad duration {text!r}: use a number and a unit s, m, h, d or w (e.g. 7d, 12h)")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[m.group(2)]


def _default_text(d: Any) -> str:
    if isinstance(d, list):
        return ";".join(map(str, d))
    if isinstance(d, dict):
        return ";".join(f"{k}:{v}" for k, v in d.items())
    return "" if d is None else str(d)


def template(f: IO[str], scheduler_opts: Mapping[str, runopts]) -> None:
    """Write a commented ``.txconfig`` template (``tx configure``): where tx looks for the
    file, the ``[cli:run]``, ``[cli:gc]`` and ``[component:*]`` sections, then one section
    per scheduler with every run option commented out: its type, whether it is required,
    its help and its default. Uncommenting a line sets the option; the file parses as is."""
    from tx.specs.runopts import get_type_name

    f.write(
        "# tx configuration, written by `tx configure`. tx reads .txconfig in the working\n"
        "# directory and in each parent directory (the nearest file wins, key by key), then\n"
        "# ~/.txconfig; $TXCONFIG names one file instead. -cfg on the command line wins over all.\n"
        "# Lines starting with # are comments: uncomment a line to set it.\n\n"
        "[cli:run]\n"
        "# scheduler of `tx run` and `tx list` when -s is not given\n"
        "# scheduler = local_cwd\n"
        "# component of `tx run` when none is named\n"
        "# component = dist.ddp\n"
        "# directory patched into the first role's image (--workspace)\n"
        "# workspace = .\n\n"
        "[cli:gc]\n"
        "# how long finished apps' state and logs are kept (`tx gc`; the local schedulers also\n"
        "# prune when `tx run` ends): a number and a unit s, m, h, d or w\n"
        f"# {GC_KEEP} = 7d\n\n"
        "# default arguments of a component, as on the command line (without --):\n"
        "# [component:dist.ddp]\n"
        "# j = 1x2\n\n"
    )
    for name, opts in scheduler_opts.items():
        f.write(f"[{name}]\n")
        for key, opt in opts:
            kind = get_type_name(opt.opt_type)
            req = "required" if opt.is_required else f"default: {_default_text(opt.default) or 'unset'}"
            help_text = " ".join(str(opt.help).split())
            f.write(f"# {key} ({kind}, {req}): {help_text}\n")
            f.write(f"# {key} = {_default_text(opt.default)}".rstrip() + "\n")
        f.write("\n")


def find_torchx_config(path: Optional[str] = None) -> str:
    """The TorchX config file ``tx configure --from-torchx`` converts: ``path``, else
    ``$TORCHXCONFIG``, else the nearest ``.torchxconfig`` (the working directory, its
    parents, then home).

    Raises:
        ConfigError: the file does not exist, or none is found.
    """
    path = path or os.environ.get(ENV_TORCHXCONFIG)
    if path:
        if not os.path.isfile(path):
            raise ConfigError(f"{path}: no such file")
        return path
    for d in search_dirs():
        candidate = os.path.join(d, TORCHX_CONFIG_FILE)
        if os.path.isfile(candidate):
            return candidate
    raise ConfigError(f"no {TORCHX_CONFIG_FILE} in the working directory, its parents or ~")


def convert_torchx_config(text: str) -> str:
    """A ``.txconfig`` from the text of a TorchX ``.torchxconfig``, line by line (comments
    and layout kept): ``[torchx:tracker]`` becomes ``[tx:tracker]``; a ``[component:]``
    section with an empty component name (meaningless to both) is dropped with its keys;
    every other section and key is the same in both formats.

    Raises:
        ConfigError: the text is not valid INI.
    """
    import configparser

    check = configparser.ConfigParser(interpolation=None)
    try:
        check.read_string(text)
    except configparser.Error as e:
        raise ConfigError(f"{TORCHX_CONFIG_FILE}: {str(e).splitlines()[0]}") from None
    out: List[str] = []
    skipping = False
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if stripped.startswith("[") and "]" in stripped:
            name = stripped[1:stripped.index("]")].strip()
            prefix, sep, rest = name.partition(":")
            skipping = prefix == "component" and sep and not rest.strip()
            if name == "torchx:tracker":
                line = line.replace("torchx:tracker", "tx:tracker", 1)
        if not skipping:
            out.append(line)
    return "".join(out)


def tracker_configs(dirs: Optional[Iterable[str]] = None) -> Dict[str, Optional[str]]:
    """The trackers ``.txconfig`` configures, as TorchX's ``[torchx:tracker]`` does::

        [tx:tracker]
        file =                      # names of the trackers to use (values are not used)
        mlflow =

        [tracker:file]
        config = /shared/tx-runs    # passed to the tracker's factory (meaning is its own)

    Returns:
        ``{name: config or None}`` in the order of ``[tx:tracker]``; ``{}`` without it.

    Raises:
        ConfigError: a config file cannot be read.
    """
    names = get_configs("tx", "tracker", dirs)
    sections = load_sections("tracker", dirs) if names else {}
    return {name: (sections.get(name, {}).get("config") or None) for name in names}


def configured_trackers(
    dirs: Optional[Iterable[str]] = None, environ: Optional[Mapping[str, str]] = None
) -> Dict[str, Optional[str]]:
    """The trackers in effect (:func:`tx.tracker.get_configured_trackers`): names from
    ``TX_TRACKERS`` (comma separated; set but empty means none) when set, else from
    :func:`tracker_configs`; each config from ``TX_TRACKER_<NAME>_CONFIG`` when set, else
    the file's. TorchX's ``TORCHX_TRACKERS`` / ``TORCHX_TRACKER_<NAME>_CONFIG`` are read
    where the ``TX_*`` variables are unset.

    Returns:
        ``{name: config or None}``, in order.

    Raises:
        ConfigError: a config file cannot be read.
    """
    from tx.schedulers.env import TRACKERS, torchx_name, tracker_config_var

    env = os.environ if environ is None else environ

    def get(var: str) -> Optional[str]:
        if var in env:
            return env[var]
        alias = torchx_name(var)
        return env.get(alias) if alias else None

    names_env = get(TRACKERS)
    if names_env is not None:
        names = [n.strip() for n in names_env.split(",") if n.strip()]
        sections = load_sections("tracker", dirs) if names else {}
        out = {n: (sections.get(n, {}).get("config") or None) for n in names}
    else:
        out = tracker_configs(dirs)
    for name in out:
        value = get(tracker_config_var(name))
        if value:
            out[name] = value
    return out
