"""Every relative link in README.md and docs/*.md leads somewhere.

A link (or image) to a file must name a file that exists, and an ``#anchor`` (in the same
file or in another Markdown file) must match one of that file's headings under GitHub's slug
rules: lowercase, punctuation removed, spaces turned into hyphens, repeated headings numbered
``-1``, ``-2``, …. External links (``http:``, ``https:``, ``mailto:``) are not followed.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

BASE_DIR = Path(__file__).resolve().parent.parent

FENCE = re.compile(r"^(```|~~~)")
INLINE_CODE = re.compile(r"`+[^`]*`+")
# [text](target) and ![alt](target); the target stops at whitespace or the closing bracket.
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


def markdown_files() -> list[Path]:
    return [BASE_DIR / "README.md", *sorted((BASE_DIR / "docs").glob("*.md"))]


def prose_lines(text: str) -> list[tuple[int, str]]:
    """The lines outside fenced code blocks, numbered from 1."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), start=1):
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line))
    return lines


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text stays
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        match = HEADING.match(line)
        if not match:
            continue
        slug = github_slug(match.group(2))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def broken_links(path: Path, root: Path = BASE_DIR) -> list[str]:
    problems = []
    anchor_cache: dict[Path, set[str]] = {}
    for number, line in prose_lines(path.read_text(encoding="utf-8")):
        for target in LINK.findall(INLINE_CODE.sub("", line)):
            if EXTERNAL.match(target):
                continue
            file_part, _, anchor = target.partition("#")
            linked = (path.parent / unquote(file_part)).resolve() if file_part else path
            where = f"{path.relative_to(root)}:{number}: {target}"
            if not linked.exists():
                problems.append(f"{where} (no such file)")
                continue
            if anchor and linked.suffix == ".md":
                if linked not in anchor_cache:
                    anchor_cache[linked] = anchors(linked)
                if unquote(anchor).lower() not in anchor_cache[linked]:
                    problems.append(f"{where} (no heading with this anchor)")
    return problems


def test_github_slug_follows_githubs_rules() -> None:
    assert github_slug("What `make run` does") == "what-make-run-does"
    assert github_slug("Coming from the reference CLI") == "coming-from-the-reference-cli"
    assert github_slug("Runs, states & retries (v2)") == "runs-states--retries-v2"
    assert github_slug("How2Bench: the leaderboard") == "how2bench-the-leaderboard"


def test_a_missing_file_and_a_missing_anchor_are_both_reported(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other\n\n## Real heading\n")
    page.write_text(
        "# Page\n\n[ok](other.md#real-heading) [ok](#page) [gone](missing.md)\n"
        "[bad](other.md#no-such) [bad here](#nowhere) ![img](img/none.png)\n"
        "```\n[in code](ignored.md)\n```\n`[inline](ignored.md)` [web](https://example.org)\n"
    )
    problems = broken_links(page, root=tmp_path)
    assert [p.split(": ", 1)[1] for p in problems] == [
        "missing.md (no such file)",
        "other.md#no-such (no heading with this anchor)",
        "#nowhere (no heading with this anchor)",
        "img/none.png (no such file)",
    ]


def test_every_relative_link_in_readme_and_docs_resolves() -> None:
    problems = [problem for path in markdown_files() for problem in broken_links(path)]
    assert not problems, "broken links:\n" + "\n".join(problems)
