"""The documentation stays whole: every relative link of README.md, CHANGELOG.md and docs/*.md
reaches a file of the repository, and no tracked file cites a document that lives outside it."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Fenced blocks and inline code hold examples, not links.
_FENCED = re.compile(r"^(```|~~~).*?^\1", flags=re.MULTILINE | re.DOTALL)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # http:, https:, mailto:, ...
# Documents that never were in the repository, and a sibling checkout's files.
_OUTSIDE = re.compile(r"\bAPI\.md\b|\bDESIGN\.md\b|\.\./shared\b")


def _pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]


def relative_links(text: str) -> list[str]:
    """The link targets of a markdown text that point into the repository, anchors cut off."""
    prose = _INLINE_CODE.sub("", _FENCED.sub("", text))
    targets = (match.group(1) for match in _LINK.finditer(prose))
    return [target.split("#", 1)[0] for target in targets if not _EXTERNAL.match(target) and target.split("#", 1)[0]]


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """The page's relative links that reach no file, or a file outside ``root``."""
    broken = []
    for target in relative_links(page.read_text()):
        resolved = (page.parent / target).resolve()
        if not resolved.is_relative_to(root) or not resolved.exists():
            broken.append(target)
    return broken


@pytest.mark.parametrize("page", _pages(), ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_reaches_a_file_of_the_repository(page: Path) -> None:
    assert broken_links(page) == []


def test_the_docs_index_lists_every_page() -> None:
    index = ROOT / "docs" / "README.md"
    listed = {(index.parent / target).resolve() for target in relative_links(index.read_text())}
    pages = {page.resolve() for page in (ROOT / "docs").glob("*.md") if page != index}
    assert sorted(page.name for page in pages - listed) == []


def test_a_link_to_a_missing_file_or_outside_the_tree_is_found(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "there.md").write_text("")
    (tmp_path / "beside.md").write_text("")
    page = root / "page.md"
    page.write_text(
        "[ok](there.md#a) [gone](missing.md) [out](../beside.md) `[code](nowhere.md)` [web](https://example.com)\n"
        "```\n[example](fenced.md)\n```\n"
    )
    assert relative_links(page.read_text()) == ["there.md", "missing.md", "../beside.md"]
    assert broken_links(page, root) == ["missing.md", "../beside.md"]


def test_no_tracked_file_cites_a_document_outside_the_repository() -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    citing = []
    for name in filter(None, listed.decode().split("\0")):
        path = ROOT / name
        if not path.is_file():
            continue
        for number, line in enumerate(path.read_bytes().decode(errors="replace").splitlines(), start=1):
            if _OUTSIDE.search(line):
                citing.append(f"{name}:{number}: {line.strip()}")
    assert citing == []
