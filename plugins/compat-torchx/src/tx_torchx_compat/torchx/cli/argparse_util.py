"""``torchx.cli.argparse_util``: TorchX 0.7.0's argparse actions for CLI subcommands
(custom ``torchx.cli.cmds`` plugins use them): ``torchxconfig`` takes an argument's default
from the ``[cli:<subcmd>]`` section of ``.torchxconfig``, ``torchxconfig_run`` is that for
``run``, and ``ArgOnceAction`` refuses an option given twice. Behaviour as TorchX's
(https://github.com/pytorch/torchx/blob/v0.7.0/torchx/cli/argparse_util.py): an option given
twice logs an error and exits 1; a default found in the config file makes the argument not
required."""
import argparse
import logging
import sys
from typing import Any, Dict, Optional, Sequence, Set

from tx_torchx_compat.torchx.runner import config

__all__ = ["ArgOnceAction", "torchxconfig", "torchxconfig_run"]

logger: logging.Logger = logging.getLogger(__name__)


def _once(called: Set[str], option_string: Optional[str]) -> None:
    """Exit 1 (after logging an error) when ``option_string`` was seen before."""
    if option_string is None:
        return
    if option_string in called:
        logger.error(f"{option_string} is specified more than once")
        sys.exit(1)
    called.add(option_string)


class torchxconfig(argparse.Action):  # noqa: N801 - TorchX's name
    """An action whose default comes from ``[cli:<subcmd>]`` of ``.torchxconfig``.

    Args:
        subcmd: the subcommand whose section is read from the ``.torchxconfig`` files in
            ``torchx.runner.config.DEFAULT_CONFIG_DIRS`` (once per process, cached in
            ``_subcmd_configs``).
        dest, option_strings, required, default, kwargs: as :class:`argparse.Action`; a
            value in the section for ``dest`` replaces ``default`` and makes the argument
            not required.

    Raises:
        SystemExit: (code 1, when parsing) the same option string is given twice.
    """

    #: option strings seen so far (class-wide, as TorchX's)
    called_args: Set[str] = set()
    #: ``[cli:<subcmd>]`` sections read so far, by subcommand
    _subcmd_configs: Dict[str, Dict[str, str]] = {}

    def __init__(self, subcmd: str, dest: str, option_strings: Sequence[str], required: bool = False,
                 default: Any = None, **kwargs: Any) -> None:
        if subcmd not in self._subcmd_configs:
            # read at call time: TorchX's tests and users patch config.DEFAULT_CONFIG_DIRS
            self._subcmd_configs[subcmd] = config.get_configs(prefix="cli", name=subcmd,
                                                              dirs=config.DEFAULT_CONFIG_DIRS)
        default = self._subcmd_configs[subcmd].get(dest, default)
        super().__init__(option_strings=option_strings, dest=dest, default=default,
                         required=False if default else required, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: Optional[str] = None) -> None:
        _once(self.called_args, option_string)
        setattr(namespace, self.dest, values)


class torchxconfig_run(torchxconfig):  # noqa: N801 - TorchX's name
    """:class:`torchxconfig` for the ``run`` subcommand (section ``[cli:run]``)."""

    def __init__(self, dest: str, option_strings: Sequence[str], required: bool = False,
                 default: Any = None, **kwargs: Any) -> None:
        super().__init__("run", dest=dest, option_strings=option_strings, required=required,
                         default=default, **kwargs)


class ArgOnceAction(argparse.Action):
    """Stores the value; an option string given twice logs an error and exits 1.

    Raises:
        SystemExit: (code 1, when parsing) the same option string is given twice.
    """

    #: option strings seen so far (class-wide, as TorchX's)
    called_args: Set[str] = set()

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: Optional[str] = None) -> None:
        _once(self.called_args, option_string)
        setattr(namespace, self.dest, values)
