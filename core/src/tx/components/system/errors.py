"""Exceptions of the component finder and builder (re-exported by ``tx.components.system.finder`` and
``tx.components.system.builders``). Every message is one line, so the CLI prints it as is."""
from __future__ import annotations

from tx.errors import UserError

import re

__all__ = [
    "ComponentArgumentError", "ComponentError", "ComponentNotFoundException",
    "ComponentValidationException", "one_line",
]


def one_line(message: object) -> str:
    """``message`` as text with its line breaks (and the blanks around them) made one space."""
    return re.sub(r"\s*[\r\n]+\s*", " ", str(message)).strip()


class ComponentError(UserError):
    """Base class: a component could not be found, validated, or called with its args."""


class ComponentNotFoundException(ComponentError):
    """No component has the name asked for (the message suggests close names)."""


class ComponentValidationException(ComponentError):
    """The component exists but breaks the component rules (see :mod:`tx.components.system.file_linter`),
    cannot be loaded, or did not return an AppDef."""


class ComponentArgumentError(ComponentError, ValueError):
    """The arguments given to a component are wrong: a parse error (missing, unknown or
    malformed argument) or a value the component rejected.

    Attributes:
        component: the component name the message is about.
    """

    def __init__(self, message: str, component: str = "") -> None:
        text = one_line(message)
        super().__init__(f"{component}: {text}" if component else text)
        self.component = component
