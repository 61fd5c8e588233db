"""Safetensors reading and writing in pure Python (stdlib only), shared by the
independent references in this folder (lol_reference.py, qwen2_reference.py and the
scripts importing them). Tensors are (shape, flat list of Python floats/ints, dtype)."""
import json
import struct


def bf16_bits(x):
    """float -> bfloat16 bit pattern, round to nearest even (as torch's .to(bfloat16))"""
    u = struct.unpack("<I", struct.pack("<f", x))[0]
    rounding = 0x7FFF + ((u >> 16) & 1)
    return ((u + rounding) >> 16) & 0xFFFF


DT = {"F64": ("d", 8), "F32": ("f", 4), "I64": ("q", 8), "I32": ("i", 4), "I16": ("h", 2),
      "U16": ("H", 2), "U32": ("I", 4), "U64": ("Q", 8), "F16": ("e", 2), "BF16": (None, 2),
      "U8": ("B", 1), "I8": ("b", 1), "BOOL": ("?", 1)}


def read_st(path):
    with open(path, "rb") as f:
        raw = f.read()
    hl = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + hl])
    base = 8 + hl
    out = {}
    for name, e in hdr.items():
        if name == "__metadata__":
            continue
        b, en = e["data_offsets"]
        buf = raw[base + b:base + en]
        fmt, sz = DT[e["dtype"]]
        n = (en - b) // sz
        if e["dtype"] == "BF16":
            hs = struct.unpack("<%dH" % n, buf)
            vals = list(struct.unpack("<%df" % n, struct.pack("<%dI" % n, *[h << 16 for h in hs])))
        else:
            vals = list(struct.unpack("<%d%s" % (n, fmt), buf))
        out[name] = (e["shape"], vals, e["dtype"])
    return out


def write_st(path, tensors, metadata=None):
    """tensors: name -> (shape, flat values, dtype in F32/F64/BF16/I64)"""
    hdr, blobs, off = {}, [], 0
    if metadata:
        hdr["__metadata__"] = metadata
    for name in sorted(tensors):
        shape, vals, dt = tensors[name]
        if dt == "BF16":
            blob = struct.pack("<%dH" % len(vals), *[bf16_bits(v) for v in vals])
        else:
            fmt, sz = DT[dt]
            blob = struct.pack("<%d%s" % (len(vals), fmt), *vals)
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(blob)]}
        off += len(blob)
        blobs.append(blob)
    h = json.dumps(hdr).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
