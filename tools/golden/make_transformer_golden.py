#!/usr/bin/env python3
"""Writes tests/nn/golden/transformer_golden.safetensors: PyTorch's outputs and
gradients for F.scaled_dot_product_attention with masks and scales, for
nn.MultiheadAttention (self- and cross-attention, kdim and vdim, add_bias_kv
and add_zero_attn, key padding and attention
masks, returned weights), for nn.TransformerEncoderLayer and
nn.TransformerDecoderLayer (post- and pre-norm, ReLU and GELU) and for a small
nn.Transformer, which tests/nn/transformer_test.cc compares against.

Made with: torch 2.15.0 (PyPI build 2.15.0+cu132, run on CPU) and safetensors 0.8.0, Python 3.11:
  /root/.cache/weft/torch-venv/bin/python tools/golden/make_transformer_golden.py

Inputs are float32 from closed-form formulas (golden_util.wave); the modules'
parameters are set from such formulas too and stored, under PyTorch's names,
as "<case>.sd.<name>". Per case: the inputs ("<case>.q", ".k", ".v", ".x",
".src", ".tgt", ".mem", masks under their argument names), the upstream
gradient ".go", the output ".out", the returned weights ".w" (where asked),
and the gradients "<case>.d<input>" and "<case>.dsd.<name>". Every module runs
with dropout 0 in training mode. The arguments are in build() below and
mirrored in the test.
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_util import wave  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "tests", "nn", "golden", "transformer_golden.safetensors")
NEG_INF = float("-inf")


def store(g, case, **fields):
    for k, v in fields.items():
        if v is not None:
            g[f"{case}.{k}"] = v.detach().clone().contiguous()


def set_params(module, seed):
    """Every parameter from a wave of its own phase, so the golden needs no RNG."""
    with torch.no_grad():
        for i, (_, p) in enumerate(module.named_parameters()):
            p.copy_(wave(tuple(p.shape), 0.5, 0.23 + 0.01 * i, 0.3 * i + seed, 0.0))


def store_module(g, case, module):
    for name, p in module.named_parameters():
        g[f"{case}.sd.{name}"] = p.detach().clone().contiguous()
        g[f"{case}.dsd.{name}"] = p.grad.detach().clone().contiguous()


def sdpa_case(g, case, shapes, **kw):
    q0 = wave(shapes[0], 1.0, 0.31, 0.1)
    k0 = wave(shapes[1], 0.9, 0.43, 0.7)
    v0 = wave(shapes[2], 1.1, 0.19, 1.3)
    q, k, v = (t.clone().requires_grad_(True) for t in (q0, k0, v0))
    out = F.scaled_dot_product_attention(q, k, v, **kw)
    go = wave(tuple(out.shape), 1.0, 0.29, 0.6)
    out.backward(go)
    store(g, case, q=q0, k=k0, v=v0, go=go, out=out, dq=q.grad, dk=k.grad, dv=v.grad,
          attn_mask=kw.get("attn_mask"))


def mha_case(g, case, mha, query0, key0=None, value0=None, **kw):
    """Self-attention when key0 is None; key0 serves as value when value0 is None."""
    set_params(mha, 0.0)
    query = query0.clone().requires_grad_(True)
    key = key0.clone().requires_grad_(True) if key0 is not None else query
    value = value0.clone().requires_grad_(True) if value0 is not None else key
    out, w = mha(query, key, value, **kw)
    go = wave(tuple(out.shape), 1.0, 0.29, 0.6)
    loss = (out * go).sum()
    if w is not None:
        gw = wave(tuple(w.shape), 0.7, 0.37, 0.2)
        loss = loss + (w * gw).sum()
        store(g, case, gw=gw, w=w)
    loss.backward()
    store(g, case, query=query0, key=key0, value=value0, go=go, out=out, dquery=query.grad,
          dkey=key.grad if key0 is not None else None, dvalue=value.grad if value0 is not None else None,
          key_padding_mask=kw.get("key_padding_mask"), attn_mask=kw.get("attn_mask"))
    store_module(g, case, mha)


def layer_case(g, case, module, inputs, **masks):
    """module(*inputs, **masks); inputs is a dict name -> tensor."""
    set_params(module, 1.0)
    leaves = {n: t.clone().requires_grad_(True) for n, t in inputs.items()}
    out = module(*leaves.values(), **masks)
    go = wave(tuple(out.shape), 1.0, 0.29, 0.6)
    out.backward(go)
    store(g, case, go=go, out=out, **inputs, **{f"d{n}": t.grad for n, t in leaves.items()}, **masks)
    store_module(g, case, module)


def causal_float(n):
    return nn.Transformer.generate_square_subsequent_mask(n)


def build():
    g = {}
    # ---- scaled_dot_product_attention
    bool_mask = torch.tensor([[True, False, True, True, False],
                              [False, False, False, False, False],  # a fully masked row
                              [True, True, True, True, True]])
    sdpa_case(g, "sdpa_bool", ((2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 3)), attn_mask=bool_mask)
    float_mask = wave((2, 1, 3, 5), 0.8, 0.53, 0.4)
    float_mask[0, 0, 1, 2] = NEG_INF
    float_mask[1, 0, 2, :] = NEG_INF  # a fully masked row
    sdpa_case(g, "sdpa_float_scale", ((2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 3)), attn_mask=float_mask, scale=0.3)
    sdpa_case(g, "sdpa_causal_wide", ((1, 2, 4, 4), (1, 2, 6, 4), (1, 2, 6, 4)), is_causal=True, scale=0.5)
    sdpa_case(g, "sdpa_causal_tall", ((1, 2, 6, 4), (1, 2, 4, 4), (1, 2, 4, 4)), is_causal=True)
    # ---- MultiheadAttention, E = 8, H = 2
    x = wave((2, 4, 8), 1.0, 0.21, 0.3)
    kpm = torch.tensor([[False, False, True, False], [False, True, True, False]])
    mha_case(g, "mha_self_kpm", nn.MultiheadAttention(8, 2, batch_first=True), x, key_padding_mask=kpm)
    mha_case(g, "mha_self_seq_first", nn.MultiheadAttention(8, 2), x.transpose(0, 1).contiguous(),
             key_padding_mask=kpm, attn_mask=causal_float(4))
    mem = wave((2, 5, 8), 0.9, 0.17, 1.1)
    mha_case(g, "mha_cross_heads", nn.MultiheadAttention(8, 2, batch_first=True), x[:, :3], mem,
             attn_mask=wave((3, 5), 0.6, 0.41, 0.9), average_attn_weights=False)
    val = wave((2, 5, 8), 1.2, 0.27, 2.1)
    mask3 = torch.zeros(4, 3, 5, dtype=torch.bool)
    mask3[0, 1, 3:] = True
    mask3[3, 2, :2] = True
    mha_case(g, "mha_cross_kv_bool", nn.MultiheadAttention(8, 2, batch_first=True), x[:, :3], mem, val,
             attn_mask=mask3, key_padding_mask=torch.tensor([[False] * 4 + [True], [False] * 5]), need_weights=False)
    mha_case(g, "mha_no_bias", nn.MultiheadAttention(8, 4, bias=False, batch_first=True), x)
    # kdim and vdim other than embed_dim (separate q/k/v weights), add_bias_kv and add_zero_attn
    key5 = wave((2, 4, 5), 0.9, 0.29, 0.8)
    val3 = wave((2, 4, 3), 1.1, 0.37, 1.7)
    mha_case(g, "mha_kvdim", nn.MultiheadAttention(8, 2, kdim=5, vdim=3, batch_first=True), x[:, :3], key5, val3,
             attn_mask=wave((3, 4), 0.6, 0.41, 0.9), key_padding_mask=kpm)
    mha_case(g, "mha_bias_kv_zero_attn", nn.MultiheadAttention(8, 2, add_bias_kv=True, add_zero_attn=True),
             x.transpose(0, 1).contiguous(), key_padding_mask=kpm, attn_mask=causal_float(4),
             average_attn_weights=False)
    mha_case(g, "mha_kvdim_bias_kv", nn.MultiheadAttention(8, 2, kdim=5, vdim=3, add_bias_kv=True,
                                                           batch_first=True), x[:, :3], key5, val3,
             attn_mask=mask3[:, :, :4].clone(), need_weights=False)
    # ---- encoder and decoder layers, d_model 8, 2 heads, feed-forward 16
    src = wave((5, 2, 8), 1.0, 0.33, 0.5)  # (S, N, E)
    tgt = wave((4, 2, 8), 0.8, 0.39, 1.5)  # (T, N, E)
    src_kpm = torch.tensor([[False] * 5, [False, False, False, True, True]])
    opts = dict(dim_feedforward=16, dropout=0.0)
    layer_case(g, "enc_post_relu", nn.TransformerEncoderLayer(8, 2, **opts), {"src": src},
               src_mask=causal_float(5), src_key_padding_mask=src_kpm)
    layer_case(g, "enc_pre_gelu_bf", nn.TransformerEncoderLayer(8, 2, activation="gelu", norm_first=True,
                                                                batch_first=True, **opts),
               {"src": src.transpose(0, 1).contiguous()})
    layer_case(g, "dec_post_relu", nn.TransformerDecoderLayer(8, 2, **opts), {"tgt": tgt, "memory": src},
               tgt_mask=causal_float(4), memory_key_padding_mask=src_kpm)
    layer_case(g, "dec_pre_gelu_nobias", nn.TransformerDecoderLayer(8, 2, activation="gelu", norm_first=True,
                                                                    bias=False, **opts),
               {"tgt": tgt, "memory": src}, tgt_key_padding_mask=torch.tensor([[False] * 4, [False, True, False, False]]),
               memory_mask=wave((4, 5), 0.5, 0.61, 0.3))
    # ---- the whole model: 2 encoder and 2 decoder layers with their final norms
    model = nn.Transformer(8, 2, num_encoder_layers=2, num_decoder_layers=2, **opts)
    layer_case(g, "transformer", model, {"src": src, "tgt": tgt}, tgt_mask=causal_float(4),
               src_key_padding_mask=src_kpm, memory_key_padding_mask=src_kpm)
    return {k: v.contiguous() for k, v in g.items()}


def main():
    torch.manual_seed(0)
    g = build()
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save_file(g, OUT, metadata={"generator": "tools/golden/make_transformer_golden.py",
                                "torch": torch.__version__})
    print(f"wrote {len(g)} tensors to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()
