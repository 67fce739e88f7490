"""Result values onto the wire: PostgreSQL's text and binary formats of the simple types.

Text is what ``psql`` prints (``t``/``f``, ``\\x`` hex for bytea); binary is PostgreSQL's send
format (big-endian integers and floats, base-10000 numeric digits). Dates, times, timestamps
and intervals are :mod:`.datetimes`, reals, doubles and numerics' text :mod:`.numbers`, arrays
:mod:`.arrays`; :mod:`.types` pairs them with an OID per Arrow type.

Example: ``text_bool(True)`` is ``b"t"``; ``bin_numeric(Decimal("-1.5"))`` is PostgreSQL's
``numeric_send`` of ``-1.5``.
"""

from __future__ import annotations

import decimal
import json
import struct
import uuid
from collections.abc import Callable
from typing import Any

__all__ = [
    "Encoder",
    "bin_bool",
    "bin_numeric",
    "bin_struct",
    "bin_uuid",
    "text_any",
    "text_bool",
    "text_bytes",
    "text_str",
]

Encoder = Callable[[Any], bytes]


# -- text encoders ------------------------------------------------------------------------------
def text_bool(v: Any) -> bytes:
    return b"t" if v else b"f"


def text_bytes(v: Any) -> bytes:
    return b"\\x" + bytes(v).hex().encode()


def text_any(v: Any) -> bytes:
    if isinstance(v, dict | list):
        return json.dumps(v, default=str).encode()
    return str(v).encode()


def text_str(v: Any) -> bytes:
    return str(v).encode("utf-8")


# -- binary encoders ----------------------------------------------------------------------------
def bin_struct(fmt: str) -> Encoder:
    """The binary encoder of one value packed with ``struct`` format ``fmt``."""
    packer = struct.Struct(fmt)
    return lambda v: packer.pack(v)


def bin_bool(v: Any) -> bytes:
    return b"\x01" if v else b"\x00"


def bin_numeric(v: Any) -> bytes:
    value = decimal.Decimal(v)
    if value.is_nan():
        return struct.pack("!hhhh", 0, 0, 0xC000, 0)
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    dscale = max(0, -exponent)
    text = "".join(map(str, digits))
    # Align to base-10000 groups around the decimal point.
    int_len = len(text) + exponent
    int_part = text[:int_len] if int_len > 0 else ""
    frac_part = text[int_len:] if int_len > 0 else "0" * (-int_len) + text
    int_part = int_part.zfill((len(int_part) + 3) // 4 * 4)
    frac_part = frac_part.ljust((len(frac_part) + 3) // 4 * 4, "0")
    groups = [int(int_part[i : i + 4]) for i in range(0, len(int_part), 4)]
    weight = len(groups) - 1
    groups += [int(frac_part[i : i + 4]) for i in range(0, len(frac_part), 4)]
    while groups and groups[0] == 0:
        groups.pop(0)
        weight -= 1
    while groups and groups[-1] == 0:
        groups.pop()
    if not groups:
        weight = 0
    head = struct.pack("!hhhh", len(groups), weight, 0x4000 if sign else 0, dscale)
    return head + struct.pack(f"!{len(groups)}h", *groups)


def bin_uuid(v: Any) -> bytes:
    return uuid.UUID(str(v)).bytes
