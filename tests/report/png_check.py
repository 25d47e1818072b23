#!/usr/bin/python3
"""Prints 'width height colours' of a PNG (8-bit RGB/RGBA, any filter): the test checks that a
screenshot is not blank. Each further pair of arguments, a box and a colour
(png_check.py PNG [LEFT,TOP,WIDTH,HEIGHT #rrggbb]...), adds how many pixels inside the box have that
colour (each channel within 24): the test checks that a chart's series were drawn where the chart
is. Standard library only (zlib + struct)."""
import struct
import sys
import zlib


def main(path, *queries):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width, height, colour_type = 8, b"", 0, 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour_type = struct.unpack(">IIBB", body[:10])
            assert depth == 8, "only 8-bit PNGs"
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    channels = {2: 3, 6: 4}[colour_type]
    raw = zlib.decompress(idat)
    stride = width * channels
    prev = bytearray(stride)
    colours = set()
    boxes = [[int(v) for v in box.split(",")] for box in queries[0::2]]
    wants = [bytes.fromhex(colour.lstrip("#")) for colour in queries[1::2]]
    matches = [0] * len(boxes)
    for row in range(height):
        start = row * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up, up_left = prev[i], prev[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - up_left
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - up_left)
                pred = left if pa <= pb and pa <= pc else (up if pb <= pc else up_left)
                line[i] = (line[i] + pred) & 255
        for q, (left, top, box_w, box_h) in enumerate(boxes):
            if top <= row < top + box_h:
                want = wants[q]
                for x in range(max(left, 0), min(left + box_w, width)):
                    px = line[x * channels:x * channels + 3]
                    matches[q] += all(abs(px[c] - want[c]) <= 24 for c in range(3))
        if row % 4 == 0:
            for i in range(0, stride, channels * 4):
                colours.add(bytes(line[i:i + 3]))
        prev = line
    print(width, height, len(colours), *matches)


if __name__ == "__main__":
    main(*sys.argv[1:])
