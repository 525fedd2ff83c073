"""``torchx.util.io``: TorchX 0.7.0's ``read_conf_file``."""
import os

__all__ = ["read_conf_file"]


def read_conf_file(conf_file: str) -> str:
    """The text of the file ``conf_file`` (a path, read as UTF-8).

    Raises:
        FileNotFoundError: there is no such file (tx ships no built-in configuration files
            for TorchX's ``torchx.file`` entry point to provide).
    """
    if not os.path.isfile(conf_file):
        raise FileNotFoundError(f"{conf_file} does not exist")
    with open(conf_file, encoding="utf-8") as f:
        return f.read()
