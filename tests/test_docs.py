"""The documentation holds together (issue 30 §5): the site builds strictly, the README's links resolve.

``docs/`` builds as a site with ``mkdocs build --strict`` (``mkdocs.yml``): a broken link or
anchor, a page missing from the nav, a nav entry without its page, or a link to a repository
file that does not exist fails the build, so it fails here. The mutations below prove that the
build really fails on each. README.md and CHANGELOG.md are not part of the site (they are read
on the repository host), so their relative links are checked here directly.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from pydantic import BaseModel

from sharesync.sync.core.config import SharesyncConfig, SparkConfig, TableConfig, TableDefaults, parse_config

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
# An inline link or image target: [text](target), ![alt](target).
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", flags=re.DOTALL | re.MULTILINE)


def build(config: Path, site: Path) -> tuple[int, str]:
    """``mkdocs build --strict`` (never ``-q``: quiet mode hides the warnings strict mode counts)."""
    done = subprocess.run(
        [str(Path(sys.executable).with_name("mkdocs")), "build", "--strict", "--config-file", str(config),
         "--site-dir", str(site)],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    return done.returncode, done.stdout + done.stderr


def nav_pages(nav: list[object]) -> list[str]:
    pages: list[str] = []
    for entry in nav:
        for value in entry.values() if isinstance(entry, dict) else [entry]:
            pages.extend(nav_pages(value) if isinstance(value, list) else [str(value)])
    return pages


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    code, output = build(REPO / "mkdocs.yml", tmp_path / "site")
    assert code == 0, output[-4000:]
    assert "WARNING" not in output, output[-4000:]
    nav = nav_pages(yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"])
    for page in nav:
        built = tmp_path / "site" / ("index.html" if page == "index.md" else f"{page[:-3]}/index.html")
        assert built.is_file(), page


def test_every_page_under_docs_is_in_the_nav() -> None:
    """A new page is found from the site's menu: the next engineer adds it to mkdocs.yml's nav."""
    nav = nav_pages(yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"])
    on_disk = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    assert sorted(nav) == on_disk
    assert len(nav) == len(set(nav)), nav


def _copy_of_the_repository(tmp_path: Path) -> Path:
    """docs/ and mkdocs.yml copied (to be broken), every other top-level entry linked."""
    copy = tmp_path / "repo"
    copy.mkdir()
    shutil.copytree(DOCS, copy / "docs", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "mkdocs.yml", copy / "mkdocs.yml")
    for entry in REPO.iterdir():
        if entry.name not in {"docs", "mkdocs.yml", ".git", ".venv", "site"}:
            (copy / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    return copy


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


BREAKAGES = {
    "a link to a missing page": (
        lambda docs: _append(docs / "modes.md", "\nSee [the old page](no-such-page.md).\n"), "no-such-page.md"),
    "a link to a missing anchor": (
        lambda docs: _append(docs / "modes.md", "\nSee [filters](configuration.md#no-such-section).\n"),
        "no-such-section"),
    "a link to a missing repository file": (
        lambda docs: _append(docs / "engines.md", "\nSee [deploy](../deploy/NO-SUCH-FILE.md).\n"), "NO-SUCH-FILE.md"),
    "a page left out of the nav": (
        lambda docs: (docs / "new-topic.md").write_text("# New topic\n"), "new-topic.md"),
    "a nav entry without its page": (lambda docs: (docs / "benchmarks.md").unlink(), "benchmarks.md"),
}  # fmt: skip


@pytest.mark.parametrize("breakage", sorted(BREAKAGES))
def test_the_strict_build_fails_on(breakage: str, tmp_path: Path) -> None:
    """The unbroken site builds (above); the failure must name what was broken."""
    copy = _copy_of_the_repository(tmp_path)
    mutate, named = BREAKAGES[breakage]
    mutate(copy / "docs")
    code, output = build(copy / "mkdocs.yml", tmp_path / "site")
    assert code != 0, output[-4000:]
    assert "Aborted" in output and named in output, output[-4000:]


def github_anchor(heading: str) -> str:
    """The anchor a repository host gives a heading: lower case, punctuation dropped, spaces as '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    text = FENCE.sub("", markdown)
    return {github_anchor(m) for m in re.findall(r"^#+ (.+)$", text, flags=re.MULTILINE)}


def relative_links(markdown: str) -> list[str]:
    return [t for t in LINK.findall(FENCE.sub("", markdown)) if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


# Markdown read on the repository host rather than on the site: the front pages, and the READMEs
# of deploy/ and bench/ (the site's pages link to them, and they link back into docs/).
OUTSIDE_THE_SITE = ["README.md", "CHANGELOG.md", "deploy/README.md", "bench/README.md", "bench/HISTORY.md"]


def test_the_link_check_covers_every_markdown_file_outside_docs() -> None:
    """Tracked files only: the bench writes its reports as Markdown into the ignored bench/results/."""
    tracked = subprocess.run(
        ["git", "ls-files", "--", "*.md", ":!docs/"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    assert sorted(tracked) == sorted(OUTSIDE_THE_SITE)


@pytest.mark.parametrize("name", OUTSIDE_THE_SITE)
def test_every_relative_link_resolves(name: str) -> None:
    source = REPO / name
    links = relative_links(source.read_text(encoding="utf-8"))
    assert links, f"{name} links to nothing in the repository"
    broken = []
    for link in links:
        path, _, anchor = link.partition("#")
        target = (source.parent / path).resolve() if path else source
        if not target.exists() or REPO not in [target, *target.parents]:
            broken.append(link)
        elif anchor and (target.suffix != ".md" or anchor not in anchors(target.read_text(encoding="utf-8"))):
            broken.append(link)
    assert broken == []


def test_the_link_check_finds_what_is_broken() -> None:
    markdown = "# Top\n\n[a](docs/modes.md) [b](docs/nope.md) [c](https://x.org) [d](#top)\n```\n[e](f.md)\n```\n"
    assert relative_links(markdown) == ["docs/modes.md", "docs/nope.md", "#top"]
    assert github_anchor("History mode: every version of every row") == "history-mode-every-version-of-every-row"
    assert "continuous-sync-without-dagster" in anchors((DOCS / "commands.md").read_text())


def bash_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```", markdown, flags=re.DOTALL | re.MULTILINE)


def test_the_site_home_has_the_readme_set_up_commands() -> None:
    """The two set-up commands (CI runs the second one verbatim) read the same on both front pages."""
    readme = bash_blocks((REPO / "README.md").read_text())[:2]
    assert readme == [
        "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/sharesync demo\n",
        "python3 -m venv .venv && .venv/bin/pip install -q -e '.[dev]' && .venv/bin/pytest\n",
    ]
    assert bash_blocks((DOCS / "index.md").read_text())[:2] == readme
    assert readme[1].strip() in (REPO / ".ci" / "run").read_text().splitlines()


def yaml_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```yaml\n(.*?)^```", markdown, flags=re.DOTALL | re.MULTILINE)


def test_every_complete_config_example_loads(tmp_path: Path) -> None:
    """A config shown whole (it has ``tables:``) is one a user can copy: it passes validation."""
    examples = [
        (page, raw)
        for page in [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]
        for block in yaml_blocks(page.read_text(encoding="utf-8"))
        if isinstance(raw := yaml.safe_load(block), dict) and "tables" in raw
    ]
    assert {page.name for page, _ in examples} >= {"README.md", "configuration.md"}
    for page, raw in examples:
        config = parse_config(raw, base_dir=tmp_path, source=page.name)
        assert config.tables, page


def _aliases(model: type[BaseModel]) -> set[str]:
    return {field.alias or name for name, field in model.model_fields.items()}


def test_the_configuration_reference_names_every_field() -> None:
    """docs/configuration.md's example is the reference: a field it leaves out is a field nobody finds."""
    (reference, *_) = yaml_blocks((DOCS / "configuration.md").read_text(encoding="utf-8"))
    raw = yaml.safe_load(reference)
    per_table_too = re.search(r"# per table too: (.*)", reference)
    assert per_table_too is not None
    table_fields = set(raw["tables"][0]) | {w.strip() for w in per_table_too[1].split(",")}
    assert _aliases(SharesyncConfig) - set(raw) == set()
    assert _aliases(SparkConfig) - set(raw["spark"]) == set()
    assert _aliases(TableDefaults) - set(raw["defaults"]) == set()
    assert _aliases(TableConfig) - table_fields == set()


def _hook() -> object:
    import importlib.util

    spec = importlib.util.spec_from_file_location("repo_links", DOCS / "hooks" / "repo_links.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("repo_url", "expected"),
    [
        (
            "https://git.example/org/sharesync/",
            "[the report](https://git.example/org/sharesync/blob/HEAD/bench/README.md)",
        ),
        ("", "the report (`bench/README.md`)"),
    ],
)
def test_a_link_out_of_docs_points_at_the_repository_file(repo_url: str, expected: str) -> None:
    """On the site, ``../bench/README.md`` (a repository file, no page) links to the host, or names the path."""
    page = SimpleNamespace(file=SimpleNamespace(abs_src_path=str(DOCS / "benchmarks.md"), src_uri="benchmarks.md"))
    config = {"docs_dir": str(DOCS), "config_file_path": str(REPO / "mkdocs.yml"), "repo_url": repo_url}
    markdown = "See [the report](../bench/README.md) and [modes](modes.md).\n```\n[x](../bench/README.md)\n```\n"
    out = _hook().on_page_markdown(markdown, page, config, None)  # type: ignore[attr-defined]
    assert out == f"See {expected} and [modes](modes.md).\n```\n[x](../bench/README.md)\n```\n"


# A module named in docs/architecture.md: `name.py` or `folder/name.py` in backticks.
MODULE_NAME = re.compile(r"`(?:[\w/]+/)?(\w+\.py)`")


def test_the_architecture_page_names_every_module_and_no_module_that_is_gone() -> None:
    """Issue 30's "the module table matches the code": file names are unique (tests/test_static.py),
    so a name in the page is one module, and a renamed, added or deleted module fails here."""
    named = set(MODULE_NAME.findall((DOCS / "architecture.md").read_text(encoding="utf-8")))
    modules = {
        path.name
        for folder in ("sync", "pipelines", "state")
        for path in (REPO / folder).rglob("*.py")
        if path.name != "__init__.py" and "migrations" not in path.parts
    }
    assert sorted(modules - named) == [], "modules the architecture page does not describe"
    assert sorted(named - modules - {"test_layers.py"}) == [], "modules the page names that do not exist"


# A step of the walk: `module.py:Name()` or `module.py:Class.method()` (or a class, without "()").
WALK_STEP = re.compile(r"`(\w+\.py):([\w.]+?)(?:\(\))?`")


def _defined(path: Path) -> set[str]:
    """Top-level functions and classes of a module, and ``Class.method`` for each method."""
    import ast

    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            names.update(f"{node.name}.{m.name}" for m in node.body if isinstance(m, ast.FunctionDef))
    return names


def test_the_merge_batch_walk_names_functions_the_code_has() -> None:
    """Issue 41: the walk names every step the code takes by its function; a step renamed, moved to
    another module or deleted fails here, so the page cannot drift from the code unnoticed."""
    page = (DOCS / "architecture.md").read_text(encoding="utf-8")
    walk = page[page.index("## One merge batch, step by step") : page.index("## Layers")]
    steps = WALK_STEP.findall(walk)
    assert len(steps) >= 30, "the walk names fewer steps than it did when this test was written"
    modules = {
        path.name: path
        for folder in ("sync", "pipelines", "state")
        for path in (REPO / folder).rglob("*.py")
        if "migrations" not in path.parts
    }
    missing = [f"{module}:{name}" for module, name in steps if name not in _defined(modules[module])]
    assert missing == [], "steps of the walk the code no longer has"
