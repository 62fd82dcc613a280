"""The zoo's pinned Python environment (.build/zoo-venv) and its paths.

Every zoo script calls ensure() first: when the running Python is not the zoo venv, the venv is
made (once), the pinned packages are installed in it, and the script re-runs itself there.
"""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ZOO = os.path.join(ROOT, ".build", "zoo")
ARCH_DIR = os.path.join(ZOO, "arch")
WHEEL_DIR = os.path.join(ZOO, "wheels")
VENV = os.path.join(ROOT, ".build", "zoo-venv")

# torch 2.13.0 from PyPI is the build that torchvision 0.28.0's PyPI wheel links against (its
# CUDA libraries come along as dependencies and stay unused: every run here is on the CPU).
PINS = [
    "numpy==2.4.6",
    "torch==2.13.0",
    "torchvision==0.28.0",
    "timm==1.0.31",
    "transformers==5.25.0",
    "onnx==1.23.2",
    "onnxscript==0.7.2",
    "onnxruntime==1.32.0",
    "openvino==2026.4.1",
]


def _stamp():
    return os.path.join(VENV, "zoo-pins.txt")


def ensure():
    """Re-runs the calling script in the zoo venv, making it and installing PINS when needed."""
    python = os.path.join(VENV, "bin", "python")
    wanted = "\n".join(PINS) + "\n"
    inside = os.path.abspath(sys.prefix) == os.path.abspath(VENV)
    current = open(_stamp()).read() if os.path.exists(_stamp()) else None
    if inside and current == wanted:
        return
    if not os.path.exists(python):
        subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
    if current != wanted:
        # PyPI alone: a local find-links directory may hold a torch build that torchvision's
        # PyPI wheel cannot load.
        env = {k: v for k, v in os.environ.items() if k != "PIP_FIND_LINKS"}
        env["PIP_CONFIG_FILE"] = os.devnull
        subprocess.run([python, "-m", "pip", "install", "-q"] + PINS, check=True, env=env)
        with open(_stamp(), "w") as f:
            f.write(wanted)
    if inside:
        return
    os.execv(python, [python] + sys.argv)
