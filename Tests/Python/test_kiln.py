"""Checks the installed `kiln` wheel (run in a fresh virtual environment by `make python-test`):
runs agree bit for bit with `kiln run`, errors raise KilnError naming the problem, and runs from
several threads agree.

    python test_kiln.py REPO_ROOT SCRATCH_DIR
"""
import gc
import os
import sys
import threading

import numpy as np

import kiln

ROOT, SCRATCH = sys.argv[1], sys.argv[2]
os.makedirs(SCRATCH, exist_ok=True)
checks = 0


def check(condition, message):
    global checks
    checks += 1
    if not condition:
        raise SystemExit(f"FAIL: {message}")


def cli_outputs(path, inputs, *extra):
    """`kiln run PATH --input …` outputs, read back from its .npy files."""
    out = os.path.join(SCRATCH, f"cli-{checks}")
    args = ["run", path, "--output-dir", out, *extra]
    for name, array in inputs.items():
        f = os.path.join(SCRATCH, f"in-{checks}-{name}.npy")
        np.save(f, array)
        args += ["--input", f"{name}={f}"]
    kiln.cli(*args)
    return {f[:-4]: np.load(os.path.join(out, f)) for f in os.listdir(out) if f.endswith(".npy")}


def same(a, b):
    return a.keys() == b.keys() and all(a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and a[k].tobytes() == b[k].tobytes() for k in a)


def models_dir():
    for d in (os.environ.get("KILN_TEST_MODELS"), os.path.join(ROOT, "..", "shared", "models"), os.path.join(ROOT, ".build", "models")):
        if d and os.path.exists(os.path.join(d, "mobilenetv3_orientation.onnx")):
            return d
    return None


# The example package, by the reference interpreter, and compiled for this host.
example = os.path.join(ROOT, "examples", "TinyClassifier.kiln")
features = np.load(os.path.join(ROOT, "examples", "TinyClassifier.features.npy"))
check(kiln.host_architecture() is not None, "host architecture")
check(kiln.version().startswith("0."), kiln.version())
with kiln.load(example) as m:
    check(m.functions == ["main"], m.functions)
    check(m.architecture is None, "a package runs on the reference interpreter")
    check(m.inputs == [kiln.TensorInfo("features", np.dtype(np.float32), ("batch", 64))], m.inputs)
    check(m.outputs[0].name == "probabilities" and m.outputs[0].shape == ("batch", 10), m.outputs)
    check(same(m.run({"features": features}), cli_outputs(example, {"features": features})), "package outputs")

compiled = os.path.join(SCRATCH, "compiled")
assets = kiln.compile(example, compiled, arch="host")
check(assets["model"] == "TinyClassifier" and len(assets["artifacts"]) == 1, assets)
m = kiln.load(compiled, threads=2)
check(m.architecture == kiln.host_architecture(), m.architecture)
check("chosen" in m.explanation, m.explanation)
expected = cli_outputs(compiled, {"features": features})
check(same(m.run({"features": features}), expected), "artifact outputs")
# With frequent reshapes each batch size runs a plan derived from the previous one: the same outputs as cached plans.
reshaping = kiln.load(compiled, threads=2, frequent_reshapes=True)
for rows in range(1, 6):
    x = np.random.default_rng(rows).standard_normal((rows, 64)).astype(np.float32)
    check(same(reshaping.run({"features": x}), m.run({"features": x})), f"frequent reshapes, batch {rows}")
# A non-contiguous input gives the same result as its contiguous copy.
wide = np.repeat(features, 2, axis=1)[:, ::2]
check(same(m.run({"features": wide}), m.run({"features": np.ascontiguousarray(wide)})), "strided input")
# Outputs are arrays over the runtime's result buffers: they keep their values after the run's
# input changes, after the run's other outputs and the model are gone; an output that is the
# input itself is a copy of it, not the caller's memory.
# State: a package declaring past=present runs with the state passing each run's present back as
# the next run's past, as a caller feeding it back does; the state's own inputs are refused.
stateful = os.path.join(SCRATCH, "stateful.kiln")
info = kiln.convert(os.path.join(ROOT, "Tests", "Fixtures", "onnx", "models", "past_concat_expression.onnx"), stateful, state="past=present")
check(info["functions"][0]["states"] == [{"input": "past", "output": "present"}], info["functions"][0])
kiln.compile(stateful, os.path.join(SCRATCH, "stateful"), arch="host")
for path in (stateful, os.path.join(SCRATCH, "stateful")):
    with kiln.load(path) as sm:
        state = sm.make_state()
        past = np.zeros((1, 0, 4), np.float32)
        for step in range(5):
            rows = 3 if step == 0 else 1
            x = np.random.default_rng(step).standard_normal((1, rows, 4)).astype(np.float32)
            mask = np.ones((1, past.shape[1] + rows), np.int64)
            plain = sm.run({"x": x, "past": past, "mask": mask})
            got = sm.run({"x": x, "mask": mask}, state=state)
            check(sorted(got) == ["new_positions", "y"], f"{path}: a stateful run returns {sorted(got)}")
            check(same(got, {k: v for k, v in plain.items() if k != "present"}), f"{path}: stateful step {step}")
            past = plain["present"]
        try:
            sm.run({"x": x, "past": past, "mask": mask}, state=state)
            check(False, "a state input given to a stateful run was accepted")
        except kiln.KilnError as e:
            check("is a state" in str(e), str(e))
        state.reset()
        again = sm.run({"x": np.zeros((1, 2, 4), np.float32), "mask": np.ones((1, 2), np.int64)}, state=state)
        check(again["y"].shape == (1, 2, 4), f"{path}: after reset the past is empty")
        state.close()
identity = os.path.join(SCRATCH, "identity.kiln")
kiln.convert(os.path.join(ROOT, "Tests", "Fixtures", "onnx", "models", "identity_chain.onnx"), identity)
kiln.compile(identity, os.path.join(SCRATCH, "identity"), arch="host")
for path in (identity, os.path.join(SCRATCH, "identity")):
    values = np.arange(6, dtype=np.float32).reshape(2, 3)
    with kiln.load(path) as im:
        x = values.copy()
        out = im.run({"x": x})
        x[:] = 99
        del x
        negated = out["y"]
        check(out["same"].tolist() == values.tolist(), f"{path}: an output that is an input is a copy")
        # Each output holds only its own buffer (a kept row of logits does not keep a cache alive).
        owners = {id(a.base.owner) for a in out.values()}
        check(len(owners) == len(out), f"{path}: each output has its own owner")
        del out
        gc.collect()
    check(negated.tolist() == (-values).tolist() and negated.flags.c_contiguous, f"{path}: outputs outlive the run and the model")
    negated += 1
    check(negated.tolist() == (1 - values).tolist(), f"{path}: outputs are writable")
info = kiln.inspect(os.path.join(compiled, f"TinyClassifier.{kiln.host_architecture()}.compiled"))
check(info["name"] == "TinyClassifier", list(info))

# Errors raise KilnError naming the problem.
def raises(fn, *needles):
    try:
        fn()
    except kiln.KilnError as e:
        check(all(n in str(e) for n in needles), f"{needles} not in: {e}")
        return
    check(False, f"no KilnError for {needles}")

raises(lambda: kiln.load(os.path.join(SCRATCH, "missing.kiln")), "missing.kiln")
raises(lambda: m.run({"feature": features}), "feature")
raises(lambda: m.run({"features": features.astype(np.float64)}), "features", "float64")
raises(lambda: m.run({"features": features.astype(np.complex64)}), "complex64")
raises(lambda: m.run({}), "missing input 'features'")
raises(lambda: m.run({"features": features}, function="nope"), "nope")
raises(lambda: kiln.load(example, threads=0), "threads")
raises(lambda: kiln.compile(os.path.join(SCRATCH, "none.kiln"), compiled), "none.kiln")

# Runs from several threads agree with one thread's.
batches = [np.random.default_rng(i).standard_normal((3, 64)).astype(np.float32) for i in range(8)]
serial = [m.run({"features": b}) for b in batches]
results = {}
def worker(t):
    for r in range(5):
        i = (t + r) % len(batches)
        results[(t, r)] = same(m.run({"features": batches[i]}), serial[i])
threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
check(len(results) == 20 and all(results.values()), "threaded runs")
m.close()
raises(lambda: m.run({"features": features}), "closed")

# A shared model: converted, compiled, run against the command line on the same input.
d = models_dir()
if d:
    package = os.path.join(SCRATCH, "mobilenet.kiln")
    kiln.convert(os.path.join(d, "mobilenetv3_orientation.onnx"), package)
    kiln.compile(package, os.path.join(SCRATCH, "mobilenet"), arch="host")
    net = kiln.load(os.path.join(SCRATCH, "mobilenet"))
    spec = net.inputs[0]
    shape = tuple(1 if not isinstance(s, int) else s for s in spec.shape)
    x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    check(same(net.run({spec.name: x}), cli_outputs(os.path.join(SCRATCH, "mobilenet"), {spec.name: x})), "shared model outputs")
    print("shared model: MobileNetV3 outputs match kiln run bit for bit")
else:
    print("shared model: skipped (no mobilenetv3_orientation.onnx in KILN_TEST_MODELS, ../shared/models or .build/models)")
print(f"python: {checks} checks passed")
