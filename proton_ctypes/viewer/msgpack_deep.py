"""A small iterative MessagePack decoder, used only when ``msgpack`` refuses a document as too deep.

msgpack-python's C unpacker stops at about 1000 levels of nesting (``StackError``); a tree profile uses
two levels per tree level (map + children array), so a call tree deeper than ~500 frames cannot be read
with it.  This decoder has no depth limit (explicit stack) and supports every type a Proton profile uses:
nil, booleans, integers, floats, strings, binaries, arrays and maps.
"""

import struct


class DecodeError(ValueError):
    """The bytes are not a complete, valid MessagePack document."""


_FIXED = {0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: ">b", 0xD1: ">h", 0xD2: ">i", 0xD3: ">q",
          0xCA: ">f", 0xCB: ">d"}
_LENGTH = {0xD9: ">B", 0xDA: ">H", 0xDB: ">I", 0xC4: ">B", 0xC5: ">H", 0xC6: ">I",
           0xDC: ">H", 0xDD: ">I", 0xDE: ">H", 0xDF: ">I"}


def unpackb(data):
    """Decode one MessagePack document from ``data`` (bytes); raise DecodeError on bad or extra input."""
    view = memoryview(data)
    pos = 0
    # stack entries: [container, remaining items, pending map key or a marker]
    stack = []
    _NO_KEY = object()
    result = None

    def take(n):
        nonlocal pos
        if pos + n > len(view):
            raise DecodeError("incomplete input")
        chunk = view[pos:pos + n]
        pos += n
        return chunk

    while True:
        b = take(1)[0]
        value, container = None, None
        if b <= 0x7F:
            value = b
        elif b >= 0xE0:
            value = b - 0x100
        elif 0xA0 <= b <= 0xBF or b in (0xD9, 0xDA, 0xDB):
            n = b & 0x1F if b <= 0xBF else struct.unpack(_LENGTH[b], take(struct.calcsize(_LENGTH[b])))[0]
            value = bytes(take(n)).decode("utf-8", errors="surrogateescape")
        elif 0x90 <= b <= 0x9F or b in (0xDC, 0xDD):
            n = b & 0x0F if b <= 0x9F else struct.unpack(_LENGTH[b], take(struct.calcsize(_LENGTH[b])))[0]
            container = ([], n)
        elif 0x80 <= b <= 0x8F or b in (0xDE, 0xDF):
            n = b & 0x0F if b <= 0x8F else struct.unpack(_LENGTH[b], take(struct.calcsize(_LENGTH[b])))[0]
            container = ({}, 2 * n)
        elif b in _FIXED:
            value = struct.unpack(_FIXED[b], take(struct.calcsize(_FIXED[b])))[0]
        elif b in (0xC4, 0xC5, 0xC6):
            n = struct.unpack(_LENGTH[b], take(struct.calcsize(_LENGTH[b])))[0]
            value = bytes(take(n))
        elif b == 0xC0:
            value = None
        elif b in (0xC2, 0xC3):
            value = b == 0xC3
        else:
            raise DecodeError(f"unsupported MessagePack type byte 0x{b:02x}")
        if container is not None and container[1] > 0:
            stack.append([container[0], container[1], _NO_KEY])
            continue
        if container is not None:
            value = container[0]
        # attach the finished value, closing every container it completes
        while True:
            if not stack:
                result = value
                if pos != len(view):
                    raise DecodeError("extra data after the document")
                return result
            top = stack[-1]
            if isinstance(top[0], list):
                top[0].append(value)
            elif top[2] is _NO_KEY:
                top[2] = value
            else:
                top[0][top[2]] = value
                top[2] = _NO_KEY
            top[1] -= 1
            if top[1] > 0:
                break
            value = stack.pop()[0]
