"""Reading Markdown as the docs tests and the bench report's tests need it."""

from __future__ import annotations

import re


def table_cells(row: str) -> int:
    """The cells of a Markdown table row: its `|`s outside code spans, less an escaped `\\|`."""
    outside_code = re.sub(r"`[^`]*`", "", row.strip())
    return len(re.findall(r"(?<!\\)\|", outside_code)) - 1
