"""Table names as written: dotted parts, each quoted or not (shared by the catalog and families)."""

from __future__ import annotations


def split_name(name: str) -> list[tuple[str, bool]]:
    """`web."Events.2024"` -> [('web', False), ('Events.2024', True)]: dots split parts except inside
    double quotes, backticks or brackets; each part says whether it was quoted."""
    parts: list[tuple[str, bool]] = []
    current: list[str] = []
    quoted = False
    close: str | None = None
    text = name.strip()
    i = 0
    while i < len(text):
        ch = text[i]
        if close is not None:
            if ch == close:
                if close == '"' and text[i + 1 : i + 2] == '"':  # "" inside quotes is one quote
                    current.append('"')
                    i += 2
                    continue
                close = None
            else:
                current.append(ch)
        elif ch in '"`[':
            close = {"[": "]"}.get(ch, ch)
            quoted = True
        elif ch == ".":
            parts.append(("".join(current).strip(), quoted))
            current, quoted = [], False
        else:
            current.append(ch)
        i += 1
    parts.append(("".join(current).strip(), quoted))
    return parts


__all__ = ["split_name"]
