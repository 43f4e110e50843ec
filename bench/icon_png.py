"""Draw server/ui_static/icon.png: favicon.svg (a check mark on a rounded square) as a 64x64 PNG.

The MCP spec asks clients that show icons to support PNG and JPEG, and SVG only "should": so the server
offers this PNG first (server/mcp_app.py), beside the SVG. Drawn with the standard library, 4x4 samples
a pixel, and written as an indexed PNG with a few levels of coverage: about 400 bytes, which every
tool's entry in tools/list carries. The PNG is committed; this script is how it was made.

Run from the repository root when favicon.svg changes (its shapes are copied below):

    .venv/bin/python bench/icon_png.py
"""

from __future__ import annotations

import math
import struct
import sys
import zlib
from pathlib import Path

SIZE = 64  # pixels a side
UNIT = SIZE / 16  # favicon.svg's viewBox is 16x16
SAMPLES = 4  # a side, per pixel
LEVELS = 8  # coverage steps kept, besides none and full
RADIUS = 3.0  # <rect width="16" height="16" rx="3" fill="#1d2330"/>
SQUARE = (0x1D, 0x23, 0x30)
CHECK = [(4.0, 8.5), (6.5, 11.0), (12.0, 5.0)]  # <path d="M4 8.5l2.5 2.5L12 5" stroke-width="2" .../>
HALF_WIDTH = 1.0
MARK = (0x7F, 0xD1, 0x9B)
OUT = Path(__file__).resolve().parents[1] / "server" / "ui_static" / "icon.png"


def in_square(x: float, y: float) -> bool:
    if not (0 <= x <= 16 and 0 <= y <= 16):
        return False
    cx = min(max(x, RADIUS), 16 - RADIUS)
    cy = min(max(y, RADIUS), 16 - RADIUS)
    return (x - cx) ** 2 + (y - cy) ** 2 <= RADIUS**2


def stroke_outline() -> list[tuple[float, float]]:
    """The stroke of the two-segment path as one polygon: butt ends, a miter join (SVG's defaults)."""
    (x0, y0), (x1, y1), (x2, y2) = CHECK

    def normal(ax: float, ay: float, bx: float, by: float) -> tuple[float, float]:
        length = math.hypot(bx - ax, by - ay)
        return -(by - ay) / length * HALF_WIDTH, (bx - ax) / length * HALF_WIDTH

    n1, n2 = normal(x0, y0, x1, y1), normal(x1, y1, x2, y2)

    def meet(side: int) -> tuple[float, float]:  # where the two offset edges cross
        ax, ay = x0 + side * n1[0], y0 + side * n1[1]
        dx, dy = x1 - x0, y1 - y0
        bx, by = x1 + side * n2[0], y1 + side * n2[1]
        ex, ey = x2 - x1, y2 - y1
        t = ((bx - ax) * ey - (by - ay) * ex) / (dx * ey - dy * ex)
        return ax + t * dx, ay + t * dy

    left = [(x0 + n1[0], y0 + n1[1]), meet(1), (x2 + n2[0], y2 + n2[1])]
    right = [(x2 - n2[0], y2 - n2[1]), meet(-1), (x0 - n1[0], y0 - n1[1])]
    return left + right


def inside(polygon: list[tuple[float, float]], x: float, y: float) -> bool:
    crossed = False
    for (ax, ay), (bx, by) in zip(polygon, polygon[1:] + polygon[:1], strict=True):
        if (ay > y) != (by > y) and x < ax + (y - ay) * (bx - ax) / (by - ay):
            crossed = not crossed
    return crossed


def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def draw() -> bytes:
    outline = stroke_outline()
    palette: list[tuple[int, ...]] = []
    rows = []
    for py in range(SIZE):
        row = bytearray([0])  # filter: none
        for px in range(SIZE):
            square = mark = 0
            for sy in range(SAMPLES):
                for sx in range(SAMPLES):
                    x, y = (px + (sx + 0.5) / SAMPLES) / UNIT, (py + (sy + 0.5) / SAMPLES) / UNIT
                    if in_square(x, y):
                        square += 1
                        mark += inside(outline, x, y)
            a, m = (round(v / SAMPLES**2 * LEVELS) for v in (square, mark))
            mix = tuple(round(s + (k - s) * m / LEVELS) for s, k in zip(SQUARE, MARK, strict=True))
            color = (*mix, round(255 * a / LEVELS)) if a else (0, 0, 0, 0)
            if color not in palette:
                palette.append(color)
            row.append(palette.index(color))
        rows.append(bytes(row))
    assert len(palette) <= 256, len(palette)
    header = struct.pack(">IIBBBBB", SIZE, SIZE, 8, 3, 0, 0, 0)  # 8-bit indexed colour
    return b"".join(
        [
            b"\x89PNG\r\n\x1a\n",
            chunk(b"IHDR", header),
            chunk(b"PLTE", b"".join(bytes(c[:3]) for c in palette)),
            chunk(b"tRNS", bytes(c[3] for c in palette)),
            chunk(b"IDAT", zlib.compress(b"".join(rows), 9)),
            chunk(b"IEND", b""),
        ]
    )


if __name__ == "__main__":
    data = draw()
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else OUT
    target.write_bytes(data)
    print(f"{target}: {len(data)} bytes")
