"""Every page the docs link to exists, and every page and section the code cites for its
reasons ("docs/benchmarks/notes.md, "Memory per member"") is there to read: moving or
condensing a document must not leave a comment pointing at nothing."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.markdown import table_cells

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").rglob("*.md"))]
SOURCES = [p for d in ("coordinator", "storage", "protocol", "tests") for p in sorted((ROOT / d).rglob("*.py"))]
# A cited page, optionally followed by the section it names: `docs/…/page.md`, "Section"
CITATION = re.compile(r"(docs/[\w/.-]+\.md)`?\)?,?\s+\"([^\"]+)\"|(docs/[\w/.-]+\.md)")


def _sections(page: Path) -> list[str]:
    """Its headings, and the bold or italic leads that open its paragraphs ("**Deleted topics take
    their offsets.**"), each as one line of text."""
    text = page.read_text()
    leads = re.findall(r"^\*{1,2}([^*]+?)\*{1,2}", text, re.M)
    return [line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")] + [
        " ".join(lead.split()) for lead in leads]


def test_every_relative_link_of_the_docs_reaches_a_file():
    for page in PAGES:
        for link in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text()):
            assert (page.parent / link).resolve().is_file(), f"{page.relative_to(ROOT)} links to {link}"


def test_every_page_and_section_the_code_and_docs_cite_exists():
    cited = 0
    for source in SOURCES + PAGES:
        # Comments wrap: join lines (dropping comment markers) so a section name split over
        # two lines still reads as one.
        text = re.sub(r"\s*\n\s*(#\s*)?", " ", source.read_text())
        for page, section, bare_page in CITATION.findall(text):
            path = ROOT / (page or bare_page)
            where = source.relative_to(ROOT)
            assert path.is_file(), f"{where} cites {page or bare_page}"
            if section and section[0].isupper():
                # A citation may name a section by the start of its heading.
                assert any(s.startswith(section) for s in _sections(path)), f'{where} cites "{section}" in {page}'
            cited += 1
    assert cited > 20


def test_every_table_row_has_its_headers_cells():
    # A row with one cell more than its header shifts every figure under the wrong
    # column: a reader takes kgc's time for Kafka's.
    tables = 0
    for page in PAGES:
        header = None
        for number, line in enumerate(page.read_text().splitlines(), 1):
            if not line.lstrip().startswith("|"):
                header = None
                continue
            if header is None:
                header, tables = table_cells(line), tables + 1
                continue
            assert table_cells(line) == header, f"{page.relative_to(ROOT)}:{number} has {table_cells(line)} cells, its header {header}"
    assert tables > 10
