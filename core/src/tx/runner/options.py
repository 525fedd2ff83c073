"""Run options, merged once per hop: what the caller gave (``-cfg`` text or an API dict),
then the scheduler's section of ``.txconfig`` (:func:`tx.config.run_options.apply`), then
``TX_<OPTION>`` / ``TORCHX_<OPTION>`` (:func:`tx.config.run_options.env_run_opts`); the first
that sets a key wins.

The ``tx`` command and the Python API call the same :func:`merge`, so that a
``Runner.dryrun`` from Python, ``tx run`` and a fallback hop of a run see the same options
for the same inputs. The scheduler's own ``runopts.resolve`` (defaults, required options,
types) is the only other touch, in the scheduler's dryrun.
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, Mapping, Optional, Sequence, Union

from tx.config.run_options import apply, env_run_opts
from tx.specs.api import InvalidRunConfigException
from tx.specs.runopts import CfgVal, runopts

__all__ = ["check_known", "merge", "parse_texts"]


def parse_texts(scheduler: str, opts: runopts, texts: Sequence[str], strict: bool = True) -> Dict[str, CfgVal]:
    """The options of ``-cfg`` texts (``k1=v1,k2=v2``; several ``-cfg`` add up), typed by
    ``opts``.

    Args:
        scheduler: the scheduler's name (for messages).
        opts: its run options.
        texts: the ``-cfg`` texts.
        strict: reject a key that is not an option (False: drop it, as TorchX 0.7 does).

    Raises:
        tx.specs.InvalidRunConfigException: malformed text, an unknown key (``strict``), a
            value of the wrong type, or a key given in two texts.
    """
    cfg: Dict[str, CfgVal] = {}
    for text in texts:
        parsed = opts.cfg_from_str(text, strict=strict)
        twice = sorted(set(parsed) & set(cfg))
        if twice:
            raise InvalidRunConfigException(f"bad run config: {twice[0]!r} is given twice in -cfg", twice[0], text)
        cfg.update(parsed)
    return cfg


def check_known(scheduler: str, opts: runopts, cfg: Mapping[str, Any]) -> None:
    """Raise InvalidRunConfigException for the first key of ``cfg`` that is not one of
    ``opts``, with the CLI's words (``unknown run option 'log_dri' of local_cwd (did you
    mean 'log_dir'?)``)."""
    for key in cfg:
        if key not in opts:
            known = ", ".join(k for k, _ in opts) or "none"
            raise InvalidRunConfigException(
                f"unknown run option {key!r} of {scheduler}{opts.suggest(key)}; options: {known}", key, dict(cfg))


def merge(scheduler: str, opts: runopts, given: Union[None, Mapping[str, Any], Sequence[str]] = None,
          environ: Optional[Mapping[str, str]] = None, dirs: Optional[Iterable[str]] = None) -> Dict[str, Any]:
    """The run options of one hop on ``scheduler``: ``given`` (a dict, or ``-cfg`` texts),
    then ``.txconfig``'s ``[<scheduler>]`` section (from ``dirs``, default the config files
    in effect), then ``TX_<KEY>`` / ``TORCHX_<KEY>`` of ``environ`` (default
    ``os.environ``); a key set earlier wins. A new dict; ``given`` is not modified.

    Raises:
        tx.specs.InvalidRunConfigException: a key of ``given`` is not an option, a text
            does not parse, or a variable's value is not of its option's type.
        tx.config.ConfigError: the config file's section has an unknown key or a bad value.
    """
    if given is None:
        cfg: Dict[str, Any] = {}
    elif isinstance(given, Mapping):
        check_known(scheduler, opts, given)
        cfg = dict(given)
    else:
        cfg = dict(parse_texts(scheduler, opts, [given] if isinstance(given, str) else list(given)))
    apply(scheduler, cfg, opts, dirs)
    return dict(env_run_opts(scheduler, opts, cfg, environ))
