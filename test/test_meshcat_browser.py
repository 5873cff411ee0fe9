"""
Open real Meshcat pages in a real headless Chromium and check the pixels.

Drake's Meshcat server (live, over http://) and its saved replay
(``Meshcat.StaticHtml()``, over file://) must both show the scene: an orange
box over Meshcat's grey background.  The screenshots are kept in
out/test-artifacts/.

Needs Debian's Chromium and the Python package playwright, which ``make test``
installs.  Without them these tests FAIL (they do not skip), unless the
environment variable QD_SKIP_BROWSER=1 is set, which skips them.
"""

import os
import urllib.request

from pydrake.geometry import Box, Meshcat, Rgba
import pytest

from browser import (ARTIFACTS_DIR, count_colour, image_stats, is_blank, missing, screenshot,
                     WebGLError)

# The box's colour as drawn: lit faces range from (250, 176, 54) to (217, 114, 13).
BOX_RGBA = Rgba(1.0, 0.5, 0.0, 1.0)
BOX_RGB, BOX_TOL = (255, 128, 0), 60
# The 0.5 m box covers about 9000 of the 1280 x 800 pixels from Meshcat's default camera.
MIN_BOX_PIXELS = 2000
ABSENT_RGB = (0, 255, 0)   # nothing in the scene is this green


def require_browser():
    """Fail (not skip) when Chromium or playwright is missing; skip if QD_SKIP_BROWSER=1."""
    if os.environ.get('QD_SKIP_BROWSER') == '1':
        pytest.skip('QD_SKIP_BROWSER=1: real-browser tests skipped')
    problem = missing()
    if problem:
        pytest.fail(f'missing {problem}: run `make test`, which installs Chromium and '
                    'playwright (or set QD_SKIP_BROWSER=1 to skip the browser tests)',
                    pytrace=False)


@pytest.fixture(scope='module')
def meshcat():
    """Start a real Meshcat server (Drake picks a free port) showing an orange box."""
    server = Meshcat()
    server.SetObject('/test/box', Box(0.5, 0.5, 0.5), BOX_RGBA)
    yield server
    server.Delete()


def assert_box_drawn(png):
    """Check that the screenshot is not blank and shows the orange box."""
    stats = image_stats(png)
    assert not is_blank(png), f'{png} is blank: {stats}'
    box = count_colour(png, BOX_RGB, BOX_TOL)
    assert box >= MIN_BOX_PIXELS, \
        f'{png}: only {box} orange pixels (want >= {MIN_BOX_PIXELS}); {stats}'
    assert count_colour(png, ABSENT_RGB, BOX_TOL) == 0, f'{png}: unexpected green pixels'


def test_server_answers_http(meshcat):
    with urllib.request.urlopen(meshcat.web_url(), timeout=10) as response:
        assert response.status == 200
        assert b'<html' in response.read().lower()


def test_live_page_shows_box(meshcat):
    require_browser()
    png = screenshot(meshcat.web_url(), ARTIFACTS_DIR / 'meshcat_live.png')
    assert_box_drawn(png)


def test_static_html_shows_box(meshcat):
    require_browser()
    html = ARTIFACTS_DIR / 'meshcat_static.html'
    html.parent.mkdir(parents=True, exist_ok=True)
    html.write_text(meshcat.StaticHtml())
    png = screenshot(html.as_uri(), ARTIFACTS_DIR / 'meshcat_static.png')
    assert_box_drawn(png)


def test_page_without_webgl_is_blank(meshcat):
    # The control for the two tests above: with WebGL switched off, Meshcat's
    # page draws nothing, and the helpers must say so.
    require_browser()
    png = ARTIFACTS_DIR / 'meshcat_no_webgl.png'
    with pytest.raises(WebGLError, match='WebGL context'):
        screenshot(meshcat.web_url(), png, args=['--disable-3d-apis'])
    assert is_blank(png), image_stats(png)
    assert count_colour(png, BOX_RGB, BOX_TOL) == 0
