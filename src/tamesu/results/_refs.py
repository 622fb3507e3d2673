"""A large answer is written once per artifact: in result.json an agent turn's `response` and `raw` documents
refer to what the turn already holds instead of repeating it.

- a string equal to the turn's `text` (the whole body of a text answer, or the reply field inside a JSON
  document) is written `{"$ref": "text"}`;
- a `raw` document equal to `response` (the body of a one-request turn is both) is written
  `{"$ref": "response"}`;
- a document of the agent's own that happens to look like one of these markers is kept as
  `{"$value": <the document>}`.

Only values of at least MIN_CHARS characters are replaced: small results read exactly as before. Reading a
result (the HTML report, `tamesu view`, `tamesu report`, anything that loads RunResult) resolves the markers, so
what comes back equals what was written. transcript.json keeps the text once more: it is another artifact.
"""

from __future__ import annotations

from typing import Any

MIN_CHARS = 10_000
REF = "$ref"
VALUE = "$value"
NO_MARKERS = "no_markers"
"""A validation context key: the JSON read holds no `$` (neither written nor escaped as `\\u0024`), so no
marker either, and the turns are read as they are (`has_no_markers`)."""
_TO_TEXT = {REF: "text"}
_TO_RESPONSE = {REF: "response"}


def has_no_markers(text: str) -> bool:
    """Whether a result's JSON text cannot hold a marker: every key `$ref` or `$value` has a `$` in the text."""
    return "$" not in text and "\\u0024" not in text


def _looks_like_marker(doc: Any) -> bool:
    return isinstance(doc, dict) and len(doc) == 1 and (REF in doc or VALUE in doc)


def _measured(doc: Any, chars: int) -> tuple[bool, bool]:
    """Whether the strings and keys of `doc` add up to `chars` characters (counting stops once they do), and
    whether a dict in what was counted looks like a marker: one walk of the response a turn, not two."""
    pending = [doc]
    seen = 0
    marked = False
    while pending and seen < chars:
        item = pending.pop()
        if isinstance(item, str):
            seen += len(item)
        elif isinstance(item, dict):
            marked = marked or (len(item) == 1 and (REF in item or VALUE in item))
            seen += sum(map(len, map(str, item)))
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
        else:
            seen += 4
    return seen >= chars, marked


def _shrink(doc: Any, text: str | None) -> object:
    if text is not None and isinstance(doc, str) and doc == text:
        return dict(_TO_TEXT)
    if _looks_like_marker(doc):
        return {VALUE: doc}
    if isinstance(doc, dict):
        return {key: _shrink(value, text) for key, value in doc.items()}
    if isinstance(doc, list):
        return [_shrink(value, text) for value in doc]
    return doc


def _expand(doc: Any, text: str) -> object:
    if isinstance(doc, dict):
        if doc == _TO_TEXT:
            return text
        if len(doc) == 1 and VALUE in doc:
            return doc[VALUE]
        return {key: _expand(value, text) for key, value in doc.items()}
    if isinstance(doc, list):
        return [_expand(value, text) for value in doc]
    return doc


def shrink_agent(agent: dict[str, Any]) -> dict[str, object]:
    """An agent turn as dumped data, with its repeated large values replaced by references."""
    text = agent.get("text")
    big_text = text if isinstance(text, str) and len(text) >= MIN_CHARS else None
    response = agent.get("response")
    big_response, marked = _measured(response, MIN_CHARS) if response is not None else (False, False)
    # a response under MIN_CHARS was walked whole: only the raw documents other than it are left to search
    if big_text is None and not big_response and not marked and not _mentions_markers(agent, response_searched=True):
        return agent
    raw = agent.get("raw") or []
    return {**agent, "response": _shrink(response, big_text),
            "raw": [dict(_TO_RESPONSE) if big_response and doc == response else _shrink(doc, big_text)
                    for doc in raw]}


def expand_agent(agent: Any) -> object:
    """The inverse of shrink_agent, for data read back from result.json (anything else is left alone)."""
    if not isinstance(agent, dict) or not _mentions_markers(agent):
        return agent
    written = agent.get("text")
    text = written if isinstance(written, str) else ""
    response = _expand(agent.get("response"), text)
    raw = agent.get("raw")
    if isinstance(raw, list):
        raw = [response if doc == _TO_RESPONSE else _expand(doc, text) for doc in raw]
    return {**agent, "response": response, "raw": raw}


def _mentions_markers(agent: dict[str, Any], response_searched: bool = False) -> bool:
    """Whether a dict in the turn's response or raw documents looks like a marker (`response_searched`: the
    response was already; it is not searched again, nor a raw document equal to it)."""
    response = agent.get("response")
    pending = [] if response_searched else [response]
    raw = agent.get("raw")
    if isinstance(raw, list):
        # a raw document equal to the response (a one-request turn's body is both) holds the same dicts: it is
        # not walked again, each time a turn is written or read back
        for doc in raw:
            if doc != response:
                pending.append(doc)
    else:
        pending.append(raw)
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            if len(item) == 1 and (REF in item or VALUE in item):  # _looks_like_marker, without a call per dict
                return True
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False
