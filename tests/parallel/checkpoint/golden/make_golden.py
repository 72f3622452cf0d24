#!/usr/bin/env python3
"""Golden files for tests/parallel/checkpoint/golden_test.cc: interop of weft's
partitioned checkpoint format (parallel/checkpoint/format.h) with Python.

1. Reads golden/full/step-00000001, a full checkpoint weft wrote (regenerate it
   with `WEFT_WRITE_GOLDEN=$PWD/tests/parallel/checkpoint/golden/full
   bazel-bin/tests/parallel/checkpoint/golden_test`): checks the manifest's own
   CRC-32 and every file's size and CRC-32 with zlib, checks that the model
   index's weight_map covers the file, loads model.safetensors with
   safetensors.torch into a PyTorch nn.Sequential with the same parameter names
   (load_state_dict strict), and records an input and PyTorch's output in
   golden/torch_seen.safetensors (metadata: the keys it loaded, versions).
2. Writes golden/python_written/step-00000003, a partial checkpoint made from
   the format description alone: two model shards (stage 0: 0.*, stage 1:
   2.*, of Linear(4, 5), Tanh, Linear(5, 3), Tanh), element i of the k-th
   tensor in sorted name order (k + 1) * 0.01 * i; an SGD state whose
   2.weight momentum (0.5 + i) is split over two files as ZeRO would write it;
   the indexes, trainer_state.json and the manifest with CRC-32s.

Made with: Debian's python3-torch 1.13 and python3-numpy, safetensors 0.8.0
from PyPI (python3 -m venv --system-site-packages V && V/bin/pip install
safetensors); run from the repository root: V/bin/python
tests/parallel/checkpoint/golden/make_golden.py
"""
import json
import os
import struct
import zlib

import torch
from safetensors.torch import load_file, save

HERE = os.path.dirname(os.path.abspath(__file__))


def crc(b):
    return "%08x" % (zlib.crc32(b) & 0xFFFFFFFF)


def check_manifest(d):
    text = open(os.path.join(d, "manifest.json"), "rb").read()
    needle = b'"manifest_crc32": "'
    pos = text.index(needle) + len(needle)
    stored = text[pos:pos + 8].decode()
    assert crc(text[:pos] + b"00000000" + text[pos + 8:]) == stored, "manifest CRC"
    m = json.loads(text)
    assert m["format"] == "weft.partitioned_checkpoint" and m["version"] == 1, m
    for name, rec in m["files"].items():
        data = open(os.path.join(d, name), "rb").read()
        assert len(data) == rec["bytes"] and crc(data) == rec["crc32"], name
    return m


def torch_model():
    return torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3), torch.nn.Tanh())


def read_full():
    d = os.path.join(HERE, "full", "step-00000001")
    m = check_manifest(d)
    assert m["kind"] == "full", m["kind"]
    index = json.load(open(os.path.join(d, "model.safetensors.index.json")))
    sd = load_file(os.path.join(d, "model.safetensors"))
    assert set(index["weight_map"]) == set(sd), (index["weight_map"], list(sd))
    model = torch_model()
    model.load_state_dict(sd, strict=True)
    x = torch.linspace(-1.0, 1.0, 12, dtype=torch.float32).reshape(3, 4)
    with torch.no_grad():
        y = model(x)
    meta = {"loaded_keys": ",".join(sorted(sd)), "torch": torch.__version__, "producer": "make_golden.py"}
    with open(os.path.join(HERE, "torch_seen.safetensors"), "wb") as f:
        f.write(save({"x": x, "y": y.contiguous()}, metadata=meta))
    print("PyTorch loaded", sorted(sd), "output", y.tolist())


def shard(tensors, names):
    """safetensors bytes and, per tensor, (data_begin, data_end, crc32)."""
    data = save({k: tensors[k] for k in names}, metadata=None)
    (hl,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + hl])
    rec = {}
    for k in names:
        b, e = header[k]["data_offsets"]
        rec[k] = (b, e, crc(data[8 + hl + b:8 + hl + e]))
    return data, rec


def piece(file, t_shape, begin, end, rec, dtype="F32"):
    b, e, c = rec
    return {"file": file, "dtype": dtype, "shape": list(t_shape), "begin": begin, "end": end,
            "data_offsets": [b, e], "crc32": c}


def write_python_checkpoint():
    d = os.path.join(HERE, "python_written", "step-00000003")
    os.makedirs(d, exist_ok=True)
    shapes = {"0.bias": (5,), "0.weight": (5, 4), "2.bias": (3,), "2.weight": (3, 5)}
    model = {}
    for k, name in enumerate(sorted(shapes)):
        n = 1
        for s in shapes[name]:
            n *= s
        model[name] = ((k + 1) * 0.01 * torch.arange(n, dtype=torch.float64)).to(torch.float32).reshape(shapes[name])
    files, manifest_files = {}, {}
    model_pieces, opt_pieces = {}, {}
    for i, names in enumerate([["0.bias", "0.weight"], ["2.bias", "2.weight"]]):
        fname = "model-%05d-of-00002.safetensors" % (i + 1)
        data, rec = shard(model, names)
        files[fname] = data
        for k in names:
            n = model[k].numel()
            model_pieces[k] = [piece(fname, shapes[k], 0, n, rec[k])]
    # SGD state by name: options for every parameter, momentum for 2.weight split over two files.
    momentum = 0.5 + torch.arange(15, dtype=torch.float32)
    opt0 = {"options.%s.%s" % (p, o): torch.tensor(v, dtype=torch.float64)
            for p in shapes for o, v in [("lr", 0.1), ("momentum", 0.9), ("dampening", 0.0),
                                         ("weight_decay", 0.0), ("nesterov", 0.0)]}
    opt0["state.2.weight.momentum_buffer"] = momentum[:6].clone()
    opt1 = {"state.2.weight.momentum_buffer": momentum[6:].clone()}
    for i, tensors in enumerate([opt0, opt1]):
        fname = "optimizer-%05d-of-00002.safetensors" % (i + 1)
        data, rec = shard(tensors, sorted(tensors))
        files[fname] = data
        for k in sorted(tensors):
            if k.startswith("state."):
                b, e = (0, 6) if i == 0 else (6, 15)
                opt_pieces.setdefault(k, []).append(piece(fname, (3, 5), b, e, rec[k]))
            else:
                opt_pieces[k] = [piece(fname, (), 0, 1, rec[k], "F64")]

    def index(pieces, fmt):
        weight_map = {k: v[0]["file"] for k, v in pieces.items() if len(v) == 1}
        total = sum(p["data_offsets"][1] - p["data_offsets"][0] for v in pieces.values() for p in v)
        return {"metadata": {"total_size": total, "format": fmt, "weft.version": 1},
                "weight_map": weight_map, "weft.pieces": pieces}

    files["model.safetensors.index.json"] = (json.dumps(index(model_pieces, "weft.model"), indent=1) + "\n").encode()
    files["optimizer.safetensors.index.json"] = (
        json.dumps(index(opt_pieces, "weft.optimizer"), indent=1) + "\n").encode()
    trainer = {"step": 3, "epoch": 1, "batch": 2, "metadata": {"producer": "make_golden.py"}, "world": 2,
               "rng": [{"seed": 1, "offset": 0}, {"seed": 2, "offset": 4}], "scheduler": None}
    files["trainer_state.json"] = (json.dumps(trainer, indent=2) + "\n").encode()
    for name, data in files.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
        manifest_files[name] = {"bytes": len(data), "crc32": crc(data), "rank": 0 if "00002" not in name else 1}
    manifest = {"format": "weft.partitioned_checkpoint", "version": 1, "kind": "partial", "step": 3, "epoch": 1,
                "batch": 2, "layout": {"world": 2, "pp": 2, "dp": 1, "zero": False, "balance": [2, 2]},
                "optimizer": True, "files": manifest_files, "manifest_crc32": "00000000"}
    text = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
    text = text.replace(b'"manifest_crc32": "00000000"', b'"manifest_crc32": "%s"' % crc(text).encode())
    with open(os.path.join(d, "manifest.json"), "wb") as f:
        f.write(text)
    check_manifest(d)
    print("wrote", d)


if __name__ == "__main__":
    read_full()
    write_python_checkpoint()
