"""Every ``sql`` and ``python`` block of README.md and docs/*.md runs, and shows what it prints.

The convention (docs/architecture.md, "Documentation that runs"):

- a fenced block whose info string is ``sql`` or ``python`` is executed; ``text``, ``console``,
  ``bash``/``sh``, unlabelled and other blocks are not (``py`` or ``SQL`` is taken for a typo);
- a block right after a line ``<!-- not run: REASON -->`` is skipped, and REASON must say why;
- ``sql`` blocks run in order per page, statement by statement, on one
  ``duckdb_sem.connect(backend="test:")`` connection that holds the demo tables ``reviews`` and
  ``plots`` (``duckdb_sem.load_demo(con)``), in a working directory holding the bundled CSVs
  under their own names (``rt_reviews.csv``, ``rt_plots.csv``);
- ``python`` blocks run in order per page in one namespace, with ``DUCKDB_SEM_BACKEND=test:``
  (so a bare ``duckdb_sem.connect()`` is deterministic) and the same working directory;
- a ``text`` block right after a runnable block is its expected output: what a ``python`` block
  prints, or the last result of a ``sql`` block drawn as ``duckdb-sem query`` draws it. It is
  compared word by word (box drawing and spacing aside). docs/*.md show the ``test:`` backend's
  output; README.md shows the default embedded model's, which only
  ``test_the_readme_tour_prints_what_it_shows`` (marked ``model``) compares;
- a ``text model`` block is a tiny CPU model's answers: compared word by word too, except that a
  value (a number or True/False) may differ. A margin of -0.06 on one review flipped between two
  machines' llama.cpp builds, and a 1-5 rating moves a step as easily, so the README shows what
  one machine printed and the test holds every other word, the count and the order.
"""

from __future__ import annotations

import contextlib
import io
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt
from rich.console import Console

import duckdb_sem
from duckdb_sem.cli.formats import explain_text, render_table
from duckdb_sem.cli.statements import reads_rows, split_statements
from duckdb_sem.data import DATASETS, dataset_path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN = ("sql", "python")
_MARK = re.compile(r"^<!--\s*not run:(?P<reason>.*?)-->\s*$")
_BOX = re.compile(r"[\u2500-\u257f]+")


@dataclass(frozen=True, slots=True)
class Block:
    """One fenced block of a page: where it starts, its language and code, and what it shows."""

    page: str
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    expected: str | None  # the text block right after it
    loose: bool  # a ``text model`` block: values may differ (module docstring)
    skip: str | None  # the reason of a `<!-- not run: ... -->` line right before it

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def blocks_of(path: Path) -> list[Block]:
    """The fenced blocks of a page (CommonMark, as GitHub renders them)."""
    text = path.read_text()
    lines = text.splitlines()
    tokens = [t for t in MarkdownIt().parse(text) if t.type in ("fence", "code_block")]
    fences = [t for t in tokens if t.type == "fence" and t.map is not None]
    found = []
    for i, tok in enumerate(fences):
        assert tok.map is not None
        start, end = tok.map
        before = lines[start - 1] if start > 0 else ""
        mark = _MARK.match(before.strip())
        after = fences[i + 1] if i + 1 < len(fences) else None
        expected = None
        loose = after is not None and after.info.strip() == "text model"
        if (
            after is not None
            and after.info.strip() in ("text", "text model")
            and after.map is not None
            and all(not line.strip() for line in lines[end : after.map[0]])
        ):
            expected = after.content
        found.append(
            Block(
                page=str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name,
                line=start + 1,
                lang=tok.info.strip().split(" ")[0],
                code=tok.content,
                expected=expected,
                loose=loose,
                skip=mark.group("reason").strip() if mark else None,
            )
        )
    return found


def _runnable(page: Path) -> list[Block]:
    return [b for b in blocks_of(page) if b.lang in RUN and b.skip is None]


def words(text: str) -> list[str]:
    """Text compared word by word: box drawing, spacing and line breaks do not count."""
    return _BOX.sub(" ", text).split()


_VALUE = re.compile(r"^[\[(]*(-?\d+(\.\d+)?|True|False)[,)\]]*$")


def same_words(shown: str, expected: str, *, loose: bool) -> bool:
    """Word by word; with ``loose``, two words that are both values (a number or True/False,
    with their brackets and commas) count as equal when their punctuation is.

    Example:
        >>> same_words("[(1, 3)]", "[(1, 4)]", loose=True), same_words("[(1, 3)]", "[(1, 4)]", loose=False)
        (True, False)
        >>> same_words("[(1, 3)]", "[(1, 3), (2, 4)]", loose=True)
        False
    """
    a, b = words(shown), words(expected)
    if not loose:
        return a == b
    return len(a) == len(b) and all(
        x == y or (_VALUE.match(x) and _VALUE.match(y) and _punct(x) == _punct(y))
        for x, y in zip(a, b, strict=True)
    )


def _punct(word: str) -> str:
    return re.sub(r"[\w.-]", "", word)


def draw(table: object, *, explain: bool) -> str:
    """A result as ``duckdb-sem query`` prints it (a wide console, so nothing wraps)."""
    import pyarrow as pa

    assert isinstance(table, pa.Table)
    if explain:
        return explain_text(table)
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(render_table(table))
    return console.export_text()


def run_sql(con: duckdb_sem.SemConnection, block: Block) -> str:
    """Run a ``sql`` block statement by statement; the last result, drawn."""
    shown = ""
    for statement in split_statements(block.code):
        try:
            table = con.execute(statement).arrow()
        except Exception as exc:
            raise AssertionError(f"{block.where}: {statement!r} failed: {exc}") from exc
        if reads_rows(statement):
            explain = statement.lstrip().upper().startswith("EXPLAIN")
            shown = draw(table, explain=explain)
    return shown


def run_python(namespace: dict[str, object], block: Block) -> str:
    """Run a ``python`` block in the page's namespace; what it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            exec(compile(block.code, block.where, "exec"), namespace)  # the docs are code
        except Exception as exc:
            raise AssertionError(f"{block.where} failed: {type(exc).__name__}: {exc}") from exc
    return out.getvalue()


@pytest.fixture
def demo_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory holding the bundled CSVs, as a reader's copy of the docs' data."""
    for name in DATASETS:
        shutil.copy(dataset_path(name), tmp_path / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@contextlib.contextmanager
def _closing_what_snippets_open() -> Iterator[None]:
    """Close every connection a page's snippets opened and release every ``install``, as a
    reader's script ends: a share left open would keep its model's scheduler, with that
    page's backend options, for the tests after this one (a borrowed zero-latency backend
    once made a cancellation test's slow query finish before its interrupt)."""
    real_connect, real_install = duckdb_sem.connect, duckdb_sem.install
    opened: list[Any] = []

    def connect(*args: Any, **kwargs: Any) -> duckdb_sem.SemConnection:
        con = real_connect(*args, **kwargs)
        opened.append(con)
        return con

    def install(*args: Any, **kwargs: Any) -> Any:
        session = real_install(*args, **kwargs)
        opened.append(session)
        return session

    duckdb_sem.connect, duckdb_sem.install = connect, install  # type: ignore[assignment]
    try:
        yield
    finally:
        duckdb_sem.connect, duckdb_sem.install = real_connect, real_install  # type: ignore[assignment]
        for thing in reversed(opened):
            if isinstance(thing, duckdb_sem.SemConnection):
                thing.close()
            else:
                thing.release()


def run_page(page: Path, *, compare: bool) -> None:
    """Run a page's blocks in order; with ``compare``, check each shown output."""
    namespace: dict[str, object] = {"__name__": "__docs__"}
    con: duckdb_sem.SemConnection | None = None
    try:
        for block in _runnable(page):
            if block.lang == "sql":
                if con is None:
                    con = duckdb_sem.connect(backend="test:", cache="off")
                    duckdb_sem.load_demo(con)
                shown = run_sql(con, block)
            else:
                shown = run_python(namespace, block)
            if compare and block.expected is not None:
                assert same_words(shown, block.expected, loose=block.loose), (
                    f"{block.where} shows\n{block.expected}\nbut prints\n{shown}"
                )
    finally:
        if con is not None:
            con.close()


@pytest.mark.parametrize("page", [p for p in PAGES if _runnable(p)], ids=lambda p: p.name)
def test_every_snippet_of_the_page_runs(
    page: Path, demo_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DUCKDB_SEM_BACKEND", "test:")
    monkeypatch.setenv("DUCKDB_SEM_CACHE", "off")
    monkeypatch.setenv("DUCKDB_SEM_EMBED_BACKEND", "sim-embed:")
    with _closing_what_snippets_open():
        run_page(page, compare=page.name != "README.md")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_block_is_run_or_says_why_not(page: Path) -> None:
    lines = page.read_text().splitlines()
    blocks = blocks_of(page)
    starts = {b.line - 1 for b in blocks}
    for i, line in enumerate(lines):
        if line.strip().startswith("<!-- not run"):
            assert _MARK.match(line.strip()), f"{page.name}:{i + 1}: write <!-- not run: REASON -->"
            assert i + 1 in starts, f"{page.name}:{i + 1}: the mark must sit right above a block"
    for block in blocks:
        # other languages (json, ini, ...) are not run; a near miss of sql/python is a typo
        near = block.lang.lower() in ("sql", "python", "py", "python3", "pycon", "duckdb")
        assert block.lang in RUN or not near, f"{block.where}: write ```sql or ```python"
        if block.skip is not None:
            assert block.skip, f"{block.where}: say why the block is not run"
            assert block.lang in RUN, f"{block.where}: only sql/python blocks are run anyway"


def test_the_parser_finds_marks_and_outputs(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nprint(1)\n```\n\n```text\n1\n```\n\n"
        "<!-- not run: needs a GPU -->\n```sql\nSELECT 1\n```\n"
    )
    assert [(b.lang, b.expected, b.skip) for b in blocks_of(page)] == [
        ("python", "1\n", None),
        ("text", None, None),
        ("sql", None, "needs a GPU"),
    ]


def test_a_wrong_output_is_caught(tmp_path: Path, demo_dir: Path) -> None:
    page = tmp_path / "wrong.md"
    page.write_text("```python\nprint('yes')\n```\n\n```text\nno\n```\n")
    with pytest.raises(AssertionError, match="shows"):
        run_page(page, compare=True)


def test_a_model_block_lets_values_differ_but_not_the_rest(tmp_path: Path, demo_dir: Path) -> None:
    page = tmp_path / "model.md"
    page.write_text("```python\nprint([(1, True), (2, 5)])\n```\n\n```text model\n"
                    "[(1, False), (2, 3)]\n```\n")  # fmt: skip
    run_page(page, compare=True)
    for wrong in ("[(1, False)]", "[(1, 'x'), (2, 3)]", "[(1, False), (2, 3), (3, 1)]"):
        page.write_text(
            f"```python\nprint([(1, True), (2, 5)])\n```\n\n```text model\n{wrong}\n```\n"
        )
        with pytest.raises(AssertionError, match="shows"):
            run_page(page, compare=True)


def test_a_failing_snippet_names_its_page_and_line(tmp_path: Path, demo_dir: Path) -> None:
    page = tmp_path / "broken.md"
    page.write_text("text\n\n```sql\nSELECT * FROM no_such_table\n```\n")
    with pytest.raises(AssertionError, match=r"broken\.md:3"):
        run_page(page, compare=True)


@pytest.mark.model
@pytest.mark.slow
def test_the_readme_tour_prints_what_it_shows(
    demo_dir: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """The tour on the real default model (``llama:``), as a newcomer pastes it, with a fresh
    cache (conftest's): what it prints is what the README shows, and stderr stays quiet."""
    monkeypatch.delenv("DUCKDB_SEM_BACKEND", raising=False)
    monkeypatch.setenv("DUCKDB_SEM_EMBED_BACKEND", "sim-embed:")
    run_page(ROOT / "README.md", compare=True)
    err = capfd.readouterr().err
    assert "llama_" not in err and "ggml" not in err and "sqlglot" not in err, err
