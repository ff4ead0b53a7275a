"""Figures in text: numbers (EN `1,234.56`, TR `1.234,56`, scales, currencies, percents) and dates, as values.

Pure and fast: one compiled regular expression scans the text once. Every number keeps all the readings
its separators allow (`1,234` is 1234 in English and 1.234 in Turkish) with the rounding tolerance of the
precision it was written with, so the matcher (agent.checks.grounding) needs no language guess. Figures that
are not facts (years, ordinals, list numbers, small counts, labels such as `qwen3` or `C-1042`) are marked
`exempt` with the reason instead of being dropped, so the trace can say why they were not checked.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

Kind = Literal["count", "amount", "percent", "number", "date"]
Exempt = Literal["year", "ordinal", "list", "small", "label", "time"] | None
Reading = tuple[float, float]  # (value, half of the last shown unit: the rounding tolerance)
Date = tuple[int, int, int]  # (year or 0 when not written, month, day or 0 for a whole month)

_MONTH_NAMES = {
    "january jan ocak": 1, "february feb şubat subat": 2, "march mar mart": 3, "april apr nisan": 4,
    "may mayıs mayis": 5, "june jun haziran": 6, "july jul temmuz": 7, "august aug ağustos agustos": 8,
    "september sep sept eylül eylul": 9, "october oct ekim": 10, "november nov kasım kasim": 11,
    "december dec aralık aralik": 12,
}  # fmt: skip
MONTHS = {name: number for names, number in _MONTH_NAMES.items() for name in names.split()}
# A month name is a word of its own: "çekim 24" (withdrawal 24) holds "ekim" (October) and is no date.
_MONTH = r"(?<!\w)(?:" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
SCALES = {"k": 1e3, "thousand": 1e3, "bin": 1e3, "m": 1e6, "mn": 1e6, "million": 1e6, "milyon": 1e6}
SCALES |= {"bn": 1e9, "billion": 1e9, "milyar": 1e9}
_CURRENCY = r"(?:(?-i:USD|EUR|TRY|GBP|TL)|lira|dollars?|euros?|\$|€|£|₺)"

PATTERN = re.compile(
    rf"""
    (?P<iso>(?P<iy>\d{{4}})-(?P<im>\d{{2}})-(?P<id>\d{{2}})
        (?:[T\ ]\d{{2}}:\d{{2}}(?::\d{{2}}(?:\.\d+)?)?(?:Z|[+-]\d{{2}}:?\d{{2}})?)?)
  | (?P<dnum>(?P<d1>\d{{1,2}})(?P<ds>[./])(?P<d2>\d{{1,2}})(?P=ds)(?P<d3>\d{{4}}))\b
  | (?P<dm>(?P<dmd>\d{{1,2}})(?:st|nd|rd|th|\.)?\ +(?P<dmm>{_MONTH})(?!\w)(?:,?\ +(?P<dmy>\d{{4}})\b)?)
  | (?P<md>(?P<mdm>{_MONTH})\ +(?P<mdd>\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\ +(?P<mdy>\d{{4}})\b)?)
  | (?P<my>(?P<mym>{_MONTH})\ +(?P<myy>\d{{4}})\b)
  | (?P<time>\d{{1,2}}:\d{{2}}(?::\d{{2}})?)
  | (?P<pre>%\ ?|yüzde\ |[$€£₺]\ ?|\b(?-i:USD|EUR|TRY|GBP|TL)\ ?)?
    (?P<num>\d{{1,3}}(?P<g>[,.\u00a0\u202f])\d{{3}}(?:(?P=g)\d{{3}})*(?!\d)(?:[.,]\d+)?|\d+(?:[.,]\d+)?)
    (?:(?P<scale>(?-i:[kKM]|bn|mn))(?!\w)|\ ?(?P<scalew>thousand|million|billion|bin|milyon|milyar)\b)?
    (?P<pct>\ ?%|\ ?percent\b|\ ?per\ cent\b)?
    (?P<cur>\ ?{_CURRENCY}(?!\w))?
    """,
    re.VERBOSE | re.IGNORECASE,
)
_HEDGE = re.compile(r"(?:about|approximately|approx\.|around|roughly|nearly|almost|yaklaşık|~|≈)\s*$", re.I)
_LABEL_BEFORE = re.compile(
    r"(?:\b(?:top|first|last|past|within|ilk|son|geçen|step|page|sayfa|adım|no\.?|rank|version)\s*|#)$", re.I
)
_ORDINAL_AFTER = re.compile(r"(?:st|nd|rd|th)\b|['’](?:i|ı|u|ü)?n(?:ci|cı|cu|cü)\b|\.\s+[a-zçğıöşü]")


@dataclass(frozen=True, slots=True)
class Figure:
    """One figure as written, with every value it can mean (or the date it names)."""

    text: str
    kind: Kind
    readings: tuple[Reading, ...] = ()
    date: Date | None = None
    exempt: Exempt = None


def scan(text: str) -> list[Figure]:
    """Every figure in `text`, in order; times of day are exempt (not checked, see docs/grounding.md)."""
    figures: list[Figure] = []
    for m in _matches(text):
        if m.group("num") is not None:
            figures.append(_number(text, m))
        elif m.group("time") is not None:
            figures.append(Figure(m.group(0), "number", exempt="time"))
        else:
            figures.append(_date(m))
    return figures


_DIGIT = re.compile(r"[0-9]")
_REACH = 24  # every figure has a digit at most this far from its start ("September 3", "yüzde 12")


def _matches(text: str) -> Iterator[re.Match[str]]:
    """PATTERN.finditer, but searching only near digits: every figure holds one, and the pattern costs ~0.6 µs
    per character tried (the month names are tried at every position), half of a whole check."""
    pos = 0
    while (digit := _DIGIT.search(text, pos)) is not None:
        m = PATTERN.search(text, max(pos, digit.start() - _REACH))
        if m is None:
            return
        yield m
        pos = m.end()


def _date(m: re.Match[str]) -> Figure:
    g = m.group
    if g("iso"):
        y, mo, d = int(g("iy")), int(g("im")), int(g("id"))
    elif g("dnum"):
        y, mo, d = int(g("d3")), int(g("d2")), int(g("d1"))
        if g("ds") == "/" and mo > 12 >= d:  # 12/31/2026: the US order
            mo, d = d, mo
    elif g("dm"):
        y, mo, d = int(g("dmy") or 0), MONTHS[g("dmm").lower().rstrip(".")], int(g("dmd"))
    elif g("md"):
        y, mo, d = int(g("mdy") or 0), MONTHS[g("mdm").lower().rstrip(".")], int(g("mdd"))
    else:
        y, mo, d = int(g("myy")), MONTHS[g("mym").lower().rstrip(".")], 0
    valid = 1 <= mo <= 12 and 0 <= d <= 31
    return Figure(m.group(0), "date", date=(y, mo, d) if valid else None, exempt=None if valid else "label")


def readings(num: str, group_sep: str | None) -> list[tuple[float, int]]:
    """(value, decimals shown) for each way the separators can be read."""
    marks = [i for i, c in enumerate(num) if not c.isdigit()]
    if not marks:
        return [(float(num), 0)]
    last = marks[-1]
    if group_sep is None or num[last] != group_sep or num.startswith("0"):  # the last mark is the decimal mark
        frac = num[last + 1 :]
        return [(float(_digits(num[:last]) + "." + frac), len(frac))]
    if len(marks) == 1 and group_sep in ",.":  # 1,234 / 1.234: thousands in one language, decimals in the other
        return [(float(_digits(num)), 0), (float(num[:last] + "." + num[last + 1 :]), 3)]
    return [(float(_digits(num)), 0)]


def _digits(text: str) -> str:
    return "".join(c for c in text if c.isdigit())


def _number(text: str, m: re.Match[str]) -> Figure:
    g = m.group
    scale_word = (g("scale") or g("scalew") or "").lower()
    scale = SCALES.get(scale_word, 1.0)
    hedged = bool(_HEDGE.search(text, max(0, m.start() - 20), m.start()))
    found: list[Reading] = []
    for value, decimals in readings(g("num"), g("g")):
        unit = 10.0**-decimals
        if hedged and decimals == 0:  # "about 1,200": the trailing zeros are not precision
            stripped = g("num").rstrip("0")
            unit = 10.0 ** (len(g("num")) - len(stripped)) if stripped else 1.0
        found.append((value * scale, unit * scale / 2))
    prefix = (g("pre") or "").strip().lower()
    kind: Kind = "number"
    if g("pct") or prefix in ("%", "yüzde"):
        kind = "percent"
    elif g("cur") or prefix:
        kind = "amount"
    elif found[0][1] * 2 >= scale:  # shown without decimals
        kind = "count"
    return Figure(m.group(0).strip(), kind, tuple(found), exempt=_exemption(text, m, found, scale_word))


def _exemption(text: str, m: re.Match[str], found: list[Reading], scale: str) -> Exempt:
    start, end, g = m.start(), m.end(), m.group
    before, after = text[max(0, start - 2) : start], text[end : end + 3]
    if before[-1:].isalnum() or before[-1:] == "_" or (before[-1:] == "-" and before[:1].isalnum()):
        return "label"  # qwen3, C-1042, TX_77
    if (before[-1:] in ".,:/" and before[:1].isdigit()) or (after[:1] in ".,:" and after[1:2].isdigit()):
        return "label"  # 1.2.3, 10.0.0.1, 3/4/5: versions, addresses, codes
    if after[:1].isalpha() and not (g("cur") or g("scale") or g("scalew") or g("pct")):
        return "ordinal" if _ORDINAL_AFTER.match(text, end) else "label"
    if _ORDINAL_AFTER.match(text, end) and "." not in g("num") and "," not in g("num"):
        return "ordinal"  # 3rd, 1'inci, "3. çeyrek"
    line_start = text.rfind("\n", 0, start) + 1
    if not text[line_start:start].strip(" \t|*>") and after[:2] in (". ", ") "):
        return "list"
    if _LABEL_BEFORE.search(text, max(0, start - 10), start):
        return "label"  # Top 20, page 3, #12
    unit = g("pct") or g("cur") or (g("pre") or "").strip() or scale
    if len(found) == 1 and not unit and g("num").isdigit():
        value = found[0][0]
        if 1900 <= value <= 2100 and len(g("num")) == 4:
            return "year"
        if value <= 10:
            return "small"
    return None


# Tool results are long and machine-written: a plain token scan ([0-9], findall: no match objects, no
# Unicode classes) and fast paths for plain JSON numbers keep the check under a millisecond; the full PATTERN
# is kept for answers and questions, which are short and human-written.
_SOURCE_TOKEN = re.compile(r"[0-9](?:[0-9.,\u00a0\u202f/-]*[0-9])?")
_SOURCE_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})|([0-9]{1,2})[./]([0-9]{1,2})[./]([0-9]{4})")


def source_values(text: str) -> tuple[list[float], list[str], list[Date]]:
    """Distinct numbers (every reading, with the token each came from) and dates of a tool result."""
    tokens = dict.fromkeys(_SOURCE_TOKEN.findall(text))
    plain = [t for t in tokens if t.isdigit()]  # most JSON numbers: converted in one C-level map
    values, texts, dates = list(map(float, plain)), plain, []
    for token in tokens:
        if token.isdigit():
            continue
        if _plain_decimal(token):
            values.append(float(token))  # 4137.52, 137.52: a JSON float, one reading
            texts.append(token)
        elif (date := _SOURCE_DATE.match(token)) is not None:
            y, m, d = (date[1], date[2], date[3]) if date[1] else (date[6], date[5], date[4])
            dates.append((int(y), int(m), int(d)))
        else:
            for part in token.split("-"):  # TX-1000, 2026-12: pieces, each a number
                for value, _ in _token_readings(part) if part else ():
                    values.append(value)
                    texts.append(part)
    return values, texts, dates


def _plain_decimal(token: str) -> bool:
    """One dot, nothing else, and not `1.234` (a thousands group in Turkish): the one reading is float(token)."""
    dot = token.find(".")
    if dot <= 0 or token.count(".") != 1 or not token.replace(".", "").isdigit():
        return False
    return dot > 3 or len(token) - dot - 1 != 3


def _token_readings(token: str) -> list[tuple[float, int]]:
    if token.isdigit():
        return [(float(token), 0)]
    parts = re.split(r"[^0-9]", token)
    marks = [c for c in token if not c.isdigit()]
    grouped = all(len(p) == 3 for p in parts[1:-1]) and len(parts[0]) <= 3
    if len(marks) == 1:
        return readings(token, marks[0] if grouped and len(parts[1]) == 3 else None)
    if grouped and len(set(marks[:-1])) == 1 and (marks[-1] != marks[0] or len(parts[-1]) == 3):
        return readings(token, marks[0])
    return [(float(p), 0) for p in parts if p]  # 1.2.3, 10.0.0.1, 3/4: not one number
