"""The item id in an item page's URL (``studies/<slug>/items/<item_id>/``).

Item ids are the importer's own and may hold ``/``, and even ``.`` or ``..`` segments
(``../../admin/``), which a browser resolves away before it asks (``items/../../admin/`` is
another page). Such a segment, and one that starts with ``~``, is written with one ``~`` more
and read back without it, so every id has one URL and the browser keeps it whole
(``items/~../~../admin/``). ``~`` is an unreserved character: never escaped, never resolved."""

from __future__ import annotations

ESCAPE = "~"


def _escaped(segment: str) -> bool:
    return segment in (".", "..") or segment.startswith(ESCAPE)


class ItemIdConverter:
    regex = ".+"

    def to_python(self, value: str) -> str:
        return "/".join(s[1:] if s.startswith(ESCAPE) else s for s in value.split("/"))

    def to_url(self, value: str) -> str:
        return "/".join(ESCAPE + s if _escaped(s) else s for s in str(value).split("/"))
