"""A column of names or ids sent to PostgreSQL as one string, split back into an array by the
statement that receives it.

A checked name never holds a control character (engine/names.py refuses them), so a column
of names travels joined by the unit separator (``\\x1f``) and the statement turns it back into
a ``text[]`` (:func:`split_names`); a column of UUIDs (or gaps) travels the same way into a
``uuid[]`` (:func:`split_uuids`). The driver encodes one string for far less than an array of
as many elements, and PostgreSQL splits it no slower than it reads the array
(docs/architecture.md, "How a push travels").
"""

from __future__ import annotations

_SEPARATOR = "\x1f"


def join_names(names: list[str]) -> str:
    """A column of checked names as the one string :func:`split_names` reads back."""
    return _SEPARATOR.join(names)


def split_names(placeholder: str) -> str:
    """The SQL that turns the parameter ``placeholder`` (a :func:`join_names` string) into a text[]."""
    return f"string_to_array({placeholder}, E'\\x{ord(_SEPARATOR):02x}')"


def split_optional_names(placeholder: str) -> str:
    """The SQL that turns the parameter ``placeholder`` (a :func:`join_names` string whose empty
    names are gaps) into a text[] with NULL for each gap."""
    return f"string_to_array({placeholder}, E'\\x{ord(_SEPARATOR):02x}', '')"


def join_uuids(ids: list[str | None]) -> str:
    """A column of checked UUIDs or None as the one string :func:`split_uuids` reads back
    (None becomes NULL)."""
    return _SEPARATOR.join(["" if value is None else value for value in ids])


def split_uuids(placeholder: str) -> str:
    """The SQL that turns the parameter ``placeholder`` (a :func:`join_uuids` string) into a uuid[]."""
    return f"{split_optional_names(placeholder)}::uuid[]"
