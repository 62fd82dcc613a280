#!/usr/bin/env python3
"""Token-by-token decode of decoder LLMs exported to ONNX (export.py): Kiln against onnxruntime
1.32.0 and llama.cpp (llama-cpp-python built from its sdist, GGUF at f32 and Q4_0) in the same run,
on the same thread count, in alternating rounds.

    python3 bench/llm/run.py [--models llama,qwen2,gpt2,phi3] [--threads 1,2] [--prompt 32]
                             [--tokens 64] [--rounds 3] [--frequent-reshapes] [--no-llamacpp]

Workload per implementation: a seeded random prompt of --prompt token ids is prefilled from an
empty (zero-length) cache, then --tokens greedy decode steps each feed the newest token with the
previous step's present tensors as the past: the cache grows by one token a step, unpadded. Kiln
and onnxruntime run the same ONNX graph; llama.cpp runs the same weights converted to GGUF. Kiln
runs it twice: with the state API (the package declares the past/present pairs as state; the
cache stays in the runtime and grows in place) and through the graph's own past/present interface.

Writes bench/llm/report.md and bench/llm/report.json (rewritten after every model and thread
count). A failure (export, convert, compile, load, run, a crash, a llama.cpp build or conversion)
is recorded in the report with its error text; the run goes on. Runs itself in .build/llm-venv.
"""
import argparse
import glob
import json
import math
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import llmenv  # noqa: E402

llmenv.ensure()
# NumPy's OpenBLAS keeps a pool of threads that spin after a call: in a process timing runtimes
# on the same cores, they would take cycles from whichever runs next. The bench uses no BLAS.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import export as exporter  # noqa: E402  (configs and paths; its ensure() is a no-op in the venv)

ROOT = llmenv.ROOT
LLM = llmenv.LLM
PROMPT_SEED = 1234
TIMEOUT = 1800  # seconds for any one kiln command or conversion


def rel(path):
    """A path relative to the repository, so the report names no machine's directories."""
    return os.path.relpath(path, ROOT) if os.path.isabs(path) and path.startswith(ROOT) else path


def clean(text):
    return text.replace(ROOT + os.sep, "").replace(ROOT, ".")


def run_cmd(args, what, timeout=TIMEOUT, env=None):
    """Runs a command; raises RuntimeError with its exit status or signal and its own words."""
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{what}: timed out after {timeout} s")
    if p.returncode != 0:
        how = f"killed by {signal.Signals(-p.returncode).name}" if p.returncode < 0 else f"exit {p.returncode}"
        words = clean(p.stderr.strip() or p.stdout.strip())[-2000:]
        raise RuntimeError(f"{what}: {how}: {words}")
    return p


# ---- the graph and its feeds --------------------------------------------------------------------

class Graph:
    """What the exported graph takes: its input names, whether it has position_ids, the past
    tensors and the present each comes from, the cache's heads and head size, the vocabulary."""

    def __init__(self, io):
        self.inputs = [t["name"] for t in io["inputs"]]
        self.outputs = [t["name"] for t in io["outputs"]]
        self.position_ids = "position_ids" in self.inputs
        self.past = [n for n in self.inputs if n.startswith("past_key_values.")]
        self.present_of = {n: n.replace("past_key_values.", "present.", 1) for n in self.past}
        self.kv_heads = io["kv_heads"]
        self.head_dim = io["head_dim"]
        self.vocab = io["vocab_size"]

    def prefill_feed(self, prompt):
        n = len(prompt)
        feed = {"input_ids": np.asarray(prompt, np.int64)[None], "attention_mask": np.ones((1, n), np.int64)}
        if self.position_ids:
            feed["position_ids"] = np.arange(n, dtype=np.int64)[None]
        empty = np.zeros((1, self.kv_heads, 0, self.head_dim), np.float32)
        for name in self.past:
            feed[name] = empty
        return feed

    def step_feed(self, token, position, outputs):
        """The feed of one decode step: the newest token at `position`, the mask over the whole
        sequence so far and the previous run's presents as the past."""
        feed = {"input_ids": np.array([[token]], np.int64), "attention_mask": np.ones((1, position + 1), np.int64)}
        if self.position_ids:
            feed["position_ids"] = np.array([[position]], np.int64)
        for name in self.past if outputs is not None else ():
            feed[name] = outputs[self.present_of[name]]
        return feed


class Generation:
    """One greedy generation: the tokens chosen (the prefill's choice, then each decode step's),
    the logits each choice was made from (the prefill's last row first), and the times."""

    def __init__(self, tokens, logits, prefill_s, decode_s, steps):
        self.tokens = tokens
        self.logits = logits
        self.prefill_s = prefill_s
        self.decode_s = decode_s
        self.steps = steps
        # Kiln with a state: bytes of cache moved or written whole per decode step.
        self.copied_per_token = None

    @property
    def prefill_ms(self):
        return self.prefill_s * 1e3

    @property
    def decode_ms_per_token(self):
        return self.decode_s * 1e3 / self.steps


def prompt_ids(vocab, length):
    """The seeded prompt: ids above the three special tokens."""
    return [int(t) for t in np.random.default_rng(PROMPT_SEED).integers(3, vocab, size=length)]


# ---- onnxruntime --------------------------------------------------------------------------------

def ort_load(onnx_path, threads):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(onnx_path, opts, providers=["CPUExecutionProvider"])


def ort_generate(session, graph, prompt, tokens):
    names = [o.name for o in session.get_outputs()]
    t = time.perf_counter()
    outputs = dict(zip(names, session.run(None, graph.prefill_feed(prompt))))
    prefill = time.perf_counter() - t
    logits = [outputs["logits"][0, -1]]
    chosen = [int(np.argmax(logits[-1]))]
    t = time.perf_counter()
    for step in range(tokens):
        outputs = dict(zip(names, session.run(None, graph.step_feed(chosen[-1], len(prompt) + step, outputs))))
        logits.append(outputs["logits"][0, -1])
        chosen.append(int(np.argmax(logits[-1])))
    decode = time.perf_counter() - t
    return Generation(chosen, logits, prefill, decode, tokens)


# ---- Kiln ---------------------------------------------------------------------------------------

def kiln_wheel():
    """Installs Kiln's wheel (build/python, built from .build/release by tools/build_wheel.py when
    missing) into the venv when it is not there or has changed; returns the wheel's name."""
    wheels = sorted(glob.glob(os.path.join(ROOT, "build", "python", "kiln-*.whl")), key=os.path.getmtime)
    if not wheels:
        if not os.path.exists(os.path.join(ROOT, ".build", "release", "libKilnC.so")):
            raise RuntimeError("no Kiln wheel in build/python and no .build/release/libKilnC.so to build one from: "
                               "run `make python` (a swift build) first")
        run_cmd([sys.executable, os.path.join(ROOT, "tools", "build_wheel.py"), os.path.join(ROOT, ".build", "release"),
                 os.path.join(ROOT, "build", "python")], "tools/build_wheel.py")
        wheels = sorted(glob.glob(os.path.join(ROOT, "build", "python", "kiln-*.whl")), key=os.path.getmtime)
    wheel = wheels[-1]
    st = os.stat(wheel)
    want = f"{os.path.basename(wheel)} {st.st_size} {int(st.st_mtime)}\n"
    stamp = os.path.join(llmenv.VENV, "kiln-wheel.txt")
    have = open(stamp).read() if os.path.exists(stamp) else None
    if have != want or not llmenv.wheel_installed():
        run_cmd([sys.executable, "-m", "pip", "install", "-q", "--force-reinstall", "--no-deps", wheel], "pip install (Kiln wheel)")
        with open(stamp, "w") as f:
            f.write(want)
    return os.path.basename(wheel)


# The 4-bit variant: every weight of a matrix product (the projections and the LM head; not the
# embedding table, of which a token reads one row) as signed 4-bit integers with a float32 scale
# per block of 32 along the input axis, as llama.cpp's Q4_0 stores them.
INT4_CONFIG = {"op_types": {t: {"mode": "linear_symmetric", "dtype": "int4", "granularity": "per_block", "block_size": 32}
                            for t in ("matmul", "gemm", "linear")}}


# The exported past/present pairs, declared as the package's state (kiln convert --state).
STATE_RULE = "past_key_values.*=present.*"

# Kiln's rows: the state API (the cache kept in place between runs), float32 and 4-bit, and the
# exported graph's own interface (the caller passes each run's presents back as the past).
KILN_ROWS = {"kiln": ("kiln", True), "kiln int4": ("kiln int4", True), "kiln past/present": ("kiln", False)}


def kiln_prepare(name, kiln_exe):
    """Converts, compresses to 4 bits (`kiln optimize`) and compiles (host arch) the model's ONNX
    graph, unless the compiled directories are newer than both the graph and the kiln command;
    returns the compiled directory per variant ("kiln", "kiln int4") and the step times."""
    p = exporter.paths(name)
    package = os.path.join(p["base"], f"{name}.kiln")
    variants = {"kiln": (package, os.path.join(p["base"], "compiled")),
                "kiln int4": (os.path.join(p["base"], f"{name}-int4.kiln"), os.path.join(p["base"], "compiled-int4"))}
    newest_input = max(os.path.getmtime(p["onnx"]), os.path.getmtime(kiln_exe))
    info = {"package": rel(package)}
    dirs = {}
    for label, (pkg, out) in variants.items():
        assets = os.path.join(out, "assets.json")
        v = info.setdefault(label, {"compiled": rel(out)})
        if os.path.exists(assets) and os.path.getmtime(assets) > newest_input:
            v["cached"] = True
        else:
            if label == "kiln":
                t = time.time()
                run_cmd([kiln_exe, "convert", p["onnx"], "-o", package, "--name", name, "--state", STATE_RULE], "kiln convert")
                v["convertSeconds"] = round(time.time() - t, 1)
            else:
                config = os.path.join(p["base"], "int4.json")
                with open(config, "w") as f:
                    json.dump(INT4_CONFIG, f)
                t = time.time()
                run_cmd([kiln_exe, "optimize", package, "--config", config, "-o", pkg], "kiln optimize")
                v["optimizeSeconds"] = round(time.time() - t, 1)
            shutil.rmtree(out, ignore_errors=True)
            t = time.time()
            run_cmd([kiln_exe, "compile", pkg, "--arch", "host", "-o", out], "kiln compile")
            v["compileSeconds"] = round(time.time() - t, 1)
        v["artifacts"] = sorted(f for f in os.listdir(out) if f.endswith(".compiled"))
        v["artifactBytes"] = sum(os.path.getsize(os.path.join(out, f)) for f in v["artifacts"])
        dirs[label] = out
    return dirs, info


class KilnRunner:
    """A loaded Kiln model and, for the state API, its state (reset before each generation)."""

    def __init__(self, compiled, threads, frequent_reshapes, stateful):
        import kiln
        self.model = kiln.load(compiled, threads=threads, frequent_reshapes=frequent_reshapes)
        self.state = self.model.make_state() if stateful else None


def kiln_generate(runner, graph, prompt, tokens):
    """Kiln's whole generation: prefill from an empty cache, then one run a token. With a state,
    the runs pass no cache (the state keeps it); else each passes the previous run's presents as
    the past. A stateful generation records the state's bytes moved or written whole per token."""
    model, state = runner.model, runner.state
    past = set(graph.past)
    if state is not None:
        state.reset()
        copied = state.copied_bytes
    t = time.perf_counter()
    feed = graph.prefill_feed(prompt)
    outputs = model.run({k: v for k, v in feed.items() if k not in past}, state=state) if state else model.run(feed)
    prefill = time.perf_counter() - t
    logits = [outputs["logits"][0, -1]]
    chosen = [int(np.argmax(logits[-1]))]
    if state is not None:
        copied = state.copied_bytes
    t = time.perf_counter()
    for step in range(tokens):
        if state is not None:
            feed = graph.step_feed(chosen[-1], len(prompt) + step, None)
            outputs = model.run(feed, state=state)
        else:
            outputs = model.run(graph.step_feed(chosen[-1], len(prompt) + step, outputs))
        logits.append(outputs["logits"][0, -1])
        chosen.append(int(np.argmax(logits[-1])))
    decode = time.perf_counter() - t
    g = Generation(chosen, logits, prefill, decode, tokens)
    if state is not None:
        g.copied_per_token = (state.copied_bytes - copied) / tokens
    return g


def kiln_probe(compiled, name, threads, frequent_reshapes, stateful):
    """Loads and runs the model in a process of its own (a prefill and two decode steps) so that a
    crash is a line of the report rather than the end of the run; None when it works."""
    args = [sys.executable, os.path.abspath(__file__), "--probe-kiln", compiled, "--models", name, "--threads", str(threads)]
    if stateful:
        args.append("--probe-state")
    if frequent_reshapes:
        args.append("--frequent-reshapes")
    try:
        run_cmd(args, "Kiln (probe process)", timeout=900)
    except RuntimeError as e:
        return str(e)
    return None


def probe_main(args):
    name = args.models.split(",")[0]
    graph = Graph(json.load(open(exporter.paths(name)["io"])))
    runner = KilnRunner(args.probe_kiln, int(args.threads.split(",")[0]), args.frequent_reshapes, args.probe_state)
    g = kiln_generate(runner, graph, prompt_ids(graph.vocab, 4), 2)
    assert len(g.tokens) == 3 and g.logits[0].shape == (graph.vocab,), [x.shape for x in g.logits]


# ---- llama.cpp ----------------------------------------------------------------------------------

LLAMACPP_SRC = os.path.join(LLM, "llamacpp-src")


def llamacpp_source():
    """The llama-cpp-python sdist of the installed version, unpacked (its vendored llama.cpp has
    convert_hf_to_gguf.py and gguf-py); returns vendor/llama.cpp."""
    from importlib import metadata
    version = metadata.version("llama_cpp_python")
    root = os.path.join(LLAMACPP_SRC, version)
    vendor = os.path.join(root, "vendor", "llama.cpp")
    if os.path.exists(os.path.join(vendor, "convert_hf_to_gguf.py")):
        return vendor
    dl = os.path.join(LLAMACPP_SRC, "sdist")
    os.makedirs(dl, exist_ok=True)
    # --no-binary for this package alone: ":all:" would build its build dependencies (cmake) from source too.
    run_cmd([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", "llama-cpp-python",
             f"llama-cpp-python=={version}", "-d", dl], "pip download (llama-cpp-python sdist)", timeout=600)
    sdist = [f for f in glob.glob(os.path.join(dl, f"llama_cpp_python-{version}.tar.gz"))]
    if not sdist:
        raise RuntimeError(f"pip download gave no llama_cpp_python-{version}.tar.gz")
    tmp = root + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    with tarfile.open(sdist[0]) as tar:
        tar.extractall(tmp, filter="data")
    top = os.path.join(tmp, os.listdir(tmp)[0])
    shutil.rmtree(root, ignore_errors=True)
    os.rename(top, root)
    shutil.rmtree(tmp, ignore_errors=True)
    if not os.path.exists(os.path.join(vendor, "convert_hf_to_gguf.py")):
        raise RuntimeError(f"the llama-cpp-python {version} sdist has no vendor/llama.cpp/convert_hf_to_gguf.py")
    return vendor


def gguf_prepare(name, vendor):
    """The model as GGUF: f32 by the vendored converter (gguf_convert.py), then Q4_0 by
    llama_model_quantize. Returns {"f32": path or None, "q4_0": ..., "errors": {...}}."""
    p = exporter.paths(name)
    out = {"errors": {}}
    f32 = os.path.join(p["base"], f"{name}-f32.gguf")
    q4 = os.path.join(p["base"], f"{name}-q4_0.gguf")
    weights = os.path.join(p["hf"], "model.safetensors")
    stale = lambda path: not os.path.exists(path) or os.path.getmtime(path) < os.path.getmtime(weights)  # noqa: E731
    if stale(f32):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.path.join(vendor, "gguf-py") + os.pathsep + vendor
        try:
            run_cmd([sys.executable, os.path.join(HERE, "gguf_convert.py"), vendor, p["hf"], "--outtype", "f32",
                     "--outfile", f32 + ".tmp"], "convert_hf_to_gguf.py", env=env)
            os.replace(f32 + ".tmp", f32)
        except RuntimeError as e:
            out["errors"]["f32"] = str(e)
            out["errors"]["q4_0"] = "no f32 GGUF to quantize"
            return out
    out["f32"] = f32
    if stale(q4) or os.path.getmtime(q4) < os.path.getmtime(f32):
        try:
            quantize_q4_0(f32, q4)
        except Exception as e:
            out["errors"]["q4_0"] = f"{type(e).__name__}: {e}"
            return out
    out["q4_0"] = q4
    return out


def quantize_q4_0(src, dst):
    import llama_cpp
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0
    params.nthread = os.cpu_count() or 1
    status = llama_cpp.llama_model_quantize(src.encode(), (dst + ".tmp").encode(), params)
    if status != 0:
        raise RuntimeError(f"llama_model_quantize returned {status}")
    os.replace(dst + ".tmp", dst)


def llamacpp_load(path, threads, context):
    from llama_cpp import Llama
    return Llama(model_path=path, n_ctx=context, n_batch=context, n_ubatch=context, n_threads=threads,
                 n_threads_batch=threads, logits_all=False, verbose=False, seed=0)


def llamacpp_last_logits(llm):
    """The logits of the last token evaluated (eval keeps none in `scores` unless logits_all)."""
    import llama_cpp
    row = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
    return np.ctypeslib.as_array(row, shape=(llm.n_vocab(),)).copy()


def llamacpp_generate(llm, prompt, tokens):
    """Prefill of the prompt in one batch, then one token a step (greedy on the step's logits),
    through llama-cpp-python's eval: llama_decode on its own KV cache, emptied by reset()."""
    llm.reset()
    t = time.perf_counter()
    llm.eval(prompt)
    prefill = time.perf_counter() - t
    logits = [llamacpp_last_logits(llm)]
    chosen = [int(np.argmax(logits[-1]))]
    t = time.perf_counter()
    for _ in range(tokens):
        llm.eval([chosen[-1]])
        logits.append(llamacpp_last_logits(llm))
        chosen.append(int(np.argmax(logits[-1])))
    decode = time.perf_counter() - t
    return Generation(chosen, logits, prefill, decode, tokens)


# ---- comparing generations ----------------------------------------------------------------------

def compare(got, want):
    """Whether the greedy tokens are equal, where they first differ, and the largest logit
    difference over the steps whose inputs were still the same (up to the first differing
    token's step, included)."""
    n = min(len(got.tokens), len(want.tokens))
    first = next((i for i in range(n) if got.tokens[i] != want.tokens[i]), None)
    upto = n if first is None else first + 1
    diff = max(float(np.max(np.abs(got.logits[i].astype(np.float64) - want.logits[i]))) for i in range(upto))
    return {"tokensEqual": first is None and len(got.tokens) == len(want.tokens), "firstDifferentToken": first,
            "tokensCompared": n, "maxLogitDiff": diff}


def median(xs):
    return float(np.median(xs)) if xs else None


# ---- one model at one thread count --------------------------------------------------------------

SETTLE_SECONDS = 0.25


def bench(name, threads, args, kiln_dirs, kiln_error, ggufs, llamacpp_error):
    """Loads every implementation, runs one untimed generation each (the outputs compared), then
    --rounds rounds in which each implementation generates once, the order rotating per round."""
    io = json.load(open(exporter.paths(name)["io"]))
    graph = Graph(io)
    prompt = prompt_ids(graph.vocab, args.prompt)
    impls, errors, loads = {}, {}, {}

    def load(label, fn):
        t = time.perf_counter()
        try:
            impls[label] = fn()
            loads[label] = time.perf_counter() - t
        except Exception as e:
            errors[label] = clean(f"{type(e).__name__}: {e}")

    load("onnxruntime", lambda: (ort_generate, ort_load(exporter.paths(name)["onnx"], threads)))
    for label, (variant, stateful) in KILN_ROWS.items():
        if kiln_error:
            errors[label] = kiln_error
            continue
        crash = kiln_probe(kiln_dirs[variant], name, threads, args.frequent_reshapes, stateful)
        if crash:
            errors[label] = crash
        else:
            load(label, lambda d=kiln_dirs[variant], st=stateful: (kiln_generate, KilnRunner(d, threads, args.frequent_reshapes, st)))
    if not args.no_llamacpp:
        for quant in ("f32", "q4_0"):
            label = f"llama.cpp {quant}"
            if llamacpp_error:
                errors[label] = llamacpp_error
            elif ggufs.get(quant):
                context = args.prompt + args.tokens + 8
                load(label, lambda q=quant: (llamacpp_generate, llamacpp_load(ggufs[q], threads, context)))
            else:
                errors[label] = ggufs["errors"].get(quant, "no GGUF")

    def generate(label):
        fn, handle = impls[label]
        if fn is llamacpp_generate:
            return fn(handle, prompt, args.tokens)
        return fn(handle, graph, prompt, args.tokens)

    first, timings = {}, {label: [] for label in impls}
    for label in list(impls):
        try:
            first[label] = generate(label)
        except Exception as e:
            errors[label] = clean(f"{type(e).__name__}: {e}")
            del impls[label], timings[label]
    labels = list(impls)
    for r in range(args.rounds):
        order = labels[r % len(labels):] + labels[:r % len(labels)] if labels else []
        for label in order:
            if label not in impls:
                continue
            # The previous implementation's worker threads spin for a while after its last run
            # (onnxruntime's and llama.cpp's pools do): the next one starts once they have gone idle.
            time.sleep(SETTLE_SECONDS)
            try:
                g = generate(label)
                timings[label].append((g.prefill_ms, g.decode_ms_per_token))
            except Exception as e:
                errors[label] = clean(f"{type(e).__name__}: {e}")
                del impls[label]
        print(f"  {name} T={threads} round {r + 1}: " + ", ".join(
            f"{l} {timings[l][-1][0]:.1f} ms + {timings[l][-1][1]:.2f} ms/tok" for l in labels if l in impls and timings[l]), flush=True)

    rows = {}
    for label in labels:
        if label not in impls:
            rows[label] = {"error": errors[label]}
            continue
        t = timings[label]
        row = {"prefillMs": median([p for p, _ in t]), "decodeMsPerToken": median([d for _, d in t]),
               "prefillMsRounds": [round(p, 3) for p, _ in t], "decodeMsPerTokenRounds": [round(d, 4) for _, d in t],
               "firstPrefillMs": first[label].prefill_ms, "firstDecodeMsPerToken": first[label].decode_ms_per_token,
               "loadSeconds": loads[label]}
        if "onnxruntime" in first and label != "onnxruntime":
            row["vsOnnxruntime"] = compare(first[label], first["onnxruntime"])
        if first[label].copied_per_token is not None:
            row["stateCopiedBytesPerToken"] = first[label].copied_per_token
        rows[label] = row
    for label, err in errors.items():
        rows.setdefault(label, {"error": err})

    # Ratios: the median of the per-round ratios (the machine's drift between rounds cancels).
    def ratio(a, b, k):
        if a not in impls or b not in impls:
            return None
        xs = [ta[k] / tb[k] for ta, tb in zip(timings[a], timings[b]) if tb[k] > 0]
        return median(xs)

    ratios = {}
    for a in rows:
        for b in ("onnxruntime", "llama.cpp f32", "llama.cpp q4_0", "kiln int4"):
            if a != b:
                pr, dr = ratio(a, b, 0), ratio(a, b, 1)
                if pr is not None:
                    ratios[f"{a} / {b}"] = {"prefill": pr, "decode": dr}
    return {"implementations": rows, "ratios": ratios, "promptTokens": args.prompt, "decodeTokens": args.tokens}


# ---- the machine and the report -----------------------------------------------------------------

def machine():
    info = {"python": platform.python_version(), "cores": os.cpu_count()}
    try:
        cpu = open("/proc/cpuinfo").read()
        info["cpu"] = re.search(r"model name\s*:\s*(.*)", cpu).group(1).strip()
        flags = set(re.search(r"flags\s*:\s*(.*)", cpu).group(1).split())
        info["isa"] = [f for f in ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile") if f in flags]
    except (OSError, AttributeError):
        pass
    import onnxruntime
    info["versions"] = {"onnxruntime": onnxruntime.__version__, "numpy": np.__version__}
    try:
        from importlib import metadata
        info["versions"]["llama-cpp-python"] = metadata.version("llama_cpp_python")
    except Exception:
        pass
    try:
        import kiln
        info["versions"]["kiln"] = kiln.version()
        info["kilnArchitecture"] = kiln.host_architecture()
    except Exception:
        pass
    return info


def fmt(x, digits=2):
    return "—" if x is None else f"{x:.{digits}f}"


def write_report(report):
    with open(os.path.join(HERE, "report.json"), "w") as f:
        json.dump(report, f, indent=1)
    m = report["machine"]
    s = report["settings"]
    lines = ["# LLM decode: Kiln vs onnxruntime vs llama.cpp", "",
             f"Machine: {m.get('cpu', '?')}, {m.get('cores')} cores ({', '.join(m.get('isa', []))}); Kiln arch "
             f"{m.get('kilnArchitecture')}. Versions: " + ", ".join(f"{k} {v}" for k, v in m.get("versions", {}).items()) + ".",
             "",
             f"Workload: a seeded random prompt of {s['prompt']} tokens prefilled from an empty cache, then {s['tokens']} "
             f"greedy decode steps (one token each, the cache growing by one, unpadded); {s['rounds']} timed rounds after "
             f"one untimed generation, implementations alternating (each after a {SETTLE_SECONDS:g} s pause, so that the previous one's spinning worker threads have gone idle); medians. Kiln "
             f"{'with' if s['frequentReshapes'] else 'without'} `frequent_reshapes`. Ratios are medians of per-round "
             f"ratios (below 1: Kiln faster). `tokens = ORT`: the {s['tokens'] + 1} greedy tokens equal onnxruntime's "
             f"(else the index of the first difference); `max |Δlogit|`: over the steps up to that one.", "",
             "| model | threads | implementation | prefill ms | decode ms/token | Kiln / this (prefill) | Kiln / this (decode) | tokens = ORT | max \\|Δlogit\\| vs ORT |",
             "|---|---|---|---|---|---|---|---|---|"]
    notes = []
    for name, mr in report["models"].items():
        if "error" in mr:
            lines.append(f"| {name} | | | | | | | | {mr['error'][:200]} |")
            notes.append(f"- **{name}**: {mr['error']}")
        for threads, run in sorted(mr.get("runs", {}).items(), key=lambda kv: int(kv[0])):
            for label, row in run["implementations"].items():
                if "error" in row:
                    lines.append(f"| {name} | {threads} | {label} | failed | | | | | |")
                    notes.append(f"- **{name}, {threads} thread(s), {label}**: {row['error']}")
                    continue
                r = run["ratios"].get(f"kiln / {label}", {}) if label not in KILN_ROWS else {}
                cmp_ = row.get("vsOnnxruntime")
                eq = "" if cmp_ is None else ("yes" if cmp_["tokensEqual"] else f"no (from {cmp_['firstDifferentToken']})")
                lines.append(f"| {name} | {threads} | {label} | {fmt(row['prefillMs'])} | {fmt(row['decodeMsPerToken'], 3)} | "
                             f"{fmt(r.get('prefill'))} | {fmt(r.get('decode'))} | {eq} | "
                             f"{'' if cmp_ is None else format(cmp_['maxLogitDiff'], '.2e')} |")
    for name, mr in report["models"].items():
        for what in ("kiln", "llamacpp"):
            err = mr.get(what, {}).get("error") if isinstance(mr.get(what), dict) else None
            if err:
                notes.append(f"- **{name}, {what} preparation**: {err}")
    if report.get("llamacppError"):
        notes.append(f"- **llama.cpp**: {report['llamacppError']}")
    lines += ["", "Kiln's first generation (every cache length is a new input shape: the first lengths' plans are "
              "derived from the previous length's, and once three have grown alike one symbolic plan serves the "
              "lengths up to the cache's room, bound to each run's length; a later generation finds those plans "
              "kept) against the timed rounds, decode ms/token:", "",
              "| model | threads | first generation | timed median |", "|---|---|---|---|"]
    for name, mr in report["models"].items():
        for threads, run in sorted(mr.get("runs", {}).items(), key=lambda kv: int(kv[0])):
            row = run["implementations"].get("kiln", {})
            if "firstDecodeMsPerToken" in row:
                lines.append(f"| {name} | {threads} | {fmt(row['firstDecodeMsPerToken'], 3)} | {fmt(row['decodeMsPerToken'], 3)} |")
    lines += ["", "Kiln's two interfaces to the same compiled model: the state API (`kiln` rows: the cache kept by the "
              "runtime, each token's keys and values appended in place) and the exported past/present inputs and "
              "outputs (`kiln past/present`: each run returns the grown cache and the next takes it back); decode "
              "ms/token, each ÷ onnxruntime, and the state's bytes of cache moved or written whole per decode step "
              "(buffers growing, doubling, and states not kept in place; the entries appended are not counted).", "",
              "| model | threads | state | past/present | state ÷ ORT | past/present ÷ ORT | state bytes copied per token |",
              "|---|---|---|---|---|---|---|"]
    for name, mr in report["models"].items():
        for threads, run in sorted(mr.get("runs", {}).items(), key=lambda kv: int(kv[0])):
            a, b = run["implementations"].get("kiln", {}), run["implementations"].get("kiln past/present", {})
            if "decodeMsPerToken" in a and "decodeMsPerToken" in b:
                ra = run["ratios"].get("kiln / onnxruntime", {}).get("decode")
                rb = run["ratios"].get("kiln past/present / onnxruntime", {}).get("decode")
                lines.append(f"| {name} | {threads} | {fmt(a['decodeMsPerToken'], 3)} | {fmt(b['decodeMsPerToken'], 3)} | "
                             f"{fmt(ra)} | {fmt(rb)} | {a.get('stateCopiedBytesPerToken', 0):,.0f} |")
    lines += ["", "Kiln with 4-bit weights (`kiln optimize`: every matrix product's weight as int4 with a float32 "
              "scale per block of 32, as Q4_0; the embedding table stays float32): decode ms/token, how many times "
              "faster than Kiln float32, and against llama.cpp's Q4_0 (below 1: Kiln faster). Its tokens differ from "
              "the float32 model's, as llama.cpp's Q4_0 ones do.", "",
              "| model | threads | decode ms/token | float32 / int4 | Kiln int4 / llama.cpp q4_0 |", "|---|---|---|---|---|"]
    for name, mr in report["models"].items():
        for threads, run in sorted(mr.get("runs", {}).items(), key=lambda kv: int(kv[0])):
            row = run["implementations"].get("kiln int4", {})
            if "decodeMsPerToken" in row:
                speedup = run["ratios"].get("kiln / kiln int4", {}).get("decode")
                vs = run["ratios"].get("kiln int4 / llama.cpp q4_0", {}).get("decode")
                lines.append(f"| {name} | {threads} | {fmt(row['decodeMsPerToken'], 3)} | {fmt(speedup)} | {fmt(vs)} |")
    if notes:
        lines += ["", "## Failures", ""] + notes
    lines += ["", f"Written by `python3 bench/llm/run.py {s['argv']}` in {report.get('seconds', 0):.0f} s.", ""]
    with open(os.path.join(HERE, "report.md"), "w") as f:
        f.write("\n".join(lines))


def folded(tensors):
    """Names and shapes with the per-layer cache tensors folded into one entry (N = the layer)."""
    out = {}
    for t in tensors:
        out.setdefault(re.sub(r"\.\d+\.", ".N.", t["name"]), [str(d) for d in t["shape"]])
    return out


# ---- main ---------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="llama,qwen2,gpt2,phi3")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--prompt", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--frequent-reshapes", action="store_true", help="load Kiln with frequent_reshapes=True")
    ap.add_argument("--no-llamacpp", action="store_true", help="skip llama.cpp (no build, no GGUF)")
    ap.add_argument("--kiln", default=os.path.join(ROOT, ".build", "release", "kiln"), help="the kiln command line")
    ap.add_argument("--probe-kiln", help=argparse.SUPPRESS)
    ap.add_argument("--probe-state", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.probe_kiln:
        return probe_main(args)
    start = time.time()
    names = [n for n in args.models.split(",") if n]
    thread_counts = [int(t) for t in args.threads.split(",") if t]
    kiln_exe = os.path.abspath(args.kiln)
    report = {"settings": {"models": names, "threads": thread_counts, "prompt": args.prompt, "tokens": args.tokens,
                           "rounds": args.rounds, "frequentReshapes": args.frequent_reshapes,
                           "llamacpp": not args.no_llamacpp, "promptSeed": PROMPT_SEED,
                           "argv": " ".join(sys.argv[1:])},
              "models": {}}
    wheel_error = None
    try:
        report["kilnWheel"] = kiln_wheel()
    except RuntimeError as e:
        wheel_error = clean(str(e))
        report["kilnWheelError"] = wheel_error
    vendor, llamacpp_error = None, None
    if not args.no_llamacpp:
        os.makedirs(LLM, exist_ok=True)
        llamacpp_error = llmenv.ensure_llamacpp(os.path.join(LLM, "llamacpp-build.log"))
        if not llamacpp_error:
            try:
                vendor = llamacpp_source()
            except RuntimeError as e:
                llamacpp_error = clean(str(e))
        if llamacpp_error:
            report["llamacppError"] = llamacpp_error
    report["machine"] = machine()

    for name in names:
        mr = report["models"].setdefault(name, {})
        try:
            io = exporter.export(name)
        except Exception as e:
            mr["error"] = clean(f"export: {type(e).__name__}: {e}")
            write_report(report)
            continue
        mr["graph"] = {"inputs": folded(io["inputs"]), "outputs": folded(io["outputs"]),
                       "parameters": io["parameters"], "layers": io["layers"], "onnxBytes": io["onnx_bytes"]}
        kiln_dirs, kiln_error = None, wheel_error
        if not kiln_error:
            try:
                print(f"{name}: kiln convert + optimize + compile", flush=True)
                kiln_dirs, mr["kiln"] = kiln_prepare(name, kiln_exe)
            except RuntimeError as e:
                kiln_error = clean(str(e))
                mr["kiln"] = {"error": kiln_error}
        ggufs = {"errors": {}}
        if vendor:
            print(f"{name}: GGUF", flush=True)
            ggufs = gguf_prepare(name, vendor)
            mr["llamacpp"] = {k: (rel(v) if isinstance(v, str) else v) for k, v in ggufs.items()}
        mr["runs"] = {}
        for threads in thread_counts:
            print(f"{name}: {threads} thread(s)", flush=True)
            mr["runs"][str(threads)] = bench(name, threads, args, kiln_dirs, kiln_error, ggufs, llamacpp_error)
            report["seconds"] = time.time() - start
            write_report(report)
    report["seconds"] = time.time() - start
    write_report(report)
    print(open(os.path.join(HERE, "report.md")).read())


if __name__ == "__main__":
    main()
