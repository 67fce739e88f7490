"""Reals, doubles and numerics in PostgreSQL's text form.

``float4out``/``float8out`` (PostgreSQL 12 and later, ``extra_float_digits`` 1, the default)
print the shortest digits that read back as the same value, in ``%e`` form when the decimal
exponent is below -4 or at least the type's ``FLT_DIG``/``DBL_DIG`` (6 for a real, 15 for a
double), with at least two exponent digits; ``-0``, ``NaN``, ``Infinity`` spelled so.
``numeric_out`` never uses an exponent.

Example: ``text_float4(1.100000023841858)`` (the real ``1.1``) is ``b"1.1"``;
``text_float8(1e300)`` is ``b"1e+300"``; ``text_float8(-0.0)`` is ``b"-0"``;
``text_numeric(Decimal("1E-7"))`` is ``b"0.0000001"``.
"""

from __future__ import annotations

import decimal
import math
import struct
from typing import Any

__all__ = ["text_float4", "text_float8", "text_numeric"]

_F32 = struct.Struct("f")


def _special(v: float) -> bytes | None:
    if math.isnan(v):
        return b"NaN"
    if math.isinf(v):
        return b"Infinity" if v > 0 else b"-Infinity"
    return None


def _layout(digits: str, exponent: int, *, negative: bool, dig: int) -> bytes:
    """``digits`` (no leading or trailing zeros, or ``"0"``) times 10**``exponent`` of its first
    digit, laid out as ``float8out`` lays it out."""
    sign = "-" if negative else ""
    if exponent < -4 or exponent >= dig:
        head = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{head}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}".encode()
    if exponent < 0:
        return f"{sign}0.{'0' * (-exponent - 1)}{digits}".encode()
    whole = digits[: exponent + 1].ljust(exponent + 1, "0")
    rest = digits[exponent + 1 :]
    return f"{sign}{whole}{'.' + rest if rest else ''}".encode()


def _shortest(text: str) -> tuple[str, int]:
    """The significant digits and the exponent of the first of a ``repr``/``%g`` float text."""
    value = decimal.Decimal(text)
    _, digit_tuple, exp = value.as_tuple()
    assert isinstance(exp, int)
    digits = "".join(map(str, digit_tuple)).rstrip("0")
    if not digits:
        return "0", 0
    trailing = len(digit_tuple) - len(digits)
    return digits, exp + trailing + len(digits) - 1


def text_float8(v: Any) -> bytes:
    value = float(v)
    special = _special(value)
    if special is not None:
        return special
    magnitude = abs(value)
    if 1e-4 <= magnitude < 1e15 or magnitude == 0:  # repr's fixed form is float8out's
        text = repr(value)
        return (text[:-2] if text.endswith(".0") else text).encode()
    digits, exponent = _shortest(repr(magnitude))  # repr is the shortest round trip
    return _layout(digits, exponent, negative=math.copysign(1, value) < 0, dig=15)


def text_float4(v: Any) -> bytes:
    value = float(v)
    special = _special(value)
    if special is not None:
        return special
    magnitude = abs(value)
    for significant in range(1, 10):  # 9 significant digits always read back as a real
        text = f"{magnitude:.{significant - 1}e}"
        if _F32.unpack(_F32.pack(float(text)))[0] == magnitude:
            break
    digits, exponent = _shortest(text)
    return _layout(digits, exponent, negative=math.copysign(1, value) < 0, dig=6)


def text_numeric(v: Any) -> bytes:
    """A Decimal in plain digits, its scale kept (``1.50``); wide integers as they are."""
    if isinstance(v, decimal.Decimal):
        return format(v, "f").encode() if v.is_finite() else _special(float(v)) or b"NaN"
    return str(v).encode()
