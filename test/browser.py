"""
Screenshot Meshcat pages with a real headless Chromium and judge them by their pixels.

A helper module for the tests (not a test file).  Chromium is Debian's
``chromium`` package (``make test`` installs it) and ``playwright`` (pinned in
requirements.txt) drives it.  Never run ``playwright install``: it downloads a
browser build of its own, which fails without internet.  Headless Chromium
renders WebGL in software (SwiftShader), so a screenshot shows the 3D scene.

Example::

    from browser import ARTIFACTS_DIR, count_colour, is_blank, screenshot

    png = screenshot(meshcat.web_url(), ARTIFACTS_DIR / 'box.png')
    assert not is_blank(png)
    assert count_colour(png, (255, 128, 0), tol=60) > 500
"""

import io
import os
from pathlib import Path
import shutil
import time
from typing import NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np
from PIL import Image

REPO_ROOT = Path(__file__).resolve().parent.parent
# Where tests keep their screenshots (out/ is git-ignored).
ARTIFACTS_DIR = REPO_ROOT / 'out' / 'test-artifacts'
# Debian's package: where apt puts it, else `chromium` on PATH (as the Makefile checks).
CHROMIUM_CANDIDATES = ('/usr/bin/chromium', 'chromium')
# Software WebGL through ANGLE's SwiftShader backend.  Chromium 156 still falls
# back to SwiftShader by itself, but logs "Automatic fallback to software WebGL
# has been deprecated. Please use the --enable-unsafe-swiftshader flag"; these
# two flags ask for it explicitly, so the fallback's removal cannot blank the page.
WEBGL_ARGS = ('--use-angle=swiftshader', '--enable-unsafe-swiftshader')
# Meshcat's overlays that change by themselves (the live page's realtime-rate
# plot): masked out when deciding whether the picture has stopped changing.
ANIMATED_OVERLAYS = ('#stats-plot',)
# A pixel is foreground when a channel differs from the dominant colour by more
# than DEFAULT_TOL; a picture with less than MIN_FOREGROUND of them is blank.
DEFAULT_TOL = 8
MIN_FOREGROUND = 0.02
# [x, y, width, height] in whole pixels of every element matching the selectors.
_OVERLAY_BOXES_JS = '''selectors => selectors
    .flatMap(s => Array.from(document.querySelectorAll(s)))
    .map(e => e.getBoundingClientRect())
    .map(r => [Math.floor(r.x), Math.floor(r.y), Math.ceil(r.width) + 1,
               Math.ceil(r.height) + 1])'''

# Console messages of a page whose WebGL context failed (three.js, Chromium).
WEBGL_FAILURES = ('Error creating WebGL context', 'WebGL context could not be created')

PathLike = Union[str, os.PathLike]
Rgb = Tuple[int, int, int]


class WebGLError(RuntimeError):
    """The page could not create a WebGL context, so Meshcat draws nothing."""


class ImageStats(NamedTuple):
    """Pixel statistics of a screenshot (see image_stats)."""

    width: int
    height: int
    distinct_colours: int
    dominant_rgb: Rgb
    dominant_fraction: float    # pixels equal to dominant_rgb / all pixels
    foreground_fraction: float  # pixels farther than tol from dominant_rgb / all pixels


def chromium_path() -> Optional[str]:
    """Return the path of Debian's Chromium, or None when it is not installed."""
    for candidate in CHROMIUM_CANDIDATES:
        if os.path.isabs(candidate):
            if os.access(candidate, os.X_OK):
                return candidate
        else:
            found = shutil.which(candidate)
            if found:
                return found
    return None


def missing() -> Optional[str]:
    """Return what is missing to take screenshots (Chromium, playwright), or None."""
    problems = []
    if chromium_path() is None:
        problems.append('Chromium (/usr/bin/chromium, Debian package "chromium")')
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        problems.append('the Python package playwright (requirements.txt)')
    return ' and '.join(problems) or None


def _rgb(png: Union[PathLike, bytes]) -> np.ndarray:
    """Read a PNG (a path or its bytes) as an H x W x 3 uint8 array."""
    source = io.BytesIO(png) if isinstance(png, bytes) else png
    with Image.open(source) as image:
        return np.asarray(image.convert('RGB'))


def _stats(rgb: np.ndarray, tol: int) -> ImageStats:
    """Compute ImageStats of an H x W x 3 uint8 array."""
    height, width = rgb.shape[:2]
    pixels = rgb.reshape(-1, 3).astype(np.int32)
    # One int per colour: np.unique over rows (axis=0) is 200x slower.
    packed = (pixels[:, 0] << 16) | (pixels[:, 1] << 8) | pixels[:, 2]
    colours, counts = np.unique(packed, return_counts=True)
    key = int(colours[counts.argmax()])
    dominant = (key >> 16, (key >> 8) & 255, key & 255)
    far = np.abs(pixels - np.asarray(dominant)).max(axis=1) > tol
    return ImageStats(width, height, len(colours), dominant,
                      float(counts.max()) / len(pixels), float(far.mean()))


def image_stats(png_path: PathLike, tol: int = DEFAULT_TOL) -> ImageStats:
    """
    Return pixel statistics of a PNG.

    The dominant colour is the most frequent one (the background of an empty
    page); a pixel is foreground when one of its channels differs from it by
    more than ``tol`` (0-255).
    """
    return _stats(_rgb(png_path), tol)


def is_blank(png_path: PathLike, min_foreground: float = MIN_FOREGROUND,
             tol: int = DEFAULT_TOL) -> bool:
    """
    Return True when nothing was drawn: under ``min_foreground`` of the pixels differ.

    A page whose WebGL failed is one flat colour (Meshcat's page is all white
    then); a drawn Meshcat scene has its gradient background and grid over
    nearly all of it.
    """
    return image_stats(png_path, tol).foreground_fraction < min_foreground


def count_colour(png_path: PathLike, rgb: Sequence[int], tol: int = 30) -> int:
    """Return the number of pixels whose channels all lie within ``tol`` of ``rgb``."""
    pixels = _rgb(png_path).astype(np.int16)
    near = np.abs(pixels - np.asarray(rgb, dtype=np.int16)).max(axis=2) <= tol
    return int(near.sum())


def screenshot(url: str, png_path: PathLike, *, width: int = 1280, height: int = 800,
               settle_s: float = 0.5, timeout_s: float = 30.0, poll_s: float = 0.1,
               require_drawn: bool = True, args: Sequence[str] = ()) -> Path:
    """
    Open ``url`` in headless Chromium, wait until the page has drawn, save a PNG.

    Works for http:// (a live Meshcat server) and file:// URLs (a saved
    ``Meshcat.StaticHtml()`` page).  After the page has loaded and a <canvas>
    is visible, the page is screenshot every ``poll_s``; it is done when the
    picture is not blank (see is_blank) and has not changed for ``settle_s``
    (the live page's animated overlays masked out).  The final, unmasked
    picture is written to ``png_path`` (parent directories are created) and
    the path is returned.

    Raises RuntimeError when Chromium or playwright is missing, WebGLError
    as soon as the page logs that its WebGL context failed, and TimeoutError
    when the page has not drawn within ``timeout_s``.  In the last two cases
    the last picture is saved all the same, and the page's console errors are
    in the message.  With ``require_drawn=False`` a blank but steady page
    (with a visible <canvas>) is accepted.  ``args`` are extra Chromium
    switches, after WEBGL_ARGS.
    """
    problem = missing()
    if problem:
        raise RuntimeError(f'cannot take a screenshot: missing {problem}; run `make test`, '
                           'which installs Chromium and playwright')
    from playwright.sync_api import sync_playwright
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    png_path = Path(png_path)
    png_path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout_s
    console = []

    def on_console(message):
        if message.type in ('error', 'warning'):
            console.append(f'{message.type}: {message.text}')

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), headless=True,
                                     args=[*WEBGL_ARGS, *args], timeout=timeout_s * 1000)
        try:
            page = browser.new_page(viewport={'width': width, 'height': height})
            page.on('console', on_console)
            page.on('pageerror', lambda error: console.append(f'pageerror: {error}'))
            state = 'page not loaded'
            try:
                page.goto(url, wait_until='load', timeout=timeout_s * 1000)
                state = _wait_until_drawn(page, deadline, settle_s, poll_s, require_drawn,
                                          console)
            except (TimeoutError, PlaywrightTimeout, WebGLError) as error:
                page.screenshot(path=str(png_path))
                errors = '\n  '.join(console[-10:]) or '(none)'
                if isinstance(error, WebGLError):
                    raise WebGLError(f'{url}: WebGL failed, nothing drawn; last picture: '
                                     f'{png_path}; console errors:\n  {errors}') from None
                if isinstance(error, TimeoutError):
                    state = str(error)
                raise TimeoutError(
                    f'{url} not drawn within {timeout_s:g} s ({state}); last picture: '
                    f'{png_path}; console errors:\n  {errors}') from None
            page.screenshot(path=str(png_path))
        finally:
            browser.close()
    return png_path


def _wait_until_drawn(page, deadline: float, settle_s: float, poll_s: float,
                      require_drawn: bool, console: Sequence[str]) -> str:
    """
    Poll screenshots until a <canvas> shows and the picture is drawn and steady.

    Returns 'drawn'.  Raises WebGLError when ``console`` reports a WebGL
    failure (with ``require_drawn``), and TimeoutError with the state ('no
    visible <canvas>', 'blank', 'still changing') as its message once
    time.monotonic() passes ``deadline``.
    """
    last, last_time, stable_since = None, None, None
    while True:
        if require_drawn and any(
                failure in message for message in console for failure in WEBGL_FAILURES):
            raise WebGLError()
        now = time.monotonic()
        if not page.locator('canvas').first.is_visible():
            state, last, stable_since = 'no visible <canvas>', None, None
        else:
            shot = _rgb(page.screenshot()).copy()
            # Black out the animated overlays (cheaper than playwright's mask option).
            for x, y, w, h in page.evaluate(_OVERLAY_BOXES_JS, list(ANIMATED_OVERLAYS)):
                shot[max(0, y):max(0, y + h), max(0, x):max(0, x + w)] = 0
            if last is not None and np.array_equal(shot, last):
                stable_since = stable_since or last_time
            else:
                stable_since = None
            last, last_time = shot, now
            drawn = _stats(shot, DEFAULT_TOL).foreground_fraction >= MIN_FOREGROUND
            state = 'blank' if not drawn else 'still changing'
            if ((drawn or not require_drawn) and stable_since is not None
                    and now - stable_since >= settle_s):
                return 'drawn'
        if now > deadline:
            raise TimeoutError(state)
        time.sleep(poll_s)
