"""A whole web page where an agent's answer was expected (a sign-in page, the site instead of its API), named by
its title: the rest and a2a targets say it alike."""

from __future__ import annotations

import html
import re

from tamesu.matching import one_line

_WHOLE_PAGE = re.compile(r"\ufeff?\s*(<!--.*?-->\s*)*<(!doctype\s+html|html[\s>])", re.IGNORECASE | re.DOTALL)
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


def is_web_page(body: str) -> bool:
    return _WHOLE_PAGE.match(body) is not None


def page_title(body: str) -> str:
    """The page's `<title>`, on one line and at most 80 characters (cut as `one_line` cuts); empty when it has
    none."""
    found = _TITLE.search(body)
    return one_line(html.unescape(found.group(1)), 80) if found else ""
