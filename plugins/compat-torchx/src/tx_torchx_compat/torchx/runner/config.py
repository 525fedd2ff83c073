"""``torchx.runner.config``: tx's settings (:mod:`tx.config`) with TorchX 0.7's signatures.

TorchX's ``apply``, ``load`` and ``dump`` create the schedulers they need to learn their run
options; tx's (:mod:`tx.config.run_options`) take the options from the caller. Here the
scheduler is created through a :class:`tx.runner.Runner`, as TorchX does.
"""
import configparser
import io
from typing import IO, Any, Iterable, Mapping, MutableMapping, Optional

from tx.config import *  # noqa: F401,F403
from tx.config import default_config_dirs, scheduler_section
from tx.config import run_options as _run_options
from tx.config.torchx import convert_torchx_config, find_torchx_config  # noqa: F401
from tx.runner.api import Runner
from tx.schedulers.api import Scheduler, get_scheduler_factories  # noqa: F401
from tx.specs.runopts import CfgVal, runopt, runopts  # noqa: F401
from tx_torchx_compat.torchx.specs.api import get_type_name  # noqa: F401 - TorchX's naming

#: the separator of ``[prefix:name]`` section names
CONFIG_PREFIX_DELIM = ":"
#: the directories searched when ``dirs`` is not given, lowest precedence first (tx searches
#: the working directory's parents too; see docs/migrating-from-torchx.md)
DEFAULT_CONFIG_DIRS = default_config_dirs()


def _run_opts_of(scheduler: str) -> runopts:
    """The run options of installed scheduler ``scheduler`` (created, as TorchX does).

    Raises:
        UnknownSchedulerException: no such scheduler installed.
    """
    with Runner() as runner:
        return runner.scheduler_run_opts(scheduler)


def apply(
    scheduler: str,
    cfg: MutableMapping[str, CfgVal],
    dirs: Optional[Iterable[str]] = None,
    *,
    opts: Optional[runopts] = None,
) -> MutableMapping[str, CfgVal]:
    """TorchX's ``apply(scheduler, cfg, dirs=None)``: fill keys missing from ``cfg`` from
    the ``[<scheduler>]`` section of the config files in effect
    (:func:`tx.config.run_options.apply`). A :class:`runopts` passed as ``dirs`` (tx
    before 0.1.0) is taken as ``opts``.

    Raises:
        tx.config.ConfigError: a bad value or unknown key.
        UnknownSchedulerException: without ``opts``, no such scheduler is installed.
    """
    if isinstance(dirs, runopts):
        opts, dirs = dirs, None
    if opts is None and not scheduler_section(scheduler, dirs):
        return cfg  # nothing to apply: no scheduler needs creating
    return _run_options.apply(scheduler, cfg, opts if opts is not None else _run_opts_of(scheduler), dirs)


def load(scheduler: str, f: IO[str], cfg: MutableMapping[str, CfgVal], *,
         opts: Optional[runopts] = None) -> MutableMapping[str, CfgVal]:
    """TorchX's ``load(scheduler, f, cfg)`` (:func:`tx.config.run_options.load`); as in
    TorchX, an option written ``None`` (what :func:`dump` writes for an option without a
    default) is put in ``cfg`` as None (tx's own ``load`` leaves it out).

    Raises:
        tx.config.ConfigError: unreadable INI text, a bad value or an unknown key.
        UnknownSchedulerException: without ``opts``, no such scheduler is installed.
    """
    text = f.read()
    given = set(cfg)
    _run_options.load(scheduler, io.StringIO(text), cfg, opts if opts is not None else _run_opts_of(scheduler))
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(text)
    if parser.has_section(scheduler):
        for key, raw in parser.items(scheduler):
            if key not in given and key not in cfg and raw.strip() == "None":
                cfg[key] = None
    return cfg


def dump(f: IO[str], schedulers: Any = None, required_only: bool = False) -> None:
    """TorchX's ``dump(f, schedulers=None, required_only=False)``: ``schedulers`` names
    installed schedulers (None: all of them) or maps names to :class:`runopts`
    (:func:`tx.config.run_options.dump`).

    Raises:
        UnknownSchedulerException: a name that is not installed.
    """
    if isinstance(schedulers, Mapping):
        _run_options.dump(f, schedulers, required_only)
        return
    with Runner() as runner:
        names = list(schedulers) if schedulers is not None else runner.scheduler_backends()
        _run_options.dump(f, {n: runner.scheduler_run_opts(n) for n in names}, required_only)

#: the variable naming the one config file to read (TorchX 0.7's name)
ENV_TORCHXCONFIG = "TORCHXCONFIG"
