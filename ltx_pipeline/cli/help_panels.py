"""``PanelCommand``: a command whose ``--help`` groups its options under headed panels, in plain text.

Typer draws ``rich_help_panel`` groups only through its Rich formatter, which imports rich.markdown and
markdown-it, a quarter of ``--help``'s time (the app keeps ``rich_markup_mode=None``, #16). This command
keeps click's plain layout and writes one section per panel, in the order the options are declared;
options without a panel (and ``--help``) stay under "Options".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from typer.core import TyperCommand

if TYPE_CHECKING:  # typer's own (vendored) click, whose types its commands take
    from typer._click import Context, HelpFormatter

__all__ = ["PanelCommand"]


class PanelCommand(TyperCommand):
    """A typer command whose help lists its options panel by panel (``typer.Option(rich_help_panel=...)``)."""

    def format_options(self, ctx: Context, formatter: HelpFormatter) -> None:
        sections: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                title = "Arguments"
            else:
                title = getattr(param, "rich_help_panel", None) or "Options"
            sections.setdefault(title, []).append(record)
        for title, records in sections.items():
            with formatter.section(title):
                formatter.write_dl(records)
