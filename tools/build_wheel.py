#!/usr/bin/env python3
"""Builds the `kiln` Python wheel: python/kiln plus, in kiln/_lib, libKilnC.so, the `kiln`
command line and the Swift runtime libraries they load from the toolchain (found with ldd; the
toolchain's libraries find each other through their $ORIGIN run path). System libraries
(libc, zlib, libprotobuf-c, libcrypto, libcurl) are not bundled: the wheel is tagged
linux_x86_64 (or the machine's) for Debian-like systems that have them.

    build_wheel.py BUILD_DIR OUT_DIR
"""
import base64
import hashlib
import os
import platform
import re
import subprocess
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def version():
    text = open(os.path.join(ROOT, "Sources/KilnFormat/Compiled/CompiledArtifact.swift")).read()
    return re.search(r'compilerVersion = "([0-9.]+)"', text).group(1)


def toolchain_libraries(binaries):
    """The shared libraries the binaries load from outside the system directories."""
    found = {}
    for b in binaries:
        out = subprocess.run(["ldd", b], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            m = re.match(r"\s*(\S+) => (\S+)", line)
            if not m or m.group(2) == "not":
                continue
            path = m.group(2)
            if path.startswith(("/lib", "/usr/lib")) or os.path.dirname(path) == os.path.dirname(b):
                continue
            found[m.group(1)] = path
    return found


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def main():
    build, out = sys.argv[1], sys.argv[2]
    v = version()
    machine = platform.machine()
    tag = f"py3-none-linux_{machine}"
    files = []  # (archive name, bytes, executable)
    pkg = os.path.join(ROOT, "python", "kiln")
    for f in sorted(os.listdir(pkg)):
        if f.endswith((".py", ".typed")):
            files.append((f"kiln/{f}", open(os.path.join(pkg, f), "rb").read(), False))
    lib, exe = os.path.join(build, "libKilnC.so"), os.path.join(build, "kiln")
    files.append(("kiln/_lib/libKilnC.so", open(lib, "rb").read(), False))
    files.append(("kiln/_lib/kiln", open(exe, "rb").read(), True))
    for soname, path in sorted(toolchain_libraries([lib, exe]).items()):
        files.append((f"kiln/_lib/{soname}", open(path, "rb").read(), False))
    files.append(("kiln/include/kiln.h", open(os.path.join(ROOT, "include", "kiln.h"), "rb").read(), False))
    info = f"kiln-{v}.dist-info"
    metadata = (f"Metadata-Version: 2.1\nName: kiln\nVersion: {v}\nSummary: Kiln: load and run Kiln models from Python\n"
                f"Requires-Python: >=3.8\nRequires-Dist: numpy\nLicense: Apache-2.0\n\n"
                "Kiln's runtime (libKilnC.so) and command line, for Linux. See the project's README.\n").encode()
    wheel = f"Wheel-Version: 1.0\nGenerator: kiln build_wheel.py\nRoot-Is-Purelib: false\nTag: {tag}\n".encode()
    files.append((f"{info}/METADATA", metadata, False))
    files.append((f"{info}/WHEEL", wheel, False))
    records = [record_line(n, d) for n, d, _ in files] + [f"{info}/RECORD,,"]
    files.append((f"{info}/RECORD", ("\n".join(records) + "\n").encode(), False))
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, f"kiln-{v}-{tag}.whl")
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data, executable in files:
            zi = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            zi.compress_type = zipfile.ZIP_DEFLATED
            zi.external_attr = (0o100755 if executable else 0o100644) << 16
            z.writestr(zi, data)
    os.replace(tmp, path)
    print(path)


if __name__ == "__main__":
    main()
