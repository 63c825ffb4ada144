"""Bounded zstd inflation: one frame, never inflated past the bytes the caller allows.

A compressed body (queen-mq's binary push, flag 1 and 8) and a compressed timer payload
(``payloadZstd``) are both inflated here. A frame that declares more than the limit is refused
before anything is inflated, and one that turns out to hold more stops at the limit, so a small
request can never make the broker hold a large buffer.
"""

from __future__ import annotations

import zstandard

from reginamq.common.errors import BadRequest

_decompressor = zstandard.ZstdDecompressor()


def inflate(frame: bytes, size: int | None, limit: int) -> bytes:
    """One zstd frame of ``size`` bytes if given, refused (413) before inflating when it
    declares more than ``limit``."""
    declared = _frame_size(frame)
    if (size is not None and size > limit) or declared > limit:
        raise BadRequest(f"the decompressed body is larger than {limit} bytes", status=413)
    try:
        raw = _decompressor.decompress(frame, max_output_size=limit, allow_extra_data=False)
    except zstandard.ZstdError as error:
        raise BadRequest(f"not one zstd frame within {limit} bytes: {error}") from None
    if size is not None and len(raw) != size:
        raise BadRequest(f"the body decompressed to {len(raw)} bytes, its header says {size}")
    return raw


def _frame_size(frame: bytes) -> int:
    """The content size a frame declares, or -1 (none declared, or not a zstd frame: the
    decompression says which)."""
    try:
        return zstandard.frame_content_size(frame)
    except zstandard.ZstdError:
        return -1
