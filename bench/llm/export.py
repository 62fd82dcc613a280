#!/usr/bin/env python3
"""Exports the LLM benchmark's decoder models to ONNX: small Llama, Qwen2, GPT-2 (small) and Phi-3
configs with seeded random weights (torch.manual_seed(0)), saved as Hugging Face checkpoints with
a tokenizer made in code (nothing is downloaded) and exported by optimum-onnx as one
text-generation-with-past graph, prefill and decode alike (an empty past is a zero-length one).

    python3 bench/llm/export.py [--models llama,qwen2,gpt2,phi3] [--force]

Writes .build/llm/NAME/hf/ (the checkpoint), .build/llm/NAME/onnx/model.onnx, .build/llm/NAME/io.json
(the graph's inputs and outputs) and bench/llm/graphs.md (all of them). .build/llm/NAME/READY marks an
export that loaded and ran in onnxruntime. Runs itself in .build/llm-venv (llmenv.py).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llmenv  # noqa: E402

llmenv.ensure()

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ORDER = ["llama", "qwen2", "gpt2", "phi3"]


def config(name):
    """The transformers config of one benchmark model."""
    import transformers as tf
    small = dict(hidden_size=512, num_hidden_layers=8, num_attention_heads=8, intermediate_size=1408,
                 vocab_size=32000, max_position_embeddings=2048, tie_word_embeddings=False)
    if name == "llama":
        return tf.LlamaConfig(num_key_value_heads=2, **small)
    if name == "qwen2":
        return tf.Qwen2Config(num_key_value_heads=2, **small)
    if name == "gpt2":
        # n_ctx (= n_positions, the default 1024) is saved for llama.cpp's converter, which reads it.
        return tf.GPT2Config(n_ctx=1024)
    if name == "phi3":
        return tf.Phi3Config(hidden_size=512, num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=8,
                             intermediate_size=1408, vocab_size=32064, max_position_embeddings=4096,
                             original_max_position_embeddings=4096, rope_scaling=None, pad_token_id=0)
    raise SystemExit(f"unknown model {name!r} (known: {', '.join(ORDER)})")


def paths(name):
    base = os.path.join(llmenv.LLM, name)
    return {"base": base, "hf": os.path.join(base, "hf"), "onnx_dir": os.path.join(base, "onnx"),
            "onnx": os.path.join(base, "onnx", "model.onnx"), "io": os.path.join(base, "io.json"),
            "ready": os.path.join(base, "READY")}


# ---- a tokenizer made in code -----------------------------------------------------------------

SPECIALS = ["<unk>", "<s>", "</s>"]


def build_tokenizer(vocab_size, out_dir):
    """A byte-level BPE tokenizer of exactly vocab_size ids, written to out_dir: the three special
    tokens, the 256 byte symbols, then two-symbol tokens each made by one merge. Its text mapping
    means nothing (the weights are random); it exists because converters want a tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    symbols = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {tok: i for i, tok in enumerate(SPECIALS)}
    for s in symbols:
        vocab[s] = len(vocab)
    merges = []
    for a in symbols:
        for b in symbols:
            if len(vocab) >= vocab_size:
                break
            vocab[a + b] = len(vocab)
            merges.append((a, b))
    assert len(vocab) == vocab_size, (len(vocab), vocab_size)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    fast.save_pretrained(out_dir)
    # Named a GPT-2 tokenizer (a byte-level BPE, which it is): llama.cpp's converter then reads it as
    # one for every architecture here (for Phi-3 it would otherwise want a sentencepiece model).
    path = os.path.join(out_dir, "tokenizer_config.json")
    cfg = json.load(open(path))
    cfg["tokenizer_class"] = "GPT2Tokenizer"
    with open(path, "w") as f:
        json.dump(cfg, f, indent=1)


# ---- export -------------------------------------------------------------------------------------

def save_checkpoint(name, hf_dir):
    import torch
    from transformers import AutoModelForCausalLM
    cfg = config(name)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg)
    model.eval()
    os.makedirs(hf_dir, exist_ok=True)
    model.save_pretrained(hf_dir)
    build_tokenizer(cfg.vocab_size, hf_dir)
    return sum(p.numel() for p in model.parameters())


def export_onnx(hf_dir, onnx_dir):
    cli = os.path.join(llmenv.VENV, "bin", "optimum-cli")
    args = [cli, "export", "onnx", "--model", hf_dir, "--task", "text-generation-with-past", onnx_dir]
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0 or not os.path.exists(os.path.join(onnx_dir, "model.onnx")):
        raise RuntimeError(f"optimum-cli exit {p.returncode}: " + (p.stderr.strip() or p.stdout.strip())[-3000:])
    return p


def describe(onnx_path):
    """The graph's inputs and outputs as onnxruntime reports them: name, element type, shape (a
    dimension bound at run time is its symbol)."""
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(onnx_path, opts, providers=["CPUExecutionProvider"])
    io = {"inputs": [{"name": i.name, "type": i.type, "shape": list(i.shape)} for i in sess.get_inputs()],
          "outputs": [{"name": o.name, "type": o.type, "shape": list(o.shape)} for o in sess.get_outputs()]}
    return sess, io


def smoke(sess, io, cfg):
    """One prefill of 4 tokens from a zero-length past, then one decode step on its presents: the
    graph must run in onnxruntime before it is marked ready."""
    heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    names = [i["name"] for i in io["inputs"]]
    feed = {"input_ids": np.arange(1, 5, dtype=np.int64)[None], "attention_mask": np.ones((1, 4), np.int64)}
    if "position_ids" in names:
        feed["position_ids"] = np.arange(4, dtype=np.int64)[None]
    for n in names:
        if n.startswith("past_key_values"):
            feed[n] = np.zeros((1, heads, 0, head_dim), np.float32)
    outs = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feed)))
    assert outs["logits"].shape == (1, 4, cfg.vocab_size), outs["logits"].shape
    step = {"input_ids": np.array([[7]], np.int64), "attention_mask": np.ones((1, 5), np.int64)}
    if "position_ids" in names:
        step["position_ids"] = np.array([[4]], np.int64)
    for n in names:
        if n.startswith("past_key_values"):
            step[n] = outs[n.replace("past_key_values", "present")]
    outs = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, step)))
    assert outs["logits"].shape == (1, 1, cfg.vocab_size), outs["logits"].shape
    present = [k for k in outs if k.startswith("present")][0]
    assert outs[present].shape[2] == 5, outs[present].shape


def export(name, force=False):
    p = paths(name)
    if os.path.exists(p["ready"]) and os.path.exists(p["io"]) and not force:
        print(f"{name}: ready ({p['onnx']})")
        return json.load(open(p["io"]))
    for key in ("ready",):
        if os.path.exists(p[key]):
            os.remove(p[key])
    for d in (p["hf"], p["onnx_dir"]):
        shutil.rmtree(d, ignore_errors=True)
    cfg = config(name)
    t = time.time()
    params = save_checkpoint(name, p["hf"])
    print(f"{name}: {params / 1e6:.1f} M parameters saved in {time.time() - t:.0f} s", flush=True)
    t = time.time()
    export_onnx(p["hf"], p["onnx_dir"])
    print(f"{name}: exported in {time.time() - t:.0f} s", flush=True)
    sess, io = describe(p["onnx"])
    smoke(sess, io, cfg)
    heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    io.update({"model": name, "parameters": params, "layers": cfg.num_hidden_layers, "kv_heads": heads,
               "head_dim": cfg.hidden_size // cfg.num_attention_heads, "vocab_size": cfg.vocab_size,
               "onnx_bytes": sum(os.path.getsize(os.path.join(p["onnx_dir"], f)) for f in os.listdir(p["onnx_dir"])
                                 if f.startswith("model.onnx"))})
    with open(p["io"], "w") as f:
        json.dump(io, f, indent=1)
    open(p["ready"], "w").close()
    print(f"{name}: ran in onnxruntime; {p['ready']} written", flush=True)
    return io


def graphs_md(ios):
    """bench/llm/graphs.md: each exported graph's inputs and outputs, the per-layer cache tensors
    folded into one line."""
    lines = ["# Exported graphs", "",
             "Written by `bench/llm/export.py` (optimum-onnx 0.1.0, `--task text-generation-with-past`). "
             "`N` runs over the layers; shapes are onnxruntime's, symbols as the exporter named them.", ""]
    for name, io in ios.items():
        lines += [f"## {name}", "",
                  f"{io['parameters'] / 1e6:.1f} M parameters, {io['layers']} layers, {io['kv_heads']} KV heads of "
                  f"{io['head_dim']}, vocabulary {io['vocab_size']}, ONNX {io['onnx_bytes'] / 2**20:.0f} MiB.", "",
                  "| | name | type | shape |", "|---|---|---|---|"]
        for kind in ("inputs", "outputs"):
            seen = set()
            for t in io[kind]:
                n = t["name"]
                parts = n.split(".")
                if len(parts) == 3 and parts[1].isdigit():
                    n = f"{parts[0]}.N.{parts[2]}"
                    if n in seen:
                        continue
                    seen.add(n)
                    n += f" (N = 0…{io['layers'] - 1})"
                shape = "[" + ", ".join(str(d) for d in t["shape"]) + "]"
                lines.append(f"| {kind[:-1]} | `{n}` | {t['type']} | {shape} |")
        lines.append("")
    with open(os.path.join(HERE, "graphs.md"), "w") as f:
        f.write("\n".join(lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(ORDER))
    ap.add_argument("--force", action="store_true", help="export again even where READY exists")
    args = ap.parse_args()
    names = [n for n in args.models.split(",") if n]
    ios, failed = {}, {}
    for name in sorted(names, key=lambda n: ORDER.index(n) if n in ORDER else len(ORDER)):
        try:
            ios[name] = export(name, args.force)
        except Exception as e:  # one model's failure is reported; the others go on
            failed[name] = f"{type(e).__name__}: {e}"
            print(f"{name}: FAILED: {failed[name]}", flush=True)
    done = {n: json.load(open(paths(n)["io"])) for n in ORDER if os.path.exists(paths(n)["ready"])}
    graphs_md(done)
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
