"""What a user name may contain, for every place a name is believed: headers, tokens, API-key labels, policy entries.

A name is who the policy, the rate limit, the audit log and the notes take the caller to be, so one that can read
as another is refused, never repaired: control and format characters, surrogates, private-use and unassigned code
points, line and paragraph separators (Unicode categories below); the Default_Ignorable_Code_Point characters
(fillers, joiners, variation selectors: U+3164, U+034F, U+FE0F…) and blank look-alikes (U+2800); every space but
U+0020, and a space at either end; and a name that mixes Latin letters with Cyrillic or Greek ones (`bоss` with a
Cyrillic о). No normalisation or case folding happens here.
"""

from __future__ import annotations

import unicodedata

# Cc control, Cf format (incl. U+200B, U+00AD, U+202A-U+202E, U+2066-U+2069), Cs surrogate, Co private use,
# Cn unassigned, Zl/Zp line and paragraph separators: none is ever part of a name a person can read.
REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
# Default_Ignorable_Code_Point, from Unicode's DerivedCoreProperties.txt (15.1): rendered as nothing. Python's
# unicodedata does not expose the property, so its ranges are listed here (most are Cf, refused above anyway).
DEFAULT_IGNORABLE = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
    (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
    (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)  # fmt: skip
BLANKS = frozenset({0x2800})  # BRAILLE PATTERN BLANK: a visible "character" that shows nothing
CONFUSABLE_SCRIPTS = ("CYRILLIC", "GREEK")  # scripts whose letters pass for Latin ones


def ignorable(ch: str) -> bool:
    code = ord(ch)
    return any(low <= code <= high for low, high in DEFAULT_IGNORABLE) or code in BLANKS


def refused_char(ch: str) -> bool:
    """A character no name may hold, wherever it stands."""
    category = unicodedata.category(ch)
    return category in REFUSED_CATEGORIES or (category == "Zs" and ch != " ") or ignorable(ch)


def _script(ch: str) -> str | None:
    if not unicodedata.category(ch).startswith("L"):
        return None
    return unicodedata.name(ch, "").split(" ", 1)[0] or None


def problem(name: str) -> str | None:
    """Why `name` cannot be a user name (a phrase to follow "the user name …"), or None when it can."""
    for position, ch in enumerate(name, start=1):
        if refused_char(ch):
            what = unicodedata.name(ch, "an invisible or control character")
            return f"contains U+{ord(ch):04X} ({what}) at position {position}"
    if name != name.strip(" "):
        return "starts or ends with a space"
    scripts = {s for s in map(_script, name) if s in ("LATIN", *CONFUSABLE_SCRIPTS)}
    if "LATIN" in scripts and len(scripts) > 1:
        other = sorted(scripts - {"LATIN"})[0].title()
        return f"mixes Latin and {other} letters (a look-alike of another name)"
    return None
