"""The reports a run wrote (plan.md, autotune.md, run-summary.md), rendered as HTML for the run page.

markdown-it-py (CommonMark plus tables) with raw HTML off, so a report's text can never inject markup
or script into the page. A relative link or image is pointed at the file route (``/files/...``) from the
report's own folder, so ``autotune.png`` beside ``autotune.md`` shows; one that leaves the workspace or
names a file the route would not serve loses its target.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ltx_pipeline.ui.files import file_url, read_inside

if TYPE_CHECKING:
    from markdown_it.token import Token

__all__ = ["render_document", "run_documents"]


def run_documents(root: Path, run_root: Path, output_dirs: list[Path]) -> list[dict[str, Any]]:
    """The run's reports that exist: ``{"name", "title", "url", "html"}`` each, in the order a person reads them."""
    candidates = [("plan.md", "Plan", run_root / "plan.md"), ("autotune.md", "Autotune", run_root / "autotune.md")]
    candidates += [(f"run-summary.md (stage folder {d.name})" if len(output_dirs) > 1 else "run-summary.md",
                    "Run summary", d / "run-summary.md") for d in output_dirs]
    out = []
    for name, title, path in candidates:
        text = read_inside(root, path)
        if text:
            out.append({"name": name, "title": title, "url": file_url(root, path),
                        "html": render_document(root, path.parent, text)})
    return out


def render_document(root: Path, folder: Path, text: str) -> str:
    """``text`` as HTML, its relative links and images served from ``folder`` through the file route."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = md.parse(text)
    for token in tokens:
        for child in token.children or []:
            _repoint(root, folder, child)
    return str(md.renderer.render(tokens, md.options, {}))


def _repoint(root: Path, folder: Path, token: Token) -> None:
    attribute = "src" if token.type == "image" else "href" if token.type == "link_open" else None
    if attribute is None:
        return
    target = str(token.attrGet(attribute) or "")
    if not target or "://" in target or target.startswith(("#", "mailto:")):
        return
    url = file_url(root, folder / target.split("#", 1)[0])
    token.attrSet(attribute, url or "#")
