#!/usr/bin/env python3
"""Writes tests/nn/golden/rnn_golden.safetensors: PyTorch's outputs, final
states and gradients for the recurrent layers of nn/rnn.h (nn.RNN with tanh and
relu, nn.LSTM including proj_size, nn.GRU, and the RNNCell, LSTMCell and
GRUCell), which tests/nn/rnn_test.cc compares against.

Made with: torch 2.15.0 (PyPI build 2.15.0+cu132, run on CPU) and safetensors 0.8.0, Python 3.11.7:
  /root/.cache/weft/torch-venv/bin/python tools/golden/make_rnn_golden.py

Inputs and parameters are float32 values from closed-form formulas (see
`wave`) and are stored in the file, so weft loads them rather than
regenerating them. PyTorch then runs in float64 on exactly those values and the
results are rounded to float32, so the file holds the exact answer for the
stored inputs (a float32 or float64 weft run is compared with it). dropout is 0
everywhere (the test checks dropout on its own). Names are "<case>.<field>":
- inputs: ".x", ".h0" and ".c0" (initial states; absent for the cases that use
  zeros), ".p.<param>" (every parameter, PyTorch's name), and the upstream
  gradients ".go" (of the output), ".ghn" (of h_n), ".gcn" (of c_n, LSTM only);
- results: ".out", ".hn", ".cn", gradients ".dx", ".dh0", ".dc0" and
  ".g.<param>".
For the cells, ".out" is the new h (and ".cn" the new c of an LSTMCell), with
upstream gradients ".go" (and ".gcn"); there is no ".hn".
The metadata holds, per case, "<case>.config" (the layer and its options, which
the test checks against its own table) and "<case>.params" (PyTorch's parameter
names in registration order, comma separated).
"""
import os
import sys

import torch
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_util import wave  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "tests", "nn", "golden", "rnn_golden.safetensors")

T, N, IN, HIDDEN = 5, 3, 4, 6


# (case, kind, options, input shape tag, with initial state)
#   kind: "RNN_TANH", "RNN_RELU", "LSTM", "GRU", or a cell "RNNCell_TANH", "RNNCell_RELU", "LSTMCell", "GRUCell"
#   options: hidden_size (default HIDDEN), num_layers, bias, batch_first, bidirectional, proj_size
#   input: "batched" ((T, N, IN), or (N, T, IN) with batch_first) or "unbatched" ((T, IN); a cell: (IN))
CASES = [
    ("rnn_tanh", "RNN_TANH", dict(num_layers=1), "batched", True),
    ("rnn_relu_2l_bf", "RNN_RELU", dict(num_layers=2, batch_first=True), "batched", False),
    ("rnn_tanh_bidir_unbatched", "RNN_TANH", dict(num_layers=2, bidirectional=True), "unbatched", True),
    ("lstm_2l_bidir", "LSTM", dict(num_layers=2, bidirectional=True, hidden_size=4), "batched", True),
    ("lstm_bf_nobias", "LSTM", dict(bias=False, batch_first=True), "batched", False),
    ("lstm_proj_bidir", "LSTM", dict(num_layers=2, bidirectional=True, hidden_size=4, proj_size=3), "batched", True),
    ("lstm_unbatched", "LSTM", dict(), "unbatched", False),
    ("gru_2l", "GRU", dict(num_layers=2), "batched", True),
    ("gru_bidir_nobias_bf", "GRU", dict(bidirectional=True, bias=False, batch_first=True), "batched", False),
    ("rnn_cell_tanh", "RNNCell_TANH", dict(), "batched", True),
    ("rnn_cell_relu_nobias", "RNNCell_RELU", dict(bias=False), "batched", False),
    ("lstm_cell", "LSTMCell", dict(), "batched", True),
    ("gru_cell", "GRUCell", dict(), "batched", True),
    ("gru_cell_unbatched_nobias", "GRUCell", dict(bias=False), "unbatched", False),
]


def make_module(kind, opts):
    H = opts.get("hidden_size", HIDDEN)
    if kind.endswith("Cell") or "Cell_" in kind:
        bias = opts.get("bias", True)
        if kind == "RNNCell_TANH":
            return torch.nn.RNNCell(IN, H, bias=bias, nonlinearity="tanh")
        if kind == "RNNCell_RELU":
            return torch.nn.RNNCell(IN, H, bias=bias, nonlinearity="relu")
        return {"LSTMCell": torch.nn.LSTMCell, "GRUCell": torch.nn.GRUCell}[kind](IN, H, bias=bias)
    kw = dict(num_layers=opts.get("num_layers", 1), bias=opts.get("bias", True),
              batch_first=opts.get("batch_first", False), bidirectional=opts.get("bidirectional", False))
    if kind.startswith("RNN_"):
        return torch.nn.RNN(IN, H, nonlinearity=kind[4:].lower(), **kw)
    if kind == "LSTM":
        return torch.nn.LSTM(IN, H, proj_size=opts.get("proj_size", 0), **kw)
    return torch.nn.GRU(IN, H, **kw)


def config_string(kind, opts, shape, with_state):
    o = dict(hidden_size=HIDDEN, num_layers=1, bias=True, batch_first=False, bidirectional=False, proj_size=0)
    o.update(opts)
    return (f"{kind} input_size={IN} hidden_size={o['hidden_size']} num_layers={o['num_layers']} bias={int(o['bias'])} "
            f"batch_first={int(o['batch_first'])} bidirectional={int(o['bidirectional'])} "
            f"proj_size={o['proj_size']} input={shape} state={int(with_state)}")


def build():
    g, meta = {}, {}

    def put(case, **tensors):
        for k, v in tensors.items():
            g[f"{case}.{k}"] = v.detach().to(torch.float32).contiguous()

    for ci, (case, kind, opts, shape, with_state) in enumerate(CASES):
        m = make_module(kind, opts)
        names = [n for n, _ in m.named_parameters()]
        meta[f"{case}.config"] = config_string(kind, opts, shape, with_state)
        meta[f"{case}.params"] = ",".join(names)
        # Parameters: float32 wave values of a size like PyTorch's init bound 1/sqrt(hidden_size).
        params = {}
        for pi, (n, p) in enumerate(m.named_parameters()):
            params[n] = wave(tuple(p.shape), 0.35, 0.31 + 0.07 * pi + 0.011 * ci, 0.5 * pi + ci, 0.02 * (pi % 3 - 1))
        with torch.no_grad():
            for n, p in m.named_parameters():
                p.copy_(params[n])
        m = m.double()

        cell = "Cell" in kind
        lstm = kind.startswith("LSTM")
        D = 2 if opts.get("bidirectional", False) else 1
        L = opts.get("num_layers", 1)
        H = opts.get("hidden_size", HIDDEN)
        Hout = opts.get("proj_size", 0) or H
        if cell:
            xs = (N, IN) if shape == "batched" else (IN,)
            hs = (N, H) if shape == "batched" else (H,)
            cs, outs = hs, hs
        else:
            if shape == "unbatched":
                xs = (T, IN)
            else:
                xs = (N, T, IN) if opts.get("batch_first", False) else (T, N, IN)
            lead = (L * D,) if shape == "unbatched" else (L * D, N)
            hs, cs = lead + (Hout,), lead + (H,)
            outs = xs[:-1] + (D * Hout,)

        x0 = wave(xs, 1.2, 0.43 + 0.01 * ci, 0.3 * ci, 0.1)
        fields = dict(x=x0)
        x = x0.double().requires_grad_(True)
        h = c = None
        if with_state:
            h0 = wave(hs, 0.6, 0.29 + 0.013 * ci, 1.0 + ci)
            fields["h0"] = h0
            h = h0.double().requires_grad_(True)
            if lstm:
                c0 = wave(cs, 0.8, 0.53 + 0.007 * ci, 2.0 + ci)
                fields["c0"] = c0
                c = c0.double().requires_grad_(True)

        go = wave(outs, 1.0, 0.23 + 0.005 * ci, 0.7)
        if cell:
            res = m(x, (h, c) if lstm and with_state else h)
            outs_list = list(res) if lstm else [res]
            grads = [go.double()]
            fields.update(go=go, out=outs_list[0])
            if lstm:
                gcn = wave(cs, 1.0, 0.61, 0.1 * ci)
                grads.append(gcn.double())
                fields.update(gcn=gcn, cn=outs_list[1])
        else:
            out, state = m(x, ((h, c) if lstm else h) if with_state else None)
            hn, cn = state if lstm else (state, None)
            outs_list, grads = [out, hn], [go.double()]
            ghn = wave(tuple(hn.shape), 1.0, 0.37 + 0.003 * ci, 0.2)
            grads.append(ghn.double())
            fields.update(go=go, ghn=ghn, out=out, hn=hn)
            if lstm:
                gcn = wave(tuple(cn.shape), 1.0, 0.61, 0.1 * ci)
                outs_list.append(cn)
                grads.append(gcn.double())
                fields.update(gcn=gcn, cn=cn)
        torch.autograd.backward(outs_list, grads)
        fields["dx"] = x.grad
        if with_state:
            fields["dh0"] = h.grad
            if lstm:
                fields["dc0"] = c.grad
        for n, p in m.named_parameters():
            fields[f"p.{n}"] = params[n]
            fields[f"g.{n}"] = p.grad
        put(case, **fields)
    return g, meta


def main():
    torch.manual_seed(0)
    g, meta = build()
    meta.update({"generator": "tools/golden/make_rnn_golden.py", "torch": torch.__version__,
                 "cases": ",".join(c[0] for c in CASES)})
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save_file(g, OUT, metadata=meta)
    print(f"wrote {len(g)} tensors ({os.path.getsize(OUT)} bytes) to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()
