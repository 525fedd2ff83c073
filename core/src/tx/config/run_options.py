"""Run options from settings: a scheduler's ``[<scheduler>]`` section of ``.txconfig`` and
``TX_<OPTION>`` environment variables, typed by the scheduler's :class:`~tx.specs.runopts`;
and the ``.txconfig`` templates ``tx configure`` writes.

Every function takes the scheduler's run options; none creates a scheduler (the Runner
and the CLI, which can, pass them). Explicit values always win: keys already in ``cfg``
are left as they are.
"""
from __future__ import annotations

import os
from typing import IO, Any, Iterable, Mapping, MutableMapping, Optional

from tx.config.files import CONFIG_FILE, ConfigError, read_ini, scheduler_section
from tx.config.gc import GC_KEEP
from tx.specs.api import InvalidRunConfigException
from tx.specs.runopts import CfgVal, get_type_name, runopts

__all__ = ["ENV_RUN_OPT_PREFIXES", "apply", "dump", "env_run_opts", "load", "template"]

#: prefixes of environment variables that set run options, highest precedence first
ENV_RUN_OPT_PREFIXES = ("TX_", "TORCHX_")


#: keys of a scheduler's section that are not run options: its call budget and status plane
#: (:mod:`tx.schedulers.budget`, :mod:`tx.schedulers.plane`)
PLANE_KEYS = ("max_calls_per_minute", "max_call_burst", "status_max_age_s")


def _apply_section(
    scheduler: str, section: Mapping[str, str], cfg: MutableMapping[str, CfgVal], opts: runopts, where: str
) -> None:
    for key, raw in section.items():
        if key in cfg or key in PLANE_KEYS:
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
    opts: runopts,
    dirs: Optional[Iterable[str]] = None,
) -> MutableMapping[str, CfgVal]:
    """Fill keys missing from ``cfg`` from the ``[<scheduler>]`` section of the config
    files in effect (:func:`tx.config.find_configs`), typed by ``opts``; ``None`` in the
    file means unset. Returns ``cfg`` (modified in place).

    (TorchX's ``apply(scheduler, cfg, dirs=None)``, which creates the scheduler to learn
    its options, is ``torchx.runner.config.apply`` in tx-torchx-compat.)

    Raises:
        ConfigError: a value that does not parse as its option's type, or an unknown key.
    """
    section = scheduler_section(scheduler, dirs)
    if section:
        _apply_section(scheduler, section, cfg, opts, CONFIG_FILE)
    return cfg


def load(scheduler: str, f: IO[str], cfg: MutableMapping[str, CfgVal], opts: runopts) -> MutableMapping[str, CfgVal]:
    """Fill keys missing from ``cfg`` from the ``[<scheduler>]`` section of the INI text in
    file object ``f``, typed by ``opts``. Returns ``cfg``.

    Raises:
        ConfigError: unreadable INI text, a value of the wrong type, or an unknown key.
    """
    where = str(getattr(f, "name", "<config>"))
    parser = read_ini(f, where)
    if parser.has_section(scheduler):
        _apply_section(scheduler, dict(parser.items(scheduler)), cfg, opts, where)
    return cfg


def env_run_opts(scheduler: str, opts: runopts, cfg: MutableMapping[str, Any],
                 environ: Optional[Mapping[str, str]] = None) -> MutableMapping[str, Any]:
    """``cfg`` plus the options of ``opts`` it lacks that ``TX_<KEY>`` or ``TORCHX_<KEY>``
    (in that order) sets in ``environ`` (default ``os.environ``). Returns ``cfg`` (modified).

    Raises:
        tx.specs.InvalidRunConfigException: a variable's value is not of its option's type.
    """
    env = os.environ if environ is None else environ
    for key, opt in opts:
        if key in cfg:
            continue
        suffix = key.upper().replace("-", "_")
        for prefix in ENV_RUN_OPT_PREFIXES:
            raw = env.get(prefix + suffix)
            if raw is None:
                continue
            try:
                cfg[key] = opt.cast_to_type(raw)
            except ValueError as e:
                raise InvalidRunConfigException(
                    f"{prefix}{suffix}={raw!r}: run option {key!r} of {scheduler}: {e}", key, cfg
                ) from None
            break
    return cfg


def _default_text(d: Any) -> str:
    if isinstance(d, list):
        return ";".join(map(str, d))
    if isinstance(d, dict):
        return ";".join(f"{k}:{v}" for k, v in d.items())
    return "" if d is None else str(d)


def dump(f: IO[str], scheduler_opts: Mapping[str, runopts], required_only: bool = False) -> None:
    """Write a ``.txconfig`` of one section per scheduler (TorchX's ``dump`` layout):
    required options as ``#FIXME`` placeholders (the value TorchX writes), optional ones
    (unless ``required_only``) with their defaults.

    Args:
        f: where to write.
        scheduler_opts: scheduler name -> its run options.
        required_only: only the required options.
    """
    for name, opts in scheduler_opts.items():
        lines = []
        for key, opt in opts:
            if opt.is_required:
                lines.append(f"{key} = #FIXME: ({get_type_name(opt.opt_type)}) {opt.help[:60]}")
            elif not required_only:
                lines.append(f"{key} = {_default_text(opt.default)}" if opt.default is not None else f"{key} = None")
        if lines or not required_only:
            f.write(f"[{name}]\n" + "".join(line + "\n" for line in lines) + "\n")


def template(f: IO[str], scheduler_opts: Mapping[str, runopts]) -> None:
    """Write a commented ``.txconfig`` template (``tx configure``): where tx looks for the
    file, the ``[cli:run]``, ``[cli:gc]`` and ``[component:*]`` sections, then one section
    per scheduler with every run option commented out: its type, whether it is required,
    its help and its default. Uncommenting a line sets the option; the file parses as is."""
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
