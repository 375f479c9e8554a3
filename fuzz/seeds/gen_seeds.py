#!/usr/bin/env python3
"""Writes the fuzz targets' seed inputs (seeds/<target>/*) with a tiny BSON encoder.

Run from anywhere: python3 fuzz/seeds/gen_seeds.py
"""
import os
import struct
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))


def cstr(s):
    return s.encode() + b"\0"


def elem(k, v):
    if isinstance(v, bool):
        return b"\x08" + cstr(k) + (b"\x01" if v else b"\x00")
    if isinstance(v, int):
        return b"\x10" + cstr(k) + struct.pack("<i", v)
    if isinstance(v, float):
        return b"\x01" + cstr(k) + struct.pack("<d", v)
    if isinstance(v, str):
        b = v.encode() + b"\0"
        return b"\x02" + cstr(k) + struct.pack("<i", len(b)) + b
    if v is None:
        return b"\x0a" + cstr(k)
    if isinstance(v, tuple) and v[0] == "regex":
        return b"\x0b" + cstr(k) + cstr(v[1]) + cstr(v[2])
    if isinstance(v, list):
        return b"\x04" + cstr(k) + doc({str(i): x for i, x in enumerate(v)})
    if isinstance(v, dict):
        return b"\x03" + cstr(k) + doc(v)
    raise TypeError(v)


def doc(d):
    body = b"".join(elem(k, v) for k, v in d.items()) + b"\0"
    return struct.pack("<i", len(body) + 4) + body


def write(target, name, data):
    os.makedirs(os.path.join(HERE, target), exist_ok=True)
    with open(os.path.join(HERE, target, name), "wb") as f:
        f.write(data)


# wire: mode 0 (raw message), 1 (checksummed OP_MSG), 2 (compressed here), 3 (raw compressed)
def op_msg_body(cmd, seq=None):
    b = struct.pack("<I", 0) + b"\0" + doc(cmd)
    if seq:
        name, docs = seq
        payload = cstr(name) + b"".join(doc(d) for d in docs)
        b += b"\x01" + struct.pack("<i", 4 + len(payload)) + payload
    return b


def header(length, op):
    return struct.pack("<iiii", length, 1, 0, op)


find = op_msg_body({"find": "c", "filter": {"a": {"$gt": 1}}, "$db": "d"})
ins = op_msg_body({"insert": "c", "$db": "d"}, ("documents", [{"_id": 1}, {"_id": 2, "x": "y"}]))
query = (struct.pack("<i", 0) + cstr("admin.$cmd") + struct.pack("<ii", 0, -1)
         + doc({"$query": {"isMaster": 1}, "$readPreference": {"mode": "primary"}}))
write("wire", "msg_find", b"\x00" + header(16 + len(find), 2013) + find)
write("wire", "msg_insert_seq", b"\x00" + header(16 + len(ins), 2013) + ins)
write("wire", "query_handshake", b"\x00" + header(16 + len(query), 2004) + query)
write("wire", "msg_checksum", b"\x01" + ins)
for cid, name in [(0, "noop"), (1, "snappy"), (2, "zlib"), (3, "zstd")]:
    write("wire", f"compressed_{name}_msg", b"\x02" + bytes([cid, 64, 0]) + ins)
write("wire", "compressed_zlib_query", b"\x02" + bytes([2, 64, 1]) + query)
z = zlib.compress(find)
write("wire", "raw_zlib", b"\x03" + bytes([2, 0, 0]) + z + struct.pack("<i", len(find)))

# matcher: filter then document
cases = [
    ({"a": 1}, {"a": [1, 2]}),
    ({"a.b": {"$gte": 2, "$lt": 9}}, {"a": [{"b": 1}, {"b": 5}]}),
    ({"$or": [{"a": None}, {"b": {"$in": [1, ("regex", "^x", "i")]}}]}, {"b": "Xy"}),
    ({"a": {"$elemMatch": {"b": {"$exists": True}, "c": {"$ne": 3}}}}, {"a": [{"b": 1, "c": 2}]}),
    ({"a": {"$all": [1, 2], "$size": 2}, "n": {"$mod": [3, 1]}}, {"a": [2, 1], "n": 7}),
    ({"a": {"$not": {"$type": ["string", 16]}}, "$nor": [{"z": 1}]}, {"a": 1.5}),
    ({"$expr": {"$gt": ["$a", {"$add": ["$b", 1]}]}}, {"a": 5, "b": 3}),
    ({"a": {"$regex": "b+", "$options": "m"}}, {"a": "abbb"}),
]
for i, (f, d) in enumerate(cases):
    write("matcher", f"case{i}", doc(f) + doc(d))

# update: flags, update, document[, array filters]
ucases = [
    (0, {"$set": {"a.b": 1, "c": [1, 2]}, "$inc": {"n": 2}}, {"_id": 1, "n": 1}, None),
    (0, {"$push": {"a": {"$each": [3, 1], "$sort": 1, "$slice": -2}}}, {"a": [5]}, None),
    (0, {"$unset": {"x": ""}, "$rename": {"y": "z"}, "$min": {"m": 0}}, {"x": 1, "y": 2}, None),
    (4, {"$set": {"a.$[e].b": 9}}, {"a": [{"b": 1}, {"b": 5}]}, {"0": {"e.b": {"$gt": 2}}}),
    (8 + 0, {"$set": {"a.$": 7}, "$pull": {"p": {"$gte": 6}}}, {"a": [1, 2], "p": [5, 6, 7]}, None),
    (1, {"$setOnInsert": {"s": 1}, "$addToSet": {"t": {"$each": [1, 1, 2]}}}, {}, None),
    (0, {"x": 1, "y": {"z": 2}}, {"_id": 3, "x": 0}, None),
    (2, {"0": {"$set": {"c": {"$concat": ["$a", "-"]}}}, "1": {"$unset": "a"}}, {"a": "q"}, None),
    (0, {"$mul": {"n": 2.5}, "$bit": {"b": {"and": 3}}, "$currentDate": {"d": True}},
     {"n": 4, "b": 7}, None),
    (0, {"$pop": {"a": -1}, "$pullAll": {"b": [1]}}, {"a": [1, 2], "b": [1, 2, 1]}, None),
]
for i, (fl, u, d, af) in enumerate(ucases):
    write("update", f"case{i}", bytes([fl]) + doc(u) + doc(d) + (doc(af) if af else b""))

# The wave-1 crashers (each once overflowed the server's stack) and the structures the
# deep-structure generators build, as seeds.
LONG5000 = ".".join(["a"] * 5000)
for i, op in enumerate(["$set", "$unset", "$push"]):
    write("update", f"crasher_{op[1:]}_5000_parts", bytes([0]) + doc({op: {LONG5000: 1}}) + doc({"a": []}))
write("update", "crasher_addfields_5000_parts", bytes([2]) + doc({"0": {"$addFields": {LONG5000: 1}}}) + doc({}))
write("matcher", "crasher_upsert_5000_parts", doc({LONG5000: 1}) + doc({"a": 1}))
write("matcher", "crasher_projection_50000_parts",
      doc({"a": 1}) + doc({"a": 1}) + doc({".".join(["a"] * 50000): 1}))
for kind in range(8):
    write("matcher", f"deep_{kind}", bytes([0xDE]) + struct.pack("<H", 250) + bytes([kind, 0x5A]))
for op in range(8):
    write("update", f"deep_{op}", bytes([0xDE]) + struct.pack("<H", 6000) + bytes([op, 120]))
write("wire", "deep_body_1000", bytes([4]) + struct.pack("<H", 1000) + bytes([0x33, 0]))
write("wire", "deep_sequence_300", bytes([4]) + struct.pack("<H", 150) + bytes([0x0F, 1]))
write("wire", "many_sequences", bytes([4]) + struct.pack("<H", 2000) + bytes([0, 0x80]))
two = struct.pack("<I", 0) + b"\0" + doc({"ping": 1, "$db": "admin"}) + b"\0" + doc({"ping": 1, "$db": "admin"})
write("wire", "two_body_sections", b"\x00" + header(16 + len(two), 2013) + two)
