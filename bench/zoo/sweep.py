#!/usr/bin/env python3
"""The symbolic-dim sweep: every zoo model rewritten so that Kiln must infer every shape, then
converted, compiled for the host, run on the model's own inputs and compared with onnxruntime's
outputs for the original model. Writes bench/zoo/sweep.md and bench/zoo/sweep.json.

    python3 bench/zoo/sweep.py [--kiln PATH] [--only NAME ...]

The variant of a model gives each dim of each graph input (initializers excepted) a symbol of its
own (INPUT_dimK), drops the graph's value_info and clears the graph outputs' shapes (their element
types stay). Models come from .build/zoo as run.py leaves it (export.py and wheels.py are not run);
variants and Kiln's files go to .build/zoo/sweep/NAME/.
"""
import argparse
import json
import math
import os
import shlex
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zooenv  # noqa: E402

zooenv.ensure()

import numpy as np  # noqa: E402

sys.dont_write_bytecode = True  # no __pycache__ in bench/zoo from importing run.py
import run  # noqa: E402  (constants and functions only at import)

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = os.path.join(zooenv.ZOO, "sweep")


def rel(path):
    """path relative to the repository when it is inside it (the report holds no machine's directories)."""
    r = os.path.relpath(path, zooenv.ROOT)
    return path if r.startswith("..") else r


# ---- the variant ----------------------------------------------------------------------------

def has_external_data(model):
    import onnx
    from onnx.external_data_helper import _get_all_tensors
    return any(t.data_location == onnx.TensorProto.EXTERNAL for t in _get_all_tensors(model))


def symbolic_variant(onnx_path, out_path):
    """Writes the symbolic-dim variant of onnx_path to out_path (external data, if the original has
    any, to OUT.data beside it); returns the symbols given to each input."""
    import onnx
    model = onnx.load(onnx_path, load_external_data=False)
    external = has_external_data(model)
    if external:
        onnx.load_external_data_for_model(model, os.path.dirname(os.path.abspath(onnx_path)))
    g = model.graph
    weights = {t.name for t in g.initializer} | {t.name for t in g.sparse_initializer}
    symbols = {}
    for v in g.input:
        if v.name in weights or not v.type.HasField("tensor_type") or not v.type.tensor_type.HasField("shape"):
            continue
        names = []
        for k, d in enumerate(v.type.tensor_type.shape.dim):
            d.Clear()
            d.dim_param = f"{v.name}_dim{k}"
            names.append(d.dim_param)
        symbols[v.name] = names
    del g.value_info[:]
    for v in g.output:
        if v.type.HasField("tensor_type"):
            v.type.tensor_type.ClearField("shape")
    if external or model.ByteSize() > (1 << 31) - (1 << 24):
        onnx.save(model, out_path, save_as_external_data=True, all_tensors_to_one_file=True,
                  location=os.path.basename(out_path) + ".data", size_threshold=1024)
    else:
        onnx.save(model, out_path)
    return symbols, external


# ---- one model ------------------------------------------------------------------------------

def sweep(meta, model_dir, kiln_path, static_rows):
    name = meta["name"]
    row = {"name": name, "source": meta["source"], "exporter": meta["exporter"], "status": None,
           "staticStatus": (static_rows.get(name) or {}).get("status")}
    if meta.get("error"):
        row.update(status="export error", error=meta["error"])
        return row
    onnx_path = os.path.join(model_dir, meta["onnx"])
    inputs = {k: np.load(os.path.join(model_dir, v)) for k, v in meta["inputs"].items()}
    feeds = []
    for k, v in meta["inputs"].items():
        feeds += ["--input", f"{k}={os.path.join(model_dir, v)}"]
    work = os.path.join(WORK, name)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)

    try:
        session = run.ort_session(onnx_path, 2)
        out_names = [o.name for o in session.get_outputs()]
        refs = session.run(None, inputs)
    except Exception as e:
        row.update(status="onnxruntime error", error=str(e).splitlines()[0][:500])
        return row

    variant = os.path.join(work, f"{name}_symbolic.onnx")
    try:
        row["symbols"], row["externalData"] = symbolic_variant(onnx_path, variant)
    except Exception as e:
        row.update(status="variant error", error=f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:500])
        return row
    row["variant"] = rel(variant)

    package = os.path.join(work, f"{name}.kiln")
    compiled = os.path.join(work, "compiled")
    out_dir = os.path.join(work, "outputs")
    done = []  # the commands so far, to reproduce a failure

    def step(args, stage):
        done.append(" ".join(shlex.quote(rel(a) if os.path.isabs(a) else a) for a in args))
        return run.kiln(args, stage)

    try:
        step([kiln_path, "convert", variant, "-o", package], "convert")
        row["converts"] = True
        assets = json.loads(step([kiln_path, "compile", package, "--arch", "host", "-o", compiled, "--json"], "compile").stdout)
        row["compiles"] = True
        artifact = os.path.join(compiled, assets["artifacts"][0]["file"])
        row["arch"] = assets["artifacts"][0]["arch"]
        step([kiln_path, "run", artifact, "--output-dir", out_dir] + feeds, "run")
        row["runs"] = True
        listing = {o["name"]: o["file"] for o in json.load(open(os.path.join(out_dir, "outputs.json")))["outputs"]}
        outputs = {n: np.load(os.path.join(out_dir, f)) for n, f in listing.items()}
        run.judge(row, onnx_path, session, inputs, outputs, out_names, refs)
    except run.Failed as f:
        row.update(status=f"{f.stage} {'crash' if 'killed by' in f.text else 'error'}", error=f.text, repro=done)
    return row


# ---- report ---------------------------------------------------------------------------------

def passed(r):
    return (r.get("status") or "").startswith("ok")


def crashed(r):
    return (r.get("status") or "").endswith("crash")


def first_line(text):
    """The first line of an error that says something (kiln's message, after 'exit N: ')."""
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def yes(r, key):
    return "yes" if r.get(key) else ("—" if r.get("status") in ("export error", "onnxruntime error", "variant error") else "no")


def write_report(rows, kiln_path, seconds, partial):
    n_pass = sum(passed(r) for r in rows)
    n_crash = sum(crashed(r) for r in rows)
    line = f"{n_pass} of {len(rows)} models pass the symbolic-dim sweep, {n_crash} crash"
    data = {"kiln": rel(kiln_path), "tolerance": run.TOLERANCE, "seconds": round(seconds, 1), "partial": partial,
            "summary": {"models": len(rows), "pass": n_pass, "crash": n_crash, "line": line}, "models": rows}
    with open(os.path.join(HERE, "sweep.json"), "w") as f:
        json.dump(data, f, indent=1, default=lambda x: None)
    L = ["# Kiln zoo: the symbolic-dim sweep", ""]
    if partial:
        L += ["*Partial: the run was still going when this was written.*", ""]
    L += ["Every zoo model with each graph input's dims made symbols of their own (`INPUT_dimK`), its `value_info` "
          "dropped and its outputs' shapes cleared, converted, compiled for the host and run on its own inputs; the "
          f"outputs are compared with onnxruntime's for the original model (run.py's comparison, tolerance {run.TOLERANCE:g}). "
          "`static` is the model's status in report.md, with its shapes as exported. "
          f"Run time {seconds / 60:.1f} min. Made by `bench/zoo/sweep.py`.", "", line + ".", "",
          "| model | source | converts | compiles | runs | result | max rel err | static | error |",
          "|---|---|---|---|---|---|---:|---|---|"]
    for r in rows:
        err = r.get("maxRelError")
        err_text = "—" if err is None else ("inf" if not math.isfinite(err) else f"{err:.1e}")
        result = ("pass" + r["status"][2:]) if passed(r) else (r.get("status") or "?")
        msg = first_line(r.get("error")) or "; ".join(r.get("problems") or [])
        msg = msg.replace("|", "\\|")[:300]
        L.append(f"| {r['name']} | {r['source']} | {yes(r, 'converts')} | {yes(r, 'compiles')} | {yes(r, 'runs')} | {result} | "
                 f"{err_text} | {r.get('staticStatus') or '—'} | {msg} |")
    fails = [r for r in rows if not passed(r)]
    if fails:
        L += ["", "## Failures", ""]
        for r in fails:
            L += [f"**{r['name']}** ({r['status']}), variant `{r.get('variant', '—')}`:", ""]
            if r.get("error"):
                L += ["```", r["error"].strip()[:1500], "```"]
            if r.get("problems"):
                L.append("- " + "; ".join(r["problems"]))
            if r.get("repro"):
                L += ["", "Reproduce:", "", "```sh"] + r["repro"] + ["```"]
            L.append("")
    with open(os.path.join(HERE, "sweep.md"), "w") as f:
        f.write("\n".join(L).rstrip() + "\n")
    return line


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", default=os.path.join(zooenv.ROOT, ".build/release/kiln"))
    ap.add_argument("--only", nargs="*", default=[], metavar="NAME")
    args = ap.parse_args()
    args.kiln = os.path.abspath(args.kiln)
    if not os.path.exists(args.kiln):
        raise SystemExit(f"error: no kiln at {args.kiln} (make build, or --kiln PATH)")
    static = {}
    if os.path.exists(os.path.join(HERE, "report.json")):
        static = {r["name"]: r for r in json.load(open(os.path.join(HERE, "report.json")))["models"]}
    os.makedirs(WORK, exist_ok=True)
    todo = run.cases(args.only)
    if not todo:
        raise SystemExit("error: no zoo models in .build/zoo (run bench/zoo/run.py, or export.py and wheels.py, first)")
    started = time.time()
    rows = []
    for meta, model_dir in todo:
        t = time.time()
        try:
            row = sweep(meta, model_dir, args.kiln, static)
        except Exception as e:  # never abort the sweep for one model
            row = {"name": meta["name"], "source": meta["source"], "exporter": meta["exporter"],
                   "status": "harness error", "error": f"{type(e).__name__}: {e}"}
        row["seconds"] = round(time.time() - t, 1)
        rows.append(row)
        print(f"{row['name']}: {row['status']} err={row.get('maxRelError')} {first_line(row.get('error'))[:200]} ({row['seconds']} s)",
              flush=True)
        write_report(rows, args.kiln, time.time() - started, partial=True)
    print(write_report(rows, args.kiln, time.time() - started, partial=False))


if __name__ == "__main__":
    main()
