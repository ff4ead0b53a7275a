"""Case- and accent-insensitive matching for Turkish text ("YILMAZ", "yilmaz" and "Yılmaz" all match)."""

from __future__ import annotations

# Turkish letters folded to ASCII after lower(); the same pair feeds SQL translate() so the database agrees.
FOLD_FROM, FOLD_TO = "ışçğöüâîû", "iscgouaiu"
_TABLE = str.maketrans(FOLD_FROM, FOLD_TO)


def fold(text: str) -> str:
    # "İ".lower() is "i" + U+0307 (combining dot); drop the dot so it matches a plain "i".
    return text.lower().replace("\u0307", "").translate(_TABLE)
