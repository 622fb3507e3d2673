"""The `visual` step's pixel count: pixelmatch's rules (the YIQ colour distance, its anti-aliasing detector, its
diff image) computed with numpy over whole arrays. The pure-Python pixelmatch took 2.4 s of CPU for a 1024x700
page that differs everywhere; every float here is computed in the same order as there, so the count is the same
to the pixel (tests/targets/test_visual_pixels.py holds the two side by side)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from PIL.Image import Image

# the neighbours in the order pixelmatch visits them (x outer, y inner): the first darkest and the first
# brightest neighbour win a tie, so the order decides which neighbour's siblings are looked at
NEIGHBOURS = [(-1, -1), (-1, 0), (-1, 1), (0, -1), (0, 1), (1, -1), (1, 0), (1, 1)]
MAX_YIQ_DELTA = 35215  # the largest possible YIQ distance between two colours
GRAY_ALPHA = 0.1  # how much of the expected image shows, faded towards white, where pixels match
AA_COLOUR = (255, 255, 0)
DIFF_COLOUR = (255, 0, 0)


def compare(expected: Image, actual: Image, threshold: float) -> tuple[int, Image]:
    """The pixels that differ by more than `threshold` (anti-aliasing aside) and the diff image: transparent
    outside the box where any byte differs, pixelmatch's drawing inside it (the box is compared as a whole
    image, its edges as the image's edges, as the pure-Python comparison of the box alone did)."""
    import numpy as np
    from PIL import Image as PILImage
    from PIL import ImageChops

    diff = PILImage.new("RGBA", actual.size)
    box = ImageChops.difference(expected, actual).getbbox(alpha_only=False)
    if box is None:
        return 0, diff
    one = np.asarray(expected.crop(box), dtype=np.uint8)
    two = np.asarray(actual.crop(box), dtype=np.uint8)
    yiq1, yiq2 = _yiq(one), _yiq(two)
    dy, di, dq = yiq1[0] - yiq2[0], yiq1[1] - yiq2[1], yiq1[2] - yiq2[2]
    delta = 0.5053 * dy * dy + 0.299 * di * di + 0.1957 * dq * dq
    over = delta > MAX_YIQ_DELTA * threshold * threshold
    # identical pixels are 0.0 there, never over: the distance of equal inputs is exactly zero
    siblings = _many_siblings(one) & _many_siblings(two)
    aa = over & (_antialiased(yiq1[0], siblings) | _antialiased(yiq2[0], siblings))
    counted = over & ~aa
    out = np.empty(one.shape, dtype=np.uint8)
    out[..., 3] = 255
    gray = (255 + (_luma(one.astype(np.float64)) - 255) * (GRAY_ALPHA * one[..., 3] / 255)).astype(np.uint8)
    for channel in range(3):
        out[..., channel] = np.where(counted, DIFF_COLOUR[channel], np.where(aa, AA_COLOUR[channel], gray))
    diff.paste(PILImage.fromarray(out, "RGBA"), box[:2])
    return int(np.count_nonzero(counted)), diff


def _luma(rgb: Any) -> Any:
    return rgb[..., 0] * 0.29889531 + rgb[..., 1] * 0.58662247 + rgb[..., 2] * 0.11448223


def _yiq(pixels: Any) -> tuple[Any, Any, Any]:
    """Y, I and Q of each pixel, blended with white by its alpha (an opaque pixel is left as it is: blending with
    an alpha of 1.0 gives the same floats)."""
    import numpy as np

    rgb = pixels[..., :3].astype(np.float64)
    alpha = pixels[..., 3:4].astype(np.float64)
    if (alpha < 255).any():  # a screenshot is opaque: blending is skipped, not only a no-op
        rgb = np.where(alpha < 255, 255 + (rgb - 255) * (alpha / 255), rgb)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    return (r * 0.29889531 + g * 0.58662247 + b * 0.11448223,
            r * 0.59597799 - g * 0.27417610 - b * 0.32180189,
            r * 0.21147017 - g * 0.52261711 + b * 0.31114694)


def _shifted(values: Any, dx: int, dy: int, fill: object) -> Any:
    """values[y + dy, x + dx] at each (y, x), `fill` where that neighbour is outside the image."""
    import numpy as np

    height, width = values.shape[:2]
    padded = np.pad(values, ((1, 1), (1, 1)) + ((0, 0),) * (values.ndim - 2), constant_values=fill)
    return padded[1 + dy:1 + dy + height, 1 + dx:1 + dx + width]


def _edge(shape: tuple[int, ...]) -> Any:
    """1 on the image's border (pixelmatch counts a border pixel as having one equal neighbour already)."""
    import numpy as np

    edge: Any = np.zeros(shape[:2], dtype=np.int64)
    edge[0, :] = edge[-1, :] = 1
    edge[:, 0] = edge[:, -1] = 1
    return edge


def _insides(shape: tuple[int, ...]) -> list[Any]:
    """For each neighbour (in NEIGHBOURS' order), whether it is inside the image."""
    import numpy as np

    ones: Any = np.ones(shape[:2], dtype=bool)
    return [_shifted(ones, dx, dy, False) for dx, dy in NEIGHBOURS]


def _many_siblings(pixels: Any) -> Any:
    """Whether each pixel has 3+ neighbours of exactly its colour (its alpha included)."""
    import numpy as np

    packed = np.ascontiguousarray(pixels).view(np.uint32)[..., 0]
    equal = _edge(pixels.shape)
    for (dx, dy), inside in zip(NEIGHBOURS, _insides(pixels.shape), strict=True):
        equal = equal + ((_shifted(packed, dx, dy, 0) == packed) & inside)
    return equal > 2


def _antialiased(luma: Any, siblings: Any) -> Any:
    """pixelmatch's test of one image's pixel: not 3+ neighbours of its brightness, both a darker and a brighter
    one, and the first darkest or the first brightest one with 3+ equal siblings in both images."""
    import numpy as np

    zeroes = _edge(luma.shape)
    darkest = np.zeros(luma.shape)
    brightest = np.zeros(luma.shape)
    at_darkest = np.zeros(luma.shape, dtype=bool)
    at_brightest = np.zeros(luma.shape, dtype=bool)
    for (dx, dy), inside in zip(NEIGHBOURS, _insides(luma.shape), strict=True):
        delta = luma - _shifted(luma, dx, dy, 0.0)
        zeroes = zeroes + (inside & (delta == 0))
        darker = inside & (delta < darkest)
        brighter = inside & (delta > brightest)
        darkest = np.where(darker, delta, darkest)
        brightest = np.where(brighter, delta, brightest)
        neighbour_siblings = _shifted(siblings, dx, dy, False)
        at_darkest = np.where(darker, neighbour_siblings, at_darkest)
        at_brightest = np.where(brighter, neighbour_siblings, at_brightest)
    return (zeroes <= 2) & (darkest < 0) & (brightest > 0) & (at_darkest | at_brightest)
