"""TorchX's entry-point groups, registered with tx's plugin registry."""
from typing import Any

COMPONENTS = '''
import torchx.specs as specs


def train(epochs: int = 1) -> specs.AppDef:
    """Trains ACME's model.

    Args:
        epochs: passes over the data
    """
    return specs.AppDef("train", [specs.Role("trainer", image="img", entrypoint="echo", args=[str(epochs)])])
'''


def test_components_named_resources_and_trackers(py: Any, install: Any) -> None:
    install(
        "acme-torchx-plugins", "2.1",
        {"acme_components.py": COMPONENTS,
         "acme_res.py": "from torchx.specs import Resource\n\ndef big():\n    return Resource(cpu=64, gpu=8, memMB=1024)\n",
         "acme_tracker.py": "def create(config=None):\n    return config\n"},
        "[torchx.components]\nacme = acme_components\n\n"
        "[torchx.named_resources]\nacme_big = acme_res:big\n\n"
        "[torchx.tracker]\nacme_db = acme_tracker:create\n",
    )
    builtins = py("builtins", tx=True)
    assert builtins.returncode == 0, builtins.stderr
    assert "acme.train" in builtins.stdout, builtins.stdout
    dry = py("run", "--dryrun", "-s", "local_cwd", "acme.train", "--epochs", "5", tx=True)
    assert dry.returncode == 0, dry.stderr
    assert "  entrypoint: echo\n  args:\n  - '5'\n" in dry.stdout, dry.stdout
    p = py("from tx.plugins import get_registry\n"
           "from tx.specs import named_resources\n"
           "reg = get_registry()\n"
           "print(named_resources['acme_big'].gpu, reg.get('trackers', 'acme_db').load()('cfg'),"
           " reg.get('named_resources', 'acme_big').description)")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split()[:2] == ["8", "cfg"]
    assert "acme-torchx-plugins 2.1, TorchX entry point torchx.named_resources" in p.stdout
    plugins = py("plugins", tx=True)
    assert plugins.returncode == 0, plugins.stderr
    assert "acme_big" in plugins.stdout and "acme_db" in plugins.stdout, plugins.stdout


def test_scheduler_that_is_not_a_tx_scheduler_is_a_clear_error(py: Any, install: Any) -> None:
    install("odd-sched", "0.1", {"odd_sched.py": "def create_scheduler(session_name, **kw):\n    return object()\n"},
            "[torchx.schedulers]\nodd = odd_sched:create_scheduler\n")
    p = py("status", "odd://sess/app-1", tx=True)
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert "is not a scheduler tx can run" in p.stderr, p.stderr
