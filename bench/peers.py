"""The peers a bench compares against, at pinned versions, in a venv of their own."""
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def ensure(venv_name, packages, module, version):
    """Returns when the running Python has `module` at `version`; otherwise makes (once) the venv
    .build/VENV_NAME, installs `packages` there and re-runs the calling script in it."""
    try:
        found = __import__(module)
        # OpenVINO's version carries a build suffix (2026.4.1-22982-…).
        if found.__version__.split("-")[0] == version:
            return
    except ImportError:
        pass
    venv = os.path.join(ROOT, ".build", venv_name)
    python = os.path.join(venv, "bin", "python")
    if os.path.abspath(sys.executable) == os.path.abspath(python):
        raise SystemExit(f"error: the bench venv lacks {module} {version}; remove .build/{venv_name} and run again")
    if not os.path.exists(python):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    subprocess.run([python, "-m", "pip", "install", "-q"] + packages, check=True)
    os.execv(python, [python] + sys.argv)
