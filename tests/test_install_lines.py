"""Every install line of every README and doc works as typed from a clone (at its root): it
installs tx's distributions from their directories (`./core ./plugins/ui`), never by their
names, which are on no package index yet; the published form is written as a comment or in
prose ("once published: pip install tx-ui")."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Iterator, List, Tuple

REPO = Path(__file__).resolve().parents[1]

#: tx's distributions, by name (on no index yet)
DISTRIBUTIONS = {
    tomllib.loads(p.read_text())["project"]["name"]
    for p in [REPO / "core" / "pyproject.toml", *(REPO / "plugins").glob("*/pyproject.toml")]
}

#: occurrences that are not install lines for a reader to type, and why
NOT_TYPED = {
    # hook examples: the `install=` hint a plugin registers, and messages tx prints from
    # core/src/tx/known_plugins.json (their published form; where tx-core came from a clone
    # the message names the plugin's directory instead: tests/test_packaging.py)
    ("docs/hooks.md", "tx-scheduler-aws-batch"), ("docs/hooks.md", "tx-scheduler-docker"),
    ("docs/hooks.md", "tx-tracker-mlflow"),
    # the compat layer's message for a TorchX scheduler module whose plugin is not installed
    ("plugins/compat-torchx/README.md", "tx-scheduler-slurm"),
}

_OPTS_WITH_VALUE = {"--index-url", "-i", "--extra-index-url", "-r", "-c", "--target", "-t"}


def _docs() -> List[Path]:
    skip = ("bench/.work", "node_modules", ".venv")
    return sorted(p for p in REPO.rglob("*.md") if not any(s in str(p.relative_to(REPO)) for s in skip))


def _install_commands() -> Iterator[Tuple[str, int, List[str]]]:
    """``(doc, line number, arguments)`` of every ``pip install`` in the docs: up to a
    comment, a closing backtick or quote, ``&&`` or the end of the line."""
    for doc in _docs():
        lines = doc.read_text().splitlines()
        for n, line in enumerate(lines, 1):
            for m in re.finditer(r"pip install (.*)", line):
                if "published" in (lines[n - 2] if n > 1 else "") + line[:m.start()]:
                    continue  # the published form, said to be one ("once published: pip install tx-ui")
                text = re.split(r"\s#|`|\"|&&|;|\)$", m.group(1))[0]
                yield str(doc.relative_to(REPO)), n, text.split()


def _local_paths(args: List[str]) -> Iterator[str]:
    skip_next = False
    for a in args:
        if skip_next:
            skip_next = False
            continue
        if a in _OPTS_WITH_VALUE:
            skip_next = True
            continue
        a = a.strip("'")
        if a.startswith("-") or a == ".":  # an option; `pip install -e .`: the reader's own project
            continue
        if a.startswith("./") or a == "core" or a.startswith("plugins/"):
            yield re.sub(r"\[.*\]$", "", a)


def test_the_docs_have_install_lines():
    assert len(list(_install_commands())) > 15


def test_no_install_line_names_a_distribution_that_is_on_no_index():
    bad = [f"{doc}:{n}: pip install {' '.join(args)}"
           for doc, n, args in _install_commands()
           for a in args if re.sub(r"\[.*\]$", "", a.strip("'")) in DISTRIBUTIONS and (doc, a) not in NOT_TYPED]
    assert bad == [], "install from the clone (./core ./plugins/NAME) and say how it reads once published:\n" + \
        "\n".join(bad)


def test_every_local_path_is_a_distribution_and_plugins_come_with_core():
    bad = []
    for doc, n, args in _install_commands():
        paths = list(_local_paths(args))
        for p in paths:
            if not (REPO / p / "pyproject.toml").is_file():
                bad.append(f"{doc}:{n}: {p} is no distribution of the clone")
        if any(p.lstrip("./").startswith("plugins/") for p in paths) and not any(
                p.lstrip("./") == "core" for p in paths):
            bad.append(f"{doc}:{n}: a plugin without ./core (tx-core is on no index yet)")
    assert bad == [], "\n".join(bad)
