"""``torchx.runner.config``: :mod:`tx.runner.config` (``apply``, ``load``, ``dump``,
``find_configs`` ... with TorchX 0.7's signatures)."""
from tx.runner.config import *  # noqa: F401,F403
from tx.runner.config import default_config_dirs
from tx.schedulers.api import Scheduler, get_scheduler_factories  # noqa: F401
from tx.specs.runopts import CfgVal, get_type_name, runopt  # noqa: F401

#: the separator of ``[prefix:name]`` section names
CONFIG_PREFIX_DELIM = ":"
#: the directories searched when ``dirs`` is not given, lowest precedence first (tx searches
#: the working directory's parents too; see docs/migrating-from-torchx.md)
DEFAULT_CONFIG_DIRS = default_config_dirs()
