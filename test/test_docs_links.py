"""Every relative link in README.md and docs/ names a file that exists, and an anchor it has."""

import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
PAGES = [REPO_ROOT / 'README.md', *sorted((REPO_ROOT / 'docs').glob('*.md'))]
LINK = re.compile(r'\]\(([^)\s]+)\)')


def anchors(page: Path) -> set:
    """Return GitHub's anchors of the page's headings (lower case, punctuation dropped)."""
    found, fenced = set(), False
    for line in page.read_text().splitlines():
        if line.startswith('```'):
            fenced = not fenced
        if fenced or not line.startswith('#'):
            continue
        title = line.lstrip('#').strip().lower()
        found.add(re.sub(r'[^\w\- ]', '', title).replace(' ', '-'))
    return found


@pytest.mark.parametrize('page', PAGES, ids=lambda p: p.name)
def test_relative_links_resolve(page):
    """A link to a missing file or heading is reported with the page and the link."""
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r'^[a-z]+:', target):
            continue                                   # http:, https:, mailto:
        path, _, anchor = target.partition('#')
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f'{target}: no file {linked}')
        elif anchor and linked.suffix == '.md' and anchor not in anchors(linked):
            broken.append(f'{target}: no heading #{anchor} in {linked.name}')
    assert not broken, f'{page.name}:\n' + '\n'.join(broken)
