"""Text normalisation shared by the value index and schema search (tools/search): the folded,
punctuation-free form values are compared in, word-order keys, trigrams and identifier words."""

from __future__ import annotations

import re
import unicodedata


def fold(text: str) -> str:
    """Casefolded, accents stripped (NFKD without combining marks)."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold()


_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)


def normalize(text: str) -> str:
    """The comparison form of a value: folded, punctuation and whitespace runs become one space.
    Emoji and other pictographs (Unicode "So") each become a word of their own, so '🎉' finds
    '🎉🎉' and 'party 🎉'; currency and math signs stay punctuation ('$100' still matches '100')."""
    folded = fold(text)
    if folded.isascii():
        return _NON_WORD.sub(" ", folded).strip()
    parts = [
        ch if ch.isalnum() else (f" {ch} " if unicodedata.category(ch) == "So" else " ") for ch in folded
    ]
    return " ".join("".join(parts).split())


def sorted_key(norm: str) -> str:
    """Word order removed: 'lamp desk' and 'desk lamp' share a key."""
    return " ".join(sorted(norm.split()))


def trigrams(token: str) -> set[str]:
    padded = f"^{token}$"
    return {padded[i : i + 3] for i in range(max(1, len(padded) - 2))}


def split_identifier(name: str) -> list[str]:
    """camelCase, PascalCase, snake_case, digits: 'StuID' -> ['stu', 'id'], 'orderDate2' -> ['order', 'date', '2']."""
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    text = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1 \2", text)
    text = re.sub(r"([A-Za-z])([0-9])", r"\1 \2", text)
    return [w for w in _NON_WORD.split(fold(text)) if w]


_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|(?<=[^\W\d_])(?=\d)|(?<=\d)(?=[^\W\d_])")


def spaced(text: str) -> str:
    """The comparison form with words glued in CamelCase or to digits split apart:
    'NorthCarolina' -> 'north carolina', 'Route66' -> 'route 66' (normalize alone keeps them glued)."""
    return normalize(_CAMEL.sub(" ", text))


def compact(norm: str) -> str:
    """A comparison form without its spaces: 'north carolina', 'northcarolina' and 'e mail' (from
    'e-mail') meet as 'northcarolina' and 'email'."""
    return norm.replace(" ", "")


_VOWELS = set("aeiou")


def number_forms(word: str) -> list[str]:
    """The other grammatical number of an English word, as candidates to look up (a wrong guess finds
    nothing): 'dogs' -> ['dog'], 'companies' -> ['company'], 'boxes' -> ['box', 'boxe'], 'city' ->
    ['cities']. Words under three letters, and numbers, have none."""
    if len(word) < 3 or not word.isalpha():
        return []
    if word.endswith("s"):
        if word.endswith(("ss", "us", "is")):
            return [word + "es"] if word.endswith("ss") else []
        if word.endswith("ies") and len(word) > 4:
            return [word[:-3] + "y"]
        if word.endswith("es") and word[:-2].endswith(("s", "x", "z", "ch", "sh", "o")):
            return [word[:-2], word[:-1]]
        return [word[:-1]]
    if word.endswith("y") and word[-2] not in _VOWELS:
        return [word[:-1] + "ies"]
    if word.endswith(("x", "z", "ch", "sh")):
        return [word + "es"]
    return [word + "s"]
