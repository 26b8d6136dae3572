"""MkDocs hook: links from a page to repository files outside ``docs/`` (``../deploy/README.md``).

MkDocs knows only the files under ``docs/``: it reports such a link as not found (which fails
the strict build), and the link would be broken on the built site anyway. The pages keep them
because they work where most readers read the Markdown (a repository browser), so this hook
checks each one against the repository instead: a target that does not exist is a warning,
which fails ``mkdocs build --strict`` as a broken link between pages does. On the site the link
then points at the file on the repository host when ``repo_url`` is set in ``mkdocs.yml``, and
is otherwise shown as its repository path in code font (the site has no copy of the file).
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

log = logging.getLogger("mkdocs.hooks.repo_links")

# An inline link or image: [text](target) / ![alt](target), the target without spaces or a title.
LINK = re.compile(r"(?P<bang>!?)\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)\)")
# Fenced code blocks are not Markdown: a "[x](y)" in a YAML or shell example is not a link.
FENCE = re.compile(r"^(```|~~~).*?^\1", flags=re.DOTALL | re.MULTILINE)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    # Paths are normalised, not resolved: a symbolic link inside the repository stays inside it.
    docs_dir = Path(os.path.abspath(config["docs_dir"]))
    repo = Path(os.path.abspath(config["config_file_path"])).parent
    page_dir = Path(os.path.abspath(page.file.abs_src_path)).parent
    repo_url = (config.get("repo_url") or "").rstrip("/")

    def rewrite(match: re.Match[str]) -> str:
        target = match["target"]
        parts = urlsplit(target)
        if parts.scheme or parts.netloc or target.startswith(("#", "/")):
            return match[0]
        path = Path(os.path.normpath(page_dir / parts.path))
        if path == docs_dir or docs_dir in path.parents:
            return match[0]  # a page or image of the site: MkDocs checks it
        if repo not in path.parents or not path.exists():
            log.warning("Doc file '%s' links to '%s', which is not a file of the repository", page.file.src_uri, target)
            return match[0]
        relative = path.relative_to(repo).as_posix()
        if repo_url:
            kind = "tree" if path.is_dir() else "blob"
            anchor = f"#{parts.fragment}" if parts.fragment else ""
            return f"{match['bang']}[{match['text']}]({repo_url}/{kind}/HEAD/{relative}{anchor})"
        text = match["text"]
        return f"`{relative}`" if text.strip("`") == relative else f"{text} (`{relative}`)"

    pieces, last = [], 0
    for fence in FENCE.finditer(markdown):
        pieces.append(LINK.sub(rewrite, markdown[last : fence.start()]))
        pieces.append(fence[0])
        last = fence.end()
    pieces.append(LINK.sub(rewrite, markdown[last:]))
    return "".join(pieces)
