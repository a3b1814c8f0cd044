"""float64 NumPy references for the real-world kernel set: ``f(inputs, dims) -> {output: array}``
(inputs arrive as float64; only out/inout parameters are returned)."""

from __future__ import annotations

import numpy as np


def add(i, d):
    return {"output_ptr": i["x_ptr"] + i["y_ptr"]}


def gelu(i, d):
    x = i["x_ptr"]
    return {"y_ptr": 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))}


def silu(i, d):
    x = i["x_ptr"]
    return {"y_ptr": x / (1 + np.exp(-x))}


def relu(i, d):
    return {"y_ptr": np.maximum(i["x_ptr"], 0.0)}


def swiglu(i, d):
    a, b = i["a_ptr"], i["b_ptr"]
    return {"c_ptr": a / (1 + np.exp(-a)) * b}


def softmax(i, d):
    x = i["input_ptr"]
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"output_ptr": e / e.sum(axis=1, keepdims=True)}


def layernorm(i, d):
    x, w, b, eps = i["X"], i["W"], i["B"], 1e-5
    mean = x.mean(axis=1)
    var = ((x - mean[:, None]) ** 2).mean(axis=1)
    rstd = 1 / np.sqrt(var + eps)
    return {"Y": (x - mean[:, None]) * rstd[:, None] * w + b, "Mean": mean, "Rstd": rstd}


def rmsnorm(i, d):
    x, w, eps = i["X_ptr"], i["W_ptr"], 1e-6
    rstd = 1 / np.sqrt((x * x).mean(axis=1) + eps)
    return {"Y_ptr": x * rstd[:, None] * w, "RSTD_ptr": rstd}


def fused_add_rmsnorm(i, d):
    r = i["residual_ptr"] + i["x_ptr"]
    rstd = 1 / np.sqrt((r * r).mean(axis=1) + 1e-6)
    return {"residual_ptr": r, "out_ptr": r * rstd[:, None] * i["w_ptr"]}


def cross_entropy(i, d):
    x, lab = i["logits_ptr"], i["labels_ptr"].astype(np.int64)
    m = x.max(axis=1)
    lse = m + np.log(np.exp(x - m[:, None]).sum(axis=1))
    return {"loss_ptr": lse - x[np.arange(x.shape[0]), lab], "lse_ptr": lse}


def matmul(i, d):
    return {"c_ptr": i["a_ptr"] @ i["b_ptr"]}


def int8_gemv(i, d):
    return {"y_ptr": (i["w_ptr"] * i["scale_ptr"][:, None]) @ i["x_ptr"]}


def _attention(i, d, bias_kind, causal):
    q, k, v = i["Q"], i["K"], i["V"]
    s = np.einsum("hmd,hnd->hmn", q, k) / np.sqrt(d["D"])
    if bias_kind == "vector":
        s = s + i["Bias"][:, None, :]
    if causal:
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((n, n), bool))[None], s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return {"Out": np.einsum("hmn,hnd->hmd", p, v)}


def attention_vector_bias(i, d):
    return _attention(i, d, "vector", False)


def attention_causal(i, d):
    return _attention(i, d, "none", True)


def rope(i, d):
    q, cos, sin = i["q_ptr"], i["cos_ptr"], i["sin_ptr"]
    t = np.arange(q.shape[0]) % d["S"]
    c, s = cos[t][:, None, :], sin[t][:, None, :]
    h = d["D"] // 2
    x1, x2 = q[..., :h], q[..., h:]
    return {"out_ptr": np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)}


def total(i, d):
    return {"out_ptr": np.array([i["x_ptr"].sum()])}


def embedding(i, d):
    return {"out_ptr": i["weight_ptr"][i["ids_ptr"].astype(np.int64)]}


def transpose(i, d):
    return {"y_ptr": i["x_ptr"].T.copy()}


def cumsum(i, d):
    return {"y_ptr": np.cumsum(i["x_ptr"], axis=1)}
