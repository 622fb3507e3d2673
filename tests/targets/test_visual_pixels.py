"""The `visual` step's numpy pixel count against the pure-Python pixelmatch it replaced (the package, a dev
dependency, compares the same box the step compared before): the same count and the same diff image, byte
for byte, on real screenshots of the web-shop example."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image, ImageChops, ImageDraw

from tamesu.targets.browser._pixels import compare

SHOTS = Path(__file__).resolve().parents[2] / "examples" / "web-shop"


def reference(expected: Image.Image, actual: Image.Image, threshold: float) -> tuple[int, Image.Image]:
    """What `visual` did before: pure-Python pixelmatch over the box where any byte differs."""
    from pixelmatch.contrib.PIL import pixelmatch

    box = ImageChops.difference(expected, actual).getbbox(alpha_only=False)
    diff = Image.new("RGBA", actual.size)
    differing = 0
    if box is not None:
        crop_diff = Image.new("RGBA", (box[2] - box[0], box[3] - box[1]))
        differing = pixelmatch(expected.crop(box), actual.crop(box), crop_diff, threshold=threshold)
        diff.paste(crop_diff, box[:2])
    return differing, diff


def shot(name: str) -> Image.Image:
    return Image.open(SHOTS / name).convert("RGBA")


def band(image: Image.Image, top: int, height: int) -> Image.Image:
    """A strip of the page (the whole page in pure Python takes seconds per comparison)."""
    return image.crop((0, top, image.width, top + height))


def shifted(image: Image.Image) -> Image.Image:
    moved = Image.new("RGBA", image.size, (255, 255, 255, 255))
    moved.paste(image.crop((0, 0, image.width - 1, image.height)), (1, 0))
    return moved


def faded(image: Image.Image) -> Image.Image:
    """Semi-transparent pixels, which both sides blend with white."""
    out = image.copy()
    out.putalpha(Image.linear_gradient("L").resize(image.size))
    return out


def texted(image: Image.Image) -> Image.Image:
    out = image.copy()
    ImageDraw.Draw(out).text((10, 5), "the cart is not the home page", fill=(20, 20, 20, 255), font_size=18)
    return out


def pairs() -> dict[str, tuple[Image.Image, Image.Image]]:
    home, failing = shot("__visual__/home.png"), shot("failing/__visual__/home.png")
    top = band(home, 0, 160)
    text = band(home, 40, 120)
    small = band(home, 20, 60)  # where the whole band differs, pure Python is seconds a case
    return {
        "identical": (top, top.copy()),
        "the failing page": (band(home, 0, 200), band(failing, 0, 200)),
        "shifted by 1 px": (text, shifted(text)),
        "anti-aliased text drawn over": (text, texted(text)),
        "flipped": (top, top.transpose(Image.Transpose.FLIP_LEFT_RIGHT)),
        "upside down": (small, small.transpose(Image.Transpose.FLIP_TOP_BOTTOM)),
        "semi-transparent": (faded(small), faded(small.transpose(Image.Transpose.FLIP_LEFT_RIGHT))),
        "one pixel": (top, _one_pixel(top)),
        "a corner": (top, _corner(top)),
    }


def _one_pixel(image: Image.Image) -> Image.Image:
    out = image.copy()
    out.putpixel((37, 21), (0, 0, 0, 255))
    return out


def _corner(image: Image.Image) -> Image.Image:
    out = image.copy()
    ImageDraw.Draw(out).rectangle((image.width - 3, image.height - 3, image.width - 1, image.height - 1),
                                  fill=(200, 0, 90, 255))
    return out


PAIRS = pairs()


@pytest.mark.parametrize("threshold", [0.1, 0.0, 0.5])
@pytest.mark.parametrize("name", list(PAIRS))
def test_the_count_and_the_diff_image_are_pure_python_pixelmatchs(name: str, threshold: float) -> None:
    expected, actual = PAIRS[name]
    want, want_diff = reference(expected, actual, threshold)
    got, got_diff = compare(expected, actual, threshold)
    assert got == want
    assert got_diff.tobytes() == want_diff.tobytes()
    if name in ("shifted by 1 px", "anti-aliased text drawn over") and threshold == 0.1:
        # the anti-aliasing rule is exercised: yellow pixels, not counted
        assert (255, 255, 0, 255) in {c for _, c in got_diff.getcolors(1 << 20) or []}


def test_a_page_that_differs_everywhere_is_counted_in_well_under_a_second() -> None:
    import time

    home = shot("failing/__visual__/home.png")
    started = time.process_time()
    differing, _ = compare(home, home.transpose(Image.Transpose.FLIP_LEFT_RIGHT), 0.1)
    assert differing > 0
    assert time.process_time() - started < 1.0  # pure Python took 2.4 s of CPU for this 1024x700 page


def test_small_images_of_few_colours_tie_and_border_as_pure_python_pixelmatch_does() -> None:
    # a few colours (some semi-transparent) make equal neighbours, equal brightness and 1-pixel-wide images:
    # the ties and borders the anti-aliasing detector decides by
    import random

    rnd = random.Random(7)
    for trial in range(200):
        width, height = rnd.randint(1, 24), rnd.randint(1, 24)
        palette = [(rnd.randrange(256), rnd.randrange(256), rnd.randrange(256),
                    rnd.choice([255, 255, 255, rnd.randrange(256)])) for _ in range(rnd.randint(2, 5))]
        first = [rnd.choice(palette) for _ in range(width * height)]
        second = [rnd.choice(palette) if rnd.random() < 0.3 else pixel for pixel in first]
        expected, actual = Image.new("RGBA", (width, height)), Image.new("RGBA", (width, height))
        expected.putdata(first)
        actual.putdata(second)
        threshold = rnd.choice([0.0, 0.05, 0.1, 0.3])
        want, want_diff = reference(expected, actual, threshold)
        got, got_diff = compare(expected, actual, threshold)
        assert (got, got_diff.tobytes()) == (want, want_diff.tobytes()), trial
