"""``torchx.components.component_test_base``: TorchX 0.7.0's ``ComponentTestCase`` (a
TestCase with helpers to check and run a component), written for tx-torchx-compat from
TorchX's documented behaviour."""
import inspect
import os
import shutil
import tempfile
import time
import unittest
from types import ModuleType
from typing import Any, Callable, Dict, Optional

from tx.components.system.builders import create_args_parser
from tx.components.system.finder import get_component
from tx.runner.api import get_runner
from tx.specs.api import AppDef
from tx.specs.status import AppStatus

__all__ = ["ComponentTestCase"]


class ComponentTestCase(unittest.TestCase):
    """A TestCase for component functions::

        class MyComponentTest(ComponentTestCase):
            def test_my_comp(self):
                self.validate(my_components, "train")

    ``self.test_dir`` is a fresh temporary directory per test.
    """

    def setUp(self) -> None:
        self.test_dir = tempfile.mkdtemp("torchx_component_test")
        self.old_cwd = os.getcwd()

    def tearDown(self) -> None:
        shutil.rmtree(self.test_dir, ignore_errors=True)
        os.chdir(self.old_cwd)

    def validate(self, module: ModuleType, function_name: str) -> None:
        """Check ``module.function_name`` as ``torchx run FILE.py:FN --help`` would: it
        loads as a component from its file and its parser prints the help (SystemExit).
        A component that does not follow the rules fails the test. The file is the one
        that defines the function (a ``torchx.components`` module of tx-torchx-compat only
        re-exports or wraps tx's: a wrapper made with ``functools.wraps`` is followed)."""
        fn = inspect.unwrap(getattr(module, function_name))
        path = os.path.abspath(inspect.getsourcefile(fn) or module.__file__ or "")
        component = get_component(f"{path}:{function_name}")
        with self.assertRaises(SystemExit):
            create_args_parser(component.fn).parse_args(["--help"])

    def run_component(
        self,
        component: Callable[..., AppDef],
        args: Optional[Dict[str, Any]] = None,
        scheduler_params: Optional[Dict[str, Any]] = None,
        scheduler: str = "local_cwd",
        interval: float = 0.1,
        timeout: float = 1,
    ) -> Optional[AppStatus]:
        """Build ``component(**args)``, run it on ``scheduler`` and poll its status every
        ``interval`` seconds until it is terminal and at least ``timeout`` seconds have
        passed; returns the last status (None once the scheduler forgot the app)."""
        app = component(**(args or {}))
        with get_runner(**(scheduler_params or {})) as runner:
            handle = runner.run(app, scheduler)
            elapsed = 0.0
            status = runner.status(handle)
            while (status is not None and not status.is_terminal()) or elapsed < timeout:
                time.sleep(interval)
                elapsed += interval
                status = runner.status(handle)
            return status
