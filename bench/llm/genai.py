#!/usr/bin/env python3
"""Kiln on decoders as onnxruntime-genai's model builder exports them: GroupQueryAttention with the
rotary embedding inside, SkipSimplifiedLayerNormalization, and for int4 MatMulNBits (4-bit blocks
of 32, accuracy_level 4: onnxruntime quantizes the activations to 8 bits per block and multiplies
in integers, an approximation of the op's dequantized product).

    python3 bench/llm/genai.py [--models llama,qwen2,phi3] [--threads 1,2] [--rounds 3]

The checkpoints are bench/llm's (export.py writes .build/llm/NAME/hf). The builder needs a newer
transformers than optimum-onnx, so it runs in a venv of its own (.build/genai-venv); the
measurements run in .build/llm-venv with Kiln's wheel, as run.py's. Per model and precision: the
builder's graph in .build/llm/genai/NAME-PREC, converted with the past/present pairs as state and
compiled for the host. Each round generates a 32-token prompt and 64 greedy tokens with onnxruntime
(the graph as built and, for int4, with accuracy_level 0: the exact product Kiln computes) and with
Kiln's state API, alternating. Writes bench/llm/genai.md and genai.json.
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

import run as bench  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(llmenv.LLM, "genai")
VENV = os.path.join(llmenv.ROOT, ".build", "genai-venv")
PINS = ["numpy==2.4.6", "torch==2.13.0", "transformers==5.25.0", "onnx==1.23.2", "onnx-ir==1.1.0",
        "onnxruntime==1.32.0", "onnxruntime-genai==0.18.0"]
PRECISIONS = {"f32": "fp32", "int4": "int4"}


def builder_python():
    """The genai venv's python, made and filled with PINS when needed."""
    python = os.path.join(VENV, "bin", "python")
    stamp, wanted = os.path.join(VENV, "genai-pins.txt"), "\n".join(PINS) + "\n"
    if not os.path.exists(python):
        subprocess.run(["python3", "-m", "venv", VENV], check=True)
    if not os.path.exists(stamp) or open(stamp).read() != wanted:
        subprocess.run([python, "-m", "pip", "install", "-q"] + PINS, check=True)
        with open(stamp, "w") as f:
            f.write(wanted)
    return python


def build(name, precision):
    """The builder's graph of one model at one precision (made once); for int4 also the same graph
    with accuracy_level 0. Returns {label: onnx path}."""
    hf = os.path.join(llmenv.LLM, name, "hf")
    if not os.path.exists(os.path.join(hf, "config.json")):
        raise SystemExit(f"{hf} is missing: run bench/llm/export.py --models {name} first")
    out = os.path.join(OUT, f"{name}-{precision}")
    onnx_path = os.path.join(out, "model.onnx")
    if not os.path.exists(os.path.join(out, "READY")):
        shutil.rmtree(out, ignore_errors=True)
        cache = os.path.join(OUT, "cache")
        bench.run_cmd([builder_python(), "-m", "onnxruntime_genai.models.builder", "-i", hf, "-o", out, "-p", PRECISIONS[precision],
                       "-e", "cpu", "-c", cache], "onnxruntime-genai builder", timeout=1800)
        shutil.rmtree(cache, ignore_errors=True)
        if precision == "int4":
            import onnx
            m = onnx.load(onnx_path, load_external_data=False)
            for node in m.graph.node:
                for a in node.attribute:
                    if node.op_type == "MatMulNBits" and a.name == "accuracy_level":
                        a.i = 0
            onnx.save(m, os.path.join(out, "model_exact.onnx"))
        open(os.path.join(out, "READY"), "w").close()
    paths = {"onnxruntime": onnx_path}
    if precision == "int4":
        paths["onnxruntime exact"] = os.path.join(out, "model_exact.onnx")
    return out, paths


def compile_kiln(out, onnx_path, kiln_exe):
    """Kiln's compiled directory of the graph (past/present pairs as state), made again when the
    graph or the kiln command is newer."""
    package, compiled = os.path.join(out, "model.kiln"), os.path.join(out, "compiled")
    assets = os.path.join(compiled, "assets.json")
    if os.path.exists(assets) and os.path.getmtime(assets) > max(os.path.getmtime(onnx_path), os.path.getmtime(kiln_exe)):
        return compiled
    bench.run_cmd([kiln_exe, "convert", onnx_path, "-o", package, "--state", bench.STATE_RULE], "kiln convert")
    shutil.rmtree(compiled, ignore_errors=True)
    bench.run_cmd([kiln_exe, "compile", package, "--arch", "host", "-o", compiled], "kiln compile")
    return compiled


class GenAIGraph:
    """The builder's interface: input_ids, attention_mask over every token so far, and per layer
    past_key_values.N.key/value [batch, kv heads, past, head size]."""

    def __init__(self, onnx_path):
        import onnx
        m = onnx.load(onnx_path, load_external_data=False)
        self.past = [i.name for i in m.graph.input if i.name.startswith("past_key_values.")]
        dims = {i.name: i.type.tensor_type.shape.dim for i in m.graph.input}
        first = dims[self.past[0]]
        self.kv_heads = first[1].dim_value
        cfg = json.load(open(os.path.join(os.path.dirname(onnx_path), "genai_config.json")))
        self.head_size = cfg["model"]["decoder"]["head_size"]
        self.vocab = cfg["model"]["vocab_size"]

    def feed(self, ids, total, outputs=None):
        f = {"input_ids": np.asarray(ids, np.int64)[None, :], "attention_mask": np.ones((1, total), np.int64)}
        for p in self.past:
            if outputs is None:
                f[p] = np.zeros((1, self.kv_heads, 0, self.head_size), np.float32)
            elif p in outputs.get("__past__", {}):
                f[p] = outputs["__past__"][p]
        return f


def ort_generate(session, graph, prompt, tokens):
    names = [o.name for o in session.get_outputs()]

    def run(feed):
        return dict(zip(names, session.run(None, feed)))
    t = time.perf_counter()
    out = run(graph.feed(prompt, len(prompt)))
    prefill = time.perf_counter() - t
    chosen, logits = [int(np.argmax(out["logits"][0, -1]))], [out["logits"][0, -1]]
    t = time.perf_counter()
    for step in range(tokens):
        feed = graph.feed([chosen[-1]], len(prompt) + step + 1, {"__past__": {p: out[p.replace("past_key_values", "present")] for p in graph.past}})
        out = run(feed)
        logits.append(out["logits"][0, -1])
        chosen.append(int(np.argmax(logits[-1])))
    return bench.Generation(chosen, logits, prefill, time.perf_counter() - t, tokens)


def kiln_generate(model, state, graph, prompt, tokens):
    state.reset()
    t = time.perf_counter()
    out = model.run({k: v for k, v in graph.feed(prompt, len(prompt)).items() if k not in graph.past}, state=state)
    prefill = time.perf_counter() - t
    chosen, logits = [int(np.argmax(out["logits"][0, -1]))], [out["logits"][0, -1]]
    t = time.perf_counter()
    for step in range(tokens):
        out = model.run({"input_ids": np.array([[chosen[-1]]], np.int64), "attention_mask": np.ones((1, len(prompt) + step + 1), np.int64)},
                        state=state)
        logits.append(out["logits"][0, -1])
        chosen.append(int(np.argmax(logits[-1])))
    return bench.Generation(chosen, logits, prefill, time.perf_counter() - t, tokens)


def measure(name, precision, threads, args, kiln_exe):
    import kiln
    import onnxruntime as ort
    out, graphs = build(name, precision)
    graph = GenAIGraph(graphs["onnxruntime"])
    compiled = compile_kiln(out, graphs["onnxruntime"], kiln_exe)
    model = kiln.load(compiled, threads=threads)
    state = model.make_state()
    sessions = {label: bench.ort_load(path, threads) for label, path in graphs.items()}
    prompt = bench.prompt_ids(graph.vocab, args.prompt)
    runs = {label: [] for label in list(sessions) + ["kiln"]}
    for label, s in sessions.items():
        ort_generate(s, graph, prompt, 4)
    kiln_generate(model, state, graph, prompt, 4)
    for _ in range(args.rounds):
        for label, s in sessions.items():
            time.sleep(0.25)
            runs[label].append(ort_generate(s, graph, prompt, args.tokens))
        time.sleep(0.25)
        runs["kiln"].append(kiln_generate(model, state, graph, prompt, args.tokens))
    rows = []
    exact = "onnxruntime exact" if "onnxruntime exact" in runs else "onnxruntime"
    for label, gens in runs.items():
        row = {"model": name, "precision": precision, "threads": threads, "implementation": label,
               "prefillMs": bench.median([g.prefill_ms for g in gens]), "decodeMsPerToken": bench.median([g.decode_ms_per_token for g in gens])}
        if label == "kiln":
            for peer in sessions:
                row[f"decodeRatio:{peer}"] = bench.median([k.decode_ms_per_token / o.decode_ms_per_token for k, o in zip(gens, runs[peer])])
                row[f"prefillRatio:{peer}"] = bench.median([k.prefill_ms / o.prefill_ms for k, o in zip(gens, runs[peer])])
        if label != exact:
            c = bench.compare(gens[0], runs[exact][0])
            row["tokensEqualExact"] = True if c["tokensEqual"] else c["firstDifferentToken"]
            row["maxLogitDeltaExact"] = c["maxLogitDiff"]
        rows.append(row)
    return rows


def write(report):
    with open(os.path.join(HERE, "genai.json"), "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    m = report["machine"]
    lines = ["# LLM decode on onnxruntime-genai exports: Kiln vs onnxruntime", "",
             f"Machine: {m['cpu']}, {m['cores']} cores; Kiln arch {m.get('kilnArchitecture', '?')}. Versions: "
             + ", ".join(f"{k} {v}" for k, v in m["versions"].items()) + ".", "",
             "Graphs: `python -m onnxruntime_genai.models.builder -e cpu -p fp32|int4` from bench/llm's checkpoints "
             "(GroupQueryAttention with the rotary embedding inside, SkipSimplifiedLayerNormalization; int4: MatMulNBits, "
             "blocks of 32, accuracy_level 4). `onnxruntime exact`: the same int4 graph with accuracy_level 0, the dequantized "
             "product Kiln computes (accuracy_level 4 quantizes activations to 8 bits per block). Kiln: converted with "
             f"`--state '{bench.STATE_RULE}'`, compiled for the host, run with its state API. Workload as bench/llm's: "
             f"{report['prompt']}-token prompt, {report['tokens']} greedy tokens, {report['rounds']} rounds alternating, medians; "
             "ratios are medians of per-round ratios (below 1: Kiln faster). `tokens = exact`: all greedy tokens equal "
             "those of onnxruntime's exact graph (else the index of the first difference).", "",
             "| model | precision | threads | implementation | prefill ms | decode ms/token | Kiln ÷ this (prefill) | Kiln ÷ this (decode) | tokens = exact | max \\|Δlogit\\| vs exact |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    by = {}
    for r in report["rows"]:
        by.setdefault((r["model"], r["precision"], r["threads"]), []).append(r)
    for key, rows in by.items():
        kiln_row = next(r for r in rows if r["implementation"] == "kiln")
        for r in rows:
            peer = r["implementation"]
            ratio = lambda k: bench.fmt(kiln_row.get(f"{k}:{peer}")) if peer != "kiln" else "—"
            same, delta = r.get("tokensEqualExact"), r.get("maxLogitDeltaExact")
            tokens = "" if same is None else "yes" if same is True else f"no (from {same})"
            lines.append(f"| {r['model']} | {r['precision']} | {r['threads']} | {peer} | {r['prefillMs']:.2f} | {r['decodeMsPerToken']:.3f} | "
                         f"{ratio('prefillRatio')} | {ratio('decodeRatio')} | {tokens} | {'' if delta is None else f'{delta:.2e}'} |")
    with open(os.path.join(HERE, "genai.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="llama,qwen2,phi3")
    ap.add_argument("--precisions", default="f32,int4")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--prompt", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kiln", default=os.path.join(llmenv.ROOT, ".build", "release", "kiln"))
    args = ap.parse_args()
    bench.kiln_wheel()
    rows = []
    for name in args.models.split(","):
        for precision in args.precisions.split(","):
            for threads in map(int, args.threads.split(",")):
                rows += measure(name, precision, threads, args, args.kiln)
                print(f"{name} {precision} {threads} thread(s): " + ", ".join(
                    f"{r['implementation']} {r['decodeMsPerToken']:.3f} ms/token" for r in rows[-3:] if r["threads"] == threads), flush=True)
    info = bench.machine()
    info["versions"]["onnxruntime-genai (builder)"] = PINS[-1].split("==")[1]
    write({"machine": info, "prompt": args.prompt, "tokens": args.tokens, "rounds": args.rounds, "rows": rows})


if __name__ == "__main__":
    main()
