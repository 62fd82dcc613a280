#!/usr/bin/env python3
"""Kiln on the zoo: every exported architecture (export.py) and wheel model (wheels.py), each
converted, compiled for the host, checked against onnxruntime and timed against onnxruntime and
OpenVINO in alternating rounds. Writes bench/zoo/report.md and bench/zoo/report.json.

    python3 bench/zoo/run.py [--kiln PATH] [--only NAME ...] [--rounds 5] [--repeat 20] [--threads 2]

A failure (export, convert, compile, run, a crash with its signal, a numeric mismatch, a peer's
error) is a row of the report; the run goes on. The report is rewritten after every model.
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
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zooenv  # noqa: E402

zooenv.ensure()

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = os.path.join(zooenv.ZOO, "work")
TOLERANCE = 1e-4
WARMUP = 5
TIMEOUT = 1200  # seconds for any one kiln command


# ---- subprocesses ---------------------------------------------------------------------------

class Failed(Exception):
    def __init__(self, stage, text):
        super().__init__(text)
        self.stage = stage
        self.text = text


def kiln(args, stage, env=None, timeout=TIMEOUT):
    """Runs kiln; raises Failed with the stage, the exit status or signal and kiln's own words."""
    try:
        p = subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Failed(stage, f"timed out after {timeout} s: {' '.join(args[:3])}")
    if p.returncode != 0:
        if p.returncode < 0:
            how = f"killed by {signal.Signals(-p.returncode).name}"
        else:
            how = f"exit {p.returncode}"
        # Paths relative to the repository, so the report holds no machine's directories.
        words = (p.stderr.strip() or p.stdout.strip()).replace(zooenv.ROOT + os.sep, "")[-1500:]
        raise Failed(stage, f"{how}: {words}")
    return p


# ---- peers ----------------------------------------------------------------------------------

def ort_session(path, threads):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


OV_PROBE = """
import json, sys
import numpy as np
import openvino as ov
path, threads, files = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
compiled = ov.Core().compile_model(path, "CPU", {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY",
                                                  "INFERENCE_PRECISION_HINT": "f32"})
compiled.create_infer_request().infer({k: np.load(v) for k, v in files.items()})
"""


def ov_probe(path, threads, files):
    """None when OpenVINO compiles and runs the model in a process of its own, else why not (a
    peer that crashes must not take the zoo's process with it)."""
    try:
        p = subprocess.run([sys.executable, "-c", OV_PROBE, path, str(threads), json.dumps(files)], capture_output=True, text=True,
                           timeout=600)
    except subprocess.TimeoutExpired:
        return "timed out after 600 s"
    if p.returncode < 0:
        return f"OpenVINO crashed: killed by {signal.Signals(-p.returncode).name}"
    if p.returncode:
        lines = [l.strip() for l in p.stderr.splitlines() if l.strip() and not l.strip().startswith(("Exception from", "Traceback", "File "))]
        return " ".join(lines[-3:])[:400] or f"exit {p.returncode}"
    return None


def ov_model(path, threads):
    import openvino as ov
    core = ov.Core()
    # float32 inference: this CPU has AVX-512 BF16, where OpenVINO's default precision would be bfloat16.
    compiled = core.compile_model(path, "CPU", {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY",
                                                 "INFERENCE_PRECISION_HINT": "f32"})
    return compiled, compiled.create_infer_request()


def ov_run(req, compiled, inputs):
    res = req.infer(inputs)
    return [np.array(res[o]) for o in compiled.outputs]


def timed(fn, repeat):
    for _ in range(WARMUP):
        fn()
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return float(np.median(samples))


# ---- numerics -------------------------------------------------------------------------------

def rel_error(got, want):
    """max|got - want| / max|want| (float outputs), or 0/inf for exact-match outputs."""
    if got.shape != want.shape:
        return math.inf, f"shape {list(got.shape)} vs {list(want.shape)}"
    if want.size == 0:
        return 0.0, None
    if want.dtype.kind in "fc" or got.dtype.kind in "fc":
        g, w = got.astype(np.float64), want.astype(np.float64)
        finite = np.isfinite(w)
        if not np.array_equal(np.isfinite(g), finite):
            return math.inf, "non-finite values differ"
        scale = float(np.abs(w[finite]).max()) if finite.any() else 0.0
        diff = float(np.abs(g[finite] - w[finite]).max()) if finite.any() else 0.0
        return (diff / scale if scale > 0 else diff), None
    return (0.0 if np.array_equal(got, want) else math.inf), None


def as_sets(got, want):
    """The error with rows (along the first axis that is not 1) compared as sets: sorted rows."""
    if got.shape != want.shape or got.ndim == 0:
        return math.inf
    g = got.reshape(-1, got.shape[-1]) if got.ndim > 1 else got.reshape(-1, 1)
    w = want.reshape(-1, want.shape[-1]) if want.ndim > 1 else want.reshape(-1, 1)
    gs = g[np.lexsort(np.round(g.astype(np.float64), 3).T[::-1])]
    ws = w[np.lexsort(np.round(w.astype(np.float64), 3).T[::-1])]
    return rel_error(gs, ws)[0]


# Where Kiln and onnxruntime differ by more than TOLERANCE, both are compared with the model run in
# float64 (onnx's reference evaluator on a copy whose float32 tensors are float64): a model whose
# outputs amplify float32 rounding (deep CNNs with random weights, as the zoo's are) leaves
# onnxruntime itself that far from the exact result, and OpenVINO as far from onnxruntime. Kiln
# passes such a model when it is no farther from the float64 result than FLOAT64_FACTOR times
# onnxruntime's own distance: its accuracy is then onnxruntime's, and the difference is rounding.
FLOAT64_FACTOR = 2.0


FLOAT64_MEMORY = 12 << 30
FLOAT64_SECONDS = 600


def limit_memory():
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (FLOAT64_MEMORY, FLOAT64_MEMORY))


def tapwise_conv_class():
    """A float64 Conv for onnx's evaluator that sums one kernel tap at a time: its own Conv builds
    an im2col of the dilated kernel's whole extent (tens of GiB for an atrous 3x3 of dilation 36)."""
    from onnx.reference.op_run import OpRun

    class Conv(OpRun):
        def _run(self, x, w, b=None, auto_pad=None, dilations=None, group=None, kernel_shape=None, pads=None, strides=None):
            rank = x.ndim - 2
            ks = list(w.shape[2:])
            dil = list(dilations or [1] * rank)
            st = list(strides or [1] * rank)
            pad = list(pads or [0] * (2 * rank))
            auto = auto_pad.decode() if isinstance(auto_pad, bytes) else (auto_pad or "NOTSET")
            if auto in ("SAME_UPPER", "SAME_LOWER"):
                for i in range(rank):
                    out = -(-x.shape[2 + i] // st[i])
                    total = max(0, (out - 1) * st[i] + (ks[i] - 1) * dil[i] + 1 - x.shape[2 + i])
                    lo = total // 2 if auto == "SAME_UPPER" else total - total // 2
                    pad[i], pad[i + rank] = lo, total - lo
            elif auto == "VALID":
                pad = [0] * (2 * rank)
            g = group or 1
            xp = np.pad(x, [(0, 0), (0, 0)] + [(pad[i], pad[i + rank]) for i in range(rank)])
            outs = [(xp.shape[2 + i] - (ks[i] - 1) * dil[i] - 1) // st[i] + 1 for i in range(rank)]
            n, c = x.shape[:2]
            m = w.shape[0]
            y = np.zeros([n, m] + outs, dtype=x.dtype)
            xg = xp.reshape([n, g, c // g] + list(xp.shape[2:]))
            wg = w.reshape([g, m // g, c // g] + ks)
            yg = y.reshape([n, g, m // g] + outs)
            for tap in np.ndindex(*ks):
                window = tuple(slice(tap[i] * dil[i], tap[i] * dil[i] + (outs[i] - 1) * st[i] + 1, st[i]) for i in range(rank))
                patch = xg[(slice(None), slice(None), slice(None)) + window]
                yg += np.einsum("ngc...,gmc->ngm...", patch, wg[(slice(None),) * 3 + tap])
            if b is not None:
                y += b.reshape([1, m] + [1] * rank)
            return (y,)

    return Conv


def float64_outputs(onnx_path, inputs):
    """The model's outputs computed in float64 by onnx's reference evaluator."""
    import onnx
    from onnx import TensorProto, numpy_helper
    from onnx.reference import ReferenceEvaluator

    def widen(t):
        return numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name)

    def fix(g):
        for i, t in enumerate(g.initializer):
            if t.data_type == TensorProto.FLOAT:
                g.initializer[i].CopyFrom(widen(t))
        for v in list(g.input) + list(g.output) + list(g.value_info):
            if v.type.tensor_type.elem_type == TensorProto.FLOAT:
                v.type.tensor_type.elem_type = TensorProto.DOUBLE
        for n in g.node:
            for a in n.attribute:
                if a.name in ("to", "dtype") and a.type == onnx.AttributeProto.INT and a.i == TensorProto.FLOAT:
                    a.i = TensorProto.DOUBLE
                if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == TensorProto.FLOAT:
                    a.t.CopyFrom(widen(a.t))
                if a.type == onnx.AttributeProto.GRAPH:
                    fix(a.g)
                for sub in a.graphs:
                    fix(sub)

    m = onnx.load(onnx_path)
    fix(m.graph)
    feeds = {k: (v.astype(np.float64) if v.dtype == np.float32 else v) for k, v in inputs.items()}
    return ReferenceEvaluator(m, new_ops=[tapwise_conv_class()]).run(None, feeds)


# A model that quantizes its activations at run time (DynamicQuantizeLinear, a dynamically quantized
# LSTM) turns a last-bit difference into a whole quantization step, so two correct float32
# implementations part by far more than TOLERANCE (OpenVINO does too), and the float64 evaluation
# either lacks its ops or quantizes differently. For a mismatch the float64 check does not settle,
# onnxruntime is run again on inputs changed by one ulp (SENSITIVITY_DRAWS seeded draws of ±1 ulp
# per element): Kiln passes when it is no farther from onnxruntime than onnxruntime's own largest
# move. Its accuracy is then the model's conditioning, not the kernels'.
SENSITIVITY_DRAWS = 4


def sensitivity(session, inputs, refs):
    """onnxruntime's largest relative output change over SENSITIVITY_DRAWS one-ulp perturbations of the float inputs."""
    rng = np.random.default_rng(0)
    worst = 0.0
    if not any(v.dtype == np.float32 for v in inputs.values()):
        return worst
    for _ in range(SENSITIVITY_DRAWS):
        feeds = {k: (v * (1 + rng.choice([-1.0, 1.0], size=v.shape) * 2.0**-23)).astype(np.float32) if v.dtype == np.float32 else v
                 for k, v in inputs.items()}
        moved = session.run(None, feeds)
        worst = max([worst] + [rel_error(m, r)[0] for m, r in zip(moved, refs)])
    return worst


def float64_check(onnx_path, inputs, outputs, names, refs):
    """(Kiln's, onnxruntime's) largest distance from the float64 outputs, or None when they cannot be computed."""
    # In a child process limited to FLOAT64_MEMORY bytes and FLOAT64_SECONDS: onnx's evaluator
    # on a large float64 CNN can take more memory than the machine has.
    import multiprocessing
    try:
        with multiprocessing.get_context("fork").Pool(1, initializer=limit_memory) as pool:
            truth = pool.apply_async(float64_outputs, (onnx_path, inputs)).get(timeout=FLOAT64_SECONDS)
    except Exception as e:  # an op the reference evaluator lacks, or out of memory or time: no verdict
        text = (str(e) or type(e).__name__).splitlines()[0][:200]
        print(f"  float64 reference failed: {text}", file=sys.stderr)
        return None
    kiln_err = max((rel_error(outputs[n], t)[0] for n, t in zip(names, truth) if n in outputs), default=math.inf)
    ort_err = max((rel_error(r, t)[0] for r, t in zip(refs, truth)), default=0.0)
    return kiln_err, ort_err


def compare(outputs, names, refs):
    """(max rel error, outputs compared as sets, problems) of Kiln's outputs against onnxruntime's."""
    worst, sets, problems = 0.0, [], []
    for name, want in zip(names, refs):
        got = outputs.get(name)
        if got is None:
            problems.append(f"{name}: missing")
            worst = math.inf
            continue
        err, why = rel_error(got, want)
        if err > TOLERANCE:
            set_err = as_sets(got, want)
            if set_err <= TOLERANCE:
                sets.append(name)
                err = set_err
            elif why:
                problems.append(f"{name}: {why}")
        worst = max(worst, err)
    return worst, sets, problems


def judge(row, onnx_path, session, inputs, outputs, out_names, refs):
    """Compares Kiln's outputs with onnxruntime's and sets the row's status: ok, ok (sets), then,
    past TOLERANCE, ok (float32 rounding) or ok (ill-conditioned) when the float64 run or
    onnxruntime's own sensitivity accounts for the difference, else mismatch."""
    err, sets, problems = compare(outputs, out_names, refs)
    row["maxRelError"] = err
    row["comparedAsSets"] = sets
    if problems:
        row["problems"] = problems
    row["status"] = ("ok" if not sets else "ok (sets)") if err <= TOLERANCE else "mismatch"
    if row["status"] == "mismatch" and not problems:
        check = float64_check(onnx_path, inputs, outputs, out_names, refs)
        if check:
            row["float64RelError"], row["ortFloat64RelError"] = check
            if check[0] <= max(TOLERANCE, FLOAT64_FACTOR * check[1]):
                row["status"] = "ok (float32 rounding)"
        if row["status"] == "mismatch":
            row["ortSensitivity"] = sensitivity(session, inputs, refs)
            if err <= row["ortSensitivity"]:
                row["status"] = "ok (ill-conditioned)"
    return row["status"]


# ---- kiln's profile and plan ----------------------------------------------------------------

STEP = re.compile(r"^\s+([\d.]+)%\s+([\d.]+) ms\s+(.*) \[([^\]]+)\]$")


def kernel_class(kernel, op_type):
    """A step's class: its kernel without the ISA suffix and tile size (f32_conv2d_winograd), or
    'reference:OpType' for steps the reference interpreter runs."""
    if kernel == "reference":
        return f"reference:{op_type or '?'}"
    k = kernel.split("__")[0]
    k = re.sub(r"_\d+x\d+$", "", k)
    return k


def profile(kiln_path, artifact, extra, threads, op_types):
    env = dict(os.environ, KILN_PROFILE="1", KILN_PROFILE_TOP="100000")
    err = kiln([kiln_path, "bench", artifact, "--repeat", "5", "--warmup", "1", "--threads", str(threads)] + extra, "profile",
               env=env).stderr
    steps, fallbacks, generic = [], [], []
    for line in err.splitlines():
        m = STEP.match(line)
        if m:
            steps.append((m.group(3), m.group(4), float(m.group(2))))
            continue
        s = line.strip()
        if s.startswith("fallback: "):
            fallbacks.append(s[len("fallback: "):])
        elif s.startswith("shapes run generically: "):
            generic.append(s[len("shapes run generically: "):])
    fallback_names = {f.split(": ")[0] for f in fallbacks}
    # A control-flow step's time holds its bodies' steps (named with its name as prefix): count those once.
    own = []
    for name, kernel, ms in steps:
        inner = sum(m for n, _, m in steps if n != name and n.startswith(name + "_"))
        own.append((name, kernel, max(ms - inner, 0.0)))
    steps = own
    total = sum(ms for _, _, ms in steps) or 1e-9
    classes = {}
    reference = {}
    for name, kernel, ms in steps:
        ref = kernel == "reference" or name in fallback_names
        cls = kernel_class("reference" if ref else kernel, op_types.get(name))
        classes[cls] = classes.get(cls, 0.0) + ms
        if ref:
            reference[name] = op_types.get(name, "?")
    for f in fallback_names:
        reference.setdefault(f, op_types.get(f, "?"))
    top = sorted(classes.items(), key=lambda kv: -kv[1])
    return {
        "stepMs": round(total, 4),
        "steps": len(steps),
        "referenceSteps": len(reference),
        "referenceOps": count_ops(reference.values()),
        "referenceMs": round(sum(ms for name, k, ms in steps if name in reference), 4),
        "fallbacks": fallbacks,
        "generic": generic,
        "classes": [{"class": c, "ms": round(ms, 4), "share": round(ms / total, 4)} for c, ms in top[:6]],
    }


def count_ops(ops):
    out = {}
    for o in ops:
        out[o] = out.get(o, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


def snake(op_type):
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", op_type).lower()


class OpNames(dict):
    """Step name -> op type: kiln inspect's steps, and for steps it does not list (the bodies of
    control-flow ops, which Kiln names with their parent's prefix) the ONNX node whose name ends the step's name."""

    def __init__(self, known, onnx_path):
        super().__init__(known)
        import onnx
        self.nodes = {}

        def walk(graph):
            for n in graph.node:
                if n.name:
                    self.nodes[n.name] = snake(n.op_type)
                for a in n.attribute:
                    if a.type == onnx.AttributeProto.GRAPH:
                        walk(a.g)
                    for g in a.graphs:
                        walk(g)
        try:
            walk(onnx.load(onnx_path, load_external_data=False).graph)
        except Exception:
            pass

    def get(self, name, default=None):
        if name in self:
            return self[name]
        if name in self.nodes:
            return self.nodes[name]
        best = max((n for n in self.nodes if name.endswith(n)), key=len, default=None)
        if best:
            return self.nodes[best]
        tail = name.rsplit("/", 1)[-1].split("_")[0]
        return snake(tail) if tail else default


def inspect(kiln_path, artifact):
    d = json.loads(kiln([kiln_path, "inspect", artifact, "--json"], "inspect").stdout)
    steps = [s for f in d["artifact"]["functions"] for s in f.get("stepKernels", [])]
    ref = [s["opType"] for s in steps if s["kernel"] == "reference"]
    return {s["op"]: s["opType"] for s in steps}, {"steps": len(steps), "referenceSteps": len(ref), "referenceOps": count_ops(ref)}


# ---- one model ------------------------------------------------------------------------------

def measure(meta, model_dir, args):
    name = meta["name"]
    row = {"name": name, "source": meta["source"], "exporter": meta["exporter"], "note": meta.get("note", ""), "status": None}
    if meta.get("error"):
        row.update(status="export error", error=meta["error"])
        return row
    onnx_path = os.path.join(model_dir, meta["onnx"])
    inputs = {k: np.load(os.path.join(model_dir, v)) for k, v in meta["inputs"].items()}
    row["inputs"] = {k: [str(v.dtype), list(v.shape)] for k, v in inputs.items()}
    extra = []
    for k, v in meta["inputs"].items():
        extra += ["--input", f"{k}={os.path.join(model_dir, v)}"]
    work = os.path.join(WORK, name)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)

    # The reference outputs and the peers' sessions.
    try:
        session = ort_session(onnx_path, args.threads)
        out_names = [o.name for o in session.get_outputs()]
        refs = session.run(None, inputs)
        scales = [float(np.abs(r.astype(np.float64)).max()) for r in refs if r.dtype.kind == "f" and r.size]
        row["minOutputScale"] = min(scales) if scales else None
    except Exception as e:
        row.update(status="onnxruntime error", error=str(e).splitlines()[0][:500])
        return row
    ov = None
    try:
        why = ov_probe(onnx_path, args.threads, {k: os.path.join(model_dir, v) for k, v in meta["inputs"].items()})
        if why:
            raise RuntimeError(why)
        ov = ov_model(onnx_path, args.threads)
        ov_out = ov_run(ov[1], ov[0], inputs)
        row["openvinoRelError"] = max([rel_error(g, w)[0] for g, w in zip(ov_out, refs)] or [0.0])
    except Exception as e:
        lines = [l.strip() for l in str(e).splitlines() if l.strip() and not l.strip().startswith("Exception from")]
        row["openvinoError"] = " ".join(lines)[:400] or type(e).__name__
        ov = None

    # Kiln: convert, compile, run, compare.
    started = time.time()
    try:
        package = os.path.join(work, f"{name}.kiln")
        kiln([args.kiln, "convert", onnx_path, "-o", package], "convert")
        assets = json.loads(kiln([args.kiln, "compile", package, "--arch", "host", "-o", os.path.join(work, "compiled"), "--json"],
                                 "compile").stdout)
        row["convertCompileSeconds"] = round(time.time() - started, 2)
        artifact = os.path.join(work, "compiled", assets["artifacts"][0]["file"])
        row["arch"] = assets["artifacts"][0]["arch"]
        op_types, row["inspect"] = inspect(args.kiln, artifact)
        op_types = OpNames(op_types, onnx_path)
        out_dir = os.path.join(work, "outputs")
        kiln([args.kiln, "run", artifact, "--output-dir", out_dir] + extra, "run")
        listing = {o["name"]: o["file"] for o in json.load(open(os.path.join(out_dir, "outputs.json")))["outputs"]}
        outputs = {n: np.load(os.path.join(out_dir, f)) for n, f in listing.items()}
        judge(row, onnx_path, session, inputs, outputs, out_names, refs)
        row["profile"] = profile(args.kiln, artifact, extra, args.threads, op_types)
    except Failed as f:
        row.update(status=f"{f.stage} error" if "killed by" not in f.text else f"{f.stage} crash", error=f.text)
        return row

    # Latency: Kiln, onnxruntime, OpenVINO in alternating rounds.
    ks, os_, vs, r_ort, r_best = [], [], [], [], []
    try:
        for _ in range(args.rounds):
            out = kiln([args.kiln, "bench", artifact, "--json", "--repeat", str(args.repeat), "--warmup", str(WARMUP),
                        "--threads", str(args.threads)] + extra, "bench")
            k = json.loads(out.stdout)["latencySeconds"]["median"]
            o = timed(lambda: session.run(None, inputs), args.repeat)
            v = timed(lambda: ov_run(ov[1], ov[0], inputs), args.repeat) if ov else None
            ks.append(k)
            os_.append(o)
            r_ort.append(k / o)
            r_best.append(k / min(o, v) if v else k / o)
            if v:
                vs.append(v)
    except Failed as f:
        row.update(status=f"{f.stage} error" if "killed by" not in f.text else f"{f.stage} crash", error=f.text)
        return row
    row.update(kilnMs=float(np.median(ks)) * 1e3, ortMs=float(np.median(os_)) * 1e3,
               openvinoMs=float(np.median(vs)) * 1e3 if vs else None,
               ratioOrt=float(np.median(r_ort)), ratioBest=float(np.median(r_best)))
    return row


# ---- the machine ----------------------------------------------------------------------------

def machine(threads):
    info = {"python": platform.python_version(), "threads": threads, "cores": os.cpu_count()}
    try:
        cpu = open("/proc/cpuinfo").read()
        info["cpu"] = re.search(r"model name\s*:\s*(.*)", cpu).group(1).strip()
        flags = set(re.search(r"flags\s*:\s*(.*)", cpu).group(1).split())
        info["isa"] = [f for f in ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "amx_tile") if f in flags]
    except (OSError, AttributeError):
        pass
    cc = shutil.which("clang") or shutil.which("cc")
    if cc:
        exe = os.path.join(WORK, "peak")
        try:
            subprocess.run([cc, "-O2", "-pthread", os.path.join(zooenv.ROOT, "bench", "probe", "peak.c"), "-o", exe], check=True,
                           capture_output=True)
            info["peak"] = json.loads(subprocess.run([exe, str(threads)], check=True, capture_output=True, text=True).stdout)
        except (subprocess.CalledProcessError, json.JSONDecodeError) as e:
            info["peakError"] = str(e)
    import onnxruntime
    import openvino
    info["versions"] = {"onnxruntime": onnxruntime.__version__, "openvino": openvino.__version__.split("-")[0],
                        "numpy": np.__version__}
    return info


# ---- report ---------------------------------------------------------------------------------

def geomean(xs):
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return (math.exp(sum(math.log(x) for x in xs) / len(xs)), len(xs)) if xs else (None, 0)


def summary(rows):
    out = {}
    for label, pick in (("architectures", lambda r: r["source"] != "wheel"), ("wheels", lambda r: r["source"] == "wheel"),
                        ("all", lambda r: True)):
        sel = [r for r in rows if pick(r) and r.get("ratioOrt")]
        g_ort, n = geomean([r["ratioOrt"] for r in sel])
        g_best, _ = geomean([r["ratioBest"] for r in sel])
        out[label] = {"models": len([r for r in rows if pick(r)]), "timed": n, "geomeanVsOrt": g_ort, "geomeanVsFasterPeer": g_best}
    statuses = {}
    for r in rows:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    out["statuses"] = statuses
    ref_ops = {}
    for r in rows:
        for op, n in (r.get("profile") or {}).get("referenceOps", {}).items():
            ref_ops.setdefault(op, []).append(r["name"])
    out["referenceOps"] = {op: sorted(set(ms)) for op, ms in sorted(ref_ops.items())}
    return out


def fmt(x, spec):
    return "—" if x is None else format(x, spec)


def ref_text(r):
    p = r.get("profile")
    if not p:
        return "—"
    if not p["referenceSteps"]:
        return "0"
    return f"{p['referenceSteps']} (" + ", ".join(f"{op}×{n}" if n > 1 else op for op, n in p["referenceOps"].items()) + ")"


def write_report(rows, info, args, seconds, partial):
    s = summary(rows)
    data = {"machine": info, "settings": {"rounds": args.rounds, "repeat": args.repeat, "threads": args.threads, "warmup": WARMUP,
                                          "tolerance": TOLERANCE}, "seconds": round(seconds, 1), "partial": partial,
            "summary": s, "models": rows}
    with open(os.path.join(HERE, "report.json"), "w") as f:
        json.dump(data, f, indent=1, default=lambda x: None)
    L = ["# Kiln zoo report", ""]
    if partial:
        L += ["*Partial: the run was still going when this was written.*", ""]
    peak = info.get("peak") or {}
    peak_text = ", ".join(p for p in (f"FMA AVX-512 {peak['fma_avx512_gflops']:.0f} GFLOP/s" if "fma_avx512_gflops" in peak else None,
                                      f"FMA AVX2 {peak['fma_avx2_gflops']:.0f} GFLOP/s" if "fma_avx2_gflops" in peak else None,
                                      f"read {peak['read_gbs']:.1f} GB/s" if "read_gbs" in peak else None) if p)
    v = info.get("versions", {})
    L += [f"Machine: {info.get('cpu', '?')}, {info.get('cores')} cores, ISA {' '.join(info.get('isa', []))}; "
          f"ceilings on {args.threads} threads (bench/probe/peak.c): {peak_text or 'not measured'}.",
          f"Peers: onnxruntime {v.get('onnxruntime')} (intra-op {args.threads} threads, inter-op 1), OpenVINO {v.get('openvino')} "
          f"(CPU, INFERENCE_NUM_THREADS={args.threads}, latency hint, float32 precision). "
          f"{args.rounds} alternating rounds of {args.repeat} timed runs after {WARMUP} warm-up runs each; ratios are medians of "
          f"the per-round ratios. Run time {seconds / 60:.1f} min.", ""]
    L += ["| geomean over | models | timed | kiln/ORT | kiln/faster peer |", "|---|---:|---:|---:|---:|"]
    for label in ("architectures", "wheels", "all"):
        g = s[label]
        L.append(f"| {label} | {g['models']} | {g['timed']} | {fmt(g['geomeanVsOrt'], '.2f')} | {fmt(g['geomeanVsFasterPeer'], '.2f')} |")
    L += ["", "Statuses: " + ", ".join(f"{k} {n}" for k, n in sorted(s["statuses"].items(), key=lambda kv: -kv[1])), ""]
    L += ["| model | source | exporter | status | max rel err | reference steps | kiln ms | ORT ms | OpenVINO ms | kiln/ORT | kiln/faster peer | top step class |",
          "|---|---|---|---|---:|---|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        p = r.get("profile") or {}
        top = p.get("classes", [])
        top_text = f"{top[0]['class']} {top[0]['share'] * 100:.0f}%" if top else "—"
        err = r.get("maxRelError")
        err_text = "—" if err is None else ("inf" if not math.isfinite(err) else f"{err:.1e}")
        if r.get("float64RelError") is not None:
            err_text += f" (to float64: Kiln {r['float64RelError']:.1e}, ORT {r['ortFloat64RelError']:.1e})"
        if r.get("ortSensitivity") is not None:
            err_text += f" (ORT under 1-ulp input changes: {r['ortSensitivity']:.1e})"
        if r["status"] != "ok" and r.get("openvinoRelError") is not None and err is not None and err > TOLERANCE:
            err_text += f" (OpenVINO {r['openvinoRelError']:.1e})"
        if r.get("minOutputScale") is not None and r["minOutputScale"] < 1e-6:
            err_text += " (an output is ~0)"
        if r.get("comparedAsSets"):
            err_text += " (sets: " + ", ".join(r["comparedAsSets"]) + ")"
        L.append(f"| {r['name']} | {r['source']} | {r['exporter']} | {r['status']} | {err_text} | {ref_text(r)} | "
                 f"{fmt(r.get('kilnMs'), '.2f')} | {fmt(r.get('ortMs'), '.2f')} | {fmt(r.get('openvinoMs'), '.2f')} | "
                 f"{fmt(r.get('ratioOrt'), '.2f')} | {fmt(r.get('ratioBest'), '.2f')} | {top_text} |")
    L += ["", "## Reference-interpreter steps by op", ""]
    if s["referenceOps"]:
        for op, models in s["referenceOps"].items():
            L.append(f"- {op}: {', '.join(models)}")
    else:
        L.append("none")
    disagree = [r for r in rows if r.get("profile") and r.get("inspect") and r["profile"]["referenceSteps"] != r["inspect"]["referenceSteps"]]
    if disagree:
        L += ["", "Where `kiln inspect` and the run's profile count reference steps differently (plan-time fallbacks or control-flow bodies):", ""]
        for r in disagree:
            L.append(f"- {r['name']}: profile {r['profile']['referenceSteps']} {r['profile']['referenceOps']}, inspect "
                     f"{r['inspect']['referenceSteps']} {r['inspect']['referenceOps']}")
    timed_rows = sorted([r for r in rows if r.get("ratioBest")], key=lambda r: -r["ratioBest"])[:10]
    if timed_rows:
        L += ["", "## Slowest against the faster peer", "", "| model | kiln/faster peer | step classes (share of Kiln's step time) |", "|---|---:|---|"]
        for r in timed_rows:
            cl = ", ".join(f"{c['class']} {c['share'] * 100:.0f}%" for c in r["profile"]["classes"][:4])
            L.append(f"| {r['name']} | {r['ratioBest']:.2f} | {cl} |")
    failures = [r for r in rows if r.get("error") or r.get("problems") or r.get("openvinoError")]
    if failures:
        L += ["", "## Errors", ""]
        for r in failures:
            if r.get("error"):
                L += ["", f"**{r['name']}** ({r['status']}):", "", "```", r["error"].strip()[:1500], "```", ""]
            if r.get("problems"):
                L.append(f"- {r['name']}: " + "; ".join(r["problems"]))
            if r.get("openvinoError"):
                L.append(f"- {r['name']}: OpenVINO: {r['openvinoError']}")
    notes = [r for r in rows if r.get("note")]
    if notes:
        L += ["", "## Notes", ""] + [f"- {r['name']}: {r['note']}" for r in notes]
    with open(os.path.join(HERE, "report.md"), "w") as f:
        f.write("\n".join(L) + "\n")


def cases(only):
    out = []
    arch = json.load(open(os.path.join(zooenv.ARCH_DIR, "order.json"))) if os.path.exists(os.path.join(zooenv.ARCH_DIR, "order.json")) else None
    names = arch or sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(zooenv.ARCH_DIR, "*.json")) if not p.endswith("order.json"))
    for n in names:
        p = os.path.join(zooenv.ARCH_DIR, f"{n}.json")
        if os.path.exists(p):
            out.append((json.load(open(p)), zooenv.ARCH_DIR))
    for m in json.load(open(os.path.join(HERE, "wheels.json")))["models"]:
        p = os.path.join(zooenv.WHEEL_DIR, f"{m['name']}.json")
        if os.path.exists(p):
            out.append((json.load(open(p)), zooenv.WHEEL_DIR))
    return [c for c in out if not only or c[0]["name"] in only]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", default=os.path.join(zooenv.ROOT, ".build/release/kiln"))
    ap.add_argument("--only", nargs="*", default=[], metavar="NAME")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-fetch", action="store_true", help="use the models already in .build/zoo (skip export.py and wheels.py)")
    ap.add_argument("--merge", action="store_true", help="keep report.json's other rows (with --only: re-measure just those)")
    args = ap.parse_args()
    args.kiln = os.path.abspath(args.kiln)
    if not os.path.exists(args.kiln):
        raise SystemExit(f"error: no kiln at {args.kiln} (make build, or --kiln PATH)")
    if not args.no_fetch:
        only = ["--only"] + args.only if args.only else []
        subprocess.run([sys.executable, os.path.join(HERE, "export.py"), "--ignore-unknown"] + only, check=False)
        subprocess.run([sys.executable, os.path.join(HERE, "wheels.py")] + only, check=True)
    os.makedirs(WORK, exist_ok=True)
    info = machine(args.threads)
    started = time.time()
    previous = []
    if args.merge and os.path.exists(os.path.join(HERE, "report.json")):
        previous = json.load(open(os.path.join(HERE, "report.json")))["models"]
    todo = cases(args.only)
    names = [m["name"] for m, _ in todo]
    rows = [r for r in previous if r["name"] not in names]
    for meta, model_dir in todo:
        t = time.time()
        try:
            row = measure(meta, model_dir, args)
        except Exception as e:  # never abort the run for one model
            row = {"name": meta["name"], "source": meta["source"], "exporter": meta["exporter"], "note": meta.get("note", ""),
                   "status": "harness error", "error": f"{type(e).__name__}: {e}"}
        row["seconds"] = round(time.time() - t, 1)
        rows.append(row)
        print(f"{row['name']}: {row['status']} err={row.get('maxRelError')} kiln={fmt(row.get('kilnMs'), '.2f')} ms "
              f"ort={fmt(row.get('ortMs'), '.2f')} ov={fmt(row.get('openvinoMs'), '.2f')} ({row['seconds']} s)", flush=True)
        write_report(rows, info, args, time.time() - started, partial=True)
    write_report(rows, info, args, time.time() - started, partial=False)


if __name__ == "__main__":
    main()
