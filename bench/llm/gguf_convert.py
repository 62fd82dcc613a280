#!/usr/bin/env python3
"""Runs llama.cpp's vendored convert_hf_to_gguf.py on one of export.py's checkpoints.

    gguf_convert.py VENDOR_LLAMA_CPP_DIR HF_DIR [convert_hf_to_gguf.py options...]

The checkpoints' tokenizer is made in code (export.py), so the converter's fingerprint of the BPE
pre-tokenizer (a hash of how the tokenizer splits a test text) matches none it knows, and it would
stop. The benchmark feeds token ids and never tokenizes text, so the fingerprint is answered here
with "gpt-2" (byte-level, as the made tokenizer is); everything else is the converter's own work.
"""
import os
import runpy
import sys


def main():
    vendor, rest = sys.argv[1], sys.argv[2:]
    sys.path.insert(0, os.path.join(vendor, "gguf-py"))
    sys.path.insert(0, vendor)
    import conversion.base as base

    base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "gpt-2"
    sys.argv = [os.path.join(vendor, "convert_hf_to_gguf.py")] + rest
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
