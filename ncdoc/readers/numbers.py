"""Numbers in text someone else wrote: ASCII digits only, and never longer than a real value can be.

`str.isdigit()` is True for '²' and '٣' (int('²') raises), and `int()` stops at 4,300 digits with a
ValueError (and is slow well before that); a number of the kind ncdoc reads (counts, sizes in bytes,
ids, ports, versions) fits in 64 bits, 20 digits. Every reader of pasted or captured text decides
"is this a number" here, so a number it cannot use is simply not one, at any length.

Only builtins: this is on the check path.
"""

from __future__ import annotations

MAX_DIGITS = 20          # 2**64 - 1 has 20 digits


def is_digits(text: str, max_digits: int = MAX_DIGITS) -> bool:
    """True when `text` is 1 to `max_digits` ASCII digits ('0'-'9'): safe to give int()."""
    return 0 < len(text) <= max_digits and text.isascii() and text.isdigit()


def int_or_none(text: str, max_digits: int = MAX_DIGITS) -> int | None:
    """int(`text`) when it is ASCII digits with an optional sign and at most `max_digits` digits, else None."""
    body = text[1:] if text[:1] in "+-" and len(text) > 1 else text
    if not is_digits(body, max_digits):
        return None
    return -int(body) if text[:1] == "-" else int(body)


def float_or_none(text: str, max_chars: int = 40) -> float | None:
    """float(`text`) for a finite decimal number of at most `max_chars` ASCII characters, else None
    (no 'inf', 'nan', '1e999', unicode digits or underscores)."""
    if not 0 < len(text) <= max_chars or not text.isascii() or "_" in text:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value - value == 0 else None


def finite(value: float) -> bool:
    """True unless `value` is inf or nan."""
    return value - value == 0


__all__ = ["MAX_DIGITS", "is_digits", "int_or_none", "float_or_none", "finite"]
