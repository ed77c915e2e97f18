"""Record batches a test damages or edits on purpose, made whole again where the test needs it."""

from __future__ import annotations

import struct

from crc32c import crc32c

from storage.format import ATTRIBUTES_POS, CRC_POS


def restamp_crc(buf: bytearray, position: int = 0) -> bytes:
    """Recompute the CRC after a test edits a batch on purpose."""
    (length,) = struct.unpack_from(">i", buf, position + 8)
    end = position + 12 + length
    struct.pack_into(">I", buf, position + CRC_POS, crc32c(bytes(buf[position + ATTRIBUTES_POS:end])))
    return bytes(buf)
