"""The LLM benchmark's Python environment (.build/llm-venv) and its paths.

export.py and run.py call ensure() first: when the running Python is not the venv, the venv is made
(once), the pinned packages are installed in it, and the script re-runs itself there. llama.cpp's
Python binding is not pinned here: run.py builds it from its sdist on first use (ensure_llamacpp),
and a failed build is a line of the report, not the end of the run.
"""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LLM = os.path.join(ROOT, ".build", "llm")
VENV = os.path.join(ROOT, ".build", "llm-venv")
PYTHON = os.path.join(VENV, "bin", "python")

# optimum-onnx 0.1.0 supports transformers below 4.58. torch 2.13.0: the CPU build where the pip
# here finds one (a find-links directory), else PyPI's.
PINS = [
    "numpy==2.4.6",
    "torch==2.13.0",
    "transformers==4.57.6",
    "tokenizers==0.22.2",
    "optimum==2.1.0",
    "optimum-onnx==0.1.0",
    "onnx==1.23.2",
    "onnxruntime==1.32.0",
]
LLAMACPP = "llama-cpp-python"
# llama.cpp's convert_hf_to_gguf.py imports sentencepiece on its way to the byte-level BPE vocabulary.
LLAMACPP_CONVERT = ["sentencepiece==0.2.3"]


def _stamp():
    return os.path.join(VENV, "llm-pins.txt")


def ensure():
    """Re-runs the calling script in the venv, making it and installing PINS when needed."""
    wanted = "\n".join(PINS) + "\n"
    inside = os.path.abspath(sys.prefix) == os.path.abspath(VENV)
    current = open(_stamp()).read() if os.path.exists(_stamp()) else None
    if inside and current == wanted:
        return
    if not os.path.exists(PYTHON):
        subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
    if current != wanted:
        subprocess.run([PYTHON, "-m", "pip", "install", "-q"] + PINS, check=True)
        with open(_stamp(), "w") as f:
            f.write(wanted)
    if inside:
        return
    os.execv(PYTHON, [PYTHON] + sys.argv)


def ensure_llamacpp(log_path):
    """None when llama_cpp imports (building llama-cpp-python from its sdist if needed), else why
    not, with the tail of pip's output (the whole of it is in log_path)."""
    probe = [PYTHON, "-c", "import llama_cpp, sentencepiece"]
    if subprocess.run(probe, capture_output=True).returncode == 0:
        return None
    with open(log_path, "w") as log:
        p = subprocess.run([PYTHON, "-m", "pip", "install", "-v", "--no-binary", LLAMACPP, LLAMACPP] + LLAMACPP_CONVERT,
                           stdout=log, stderr=subprocess.STDOUT)
    if p.returncode != 0:
        tail = open(log_path, errors="replace").read().strip().splitlines()[-15:]
        return f"pip install --no-binary {LLAMACPP} {LLAMACPP} failed (exit {p.returncode}): " + " | ".join(tail)
    r = subprocess.run(probe, capture_output=True, text=True)
    if r.returncode != 0:
        return "llama_cpp built but does not import: " + r.stderr.strip()[-800:]
    return None


def wheel_installed():
    return subprocess.run([PYTHON, "-c", "import kiln"], capture_output=True).returncode == 0
