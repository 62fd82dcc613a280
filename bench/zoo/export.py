#!/usr/bin/env python3
"""Exports the zoo's architectures to ONNX with seeded random weights (no weight downloads).

    python3 bench/zoo/export.py [--only NAME ...] [--force] [--list] [--ignore-unknown]

Each architecture NAME is built from torchvision, timm or transformers (pretrained=False /
from a config object) or written here with torch.nn, under torch.manual_seed, and exported with
the TorchScript exporter (dynamo=False) or the dynamo exporter (dynamo=True) to
.build/zoo/arch/NAME.onnx, beside NAME.inputs/INPUT.npy (one seeded array per graph input) and
NAME.json (source, exporter, inputs, dynamic axes, export time or the export's error).
BatchNorm statistics are calibrated on seeded random batches (otherwise a deep random network's
outputs shrink towards zero). Models already exported are kept unless --force. Deterministic: the same versions write the same
weights and inputs.
"""
import argparse
import json
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zooenv  # noqa: E402

zooenv.ensure()

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

OPSET_TS = 17
OPSET_DYNAMO = 18
SEED = 0


# ---- inputs -------------------------------------------------------------------------------

def image(h=224, w=224, c=3):
    return torch.randn(1, c, h, w, generator=torch.Generator().manual_seed(SEED + 1))


def tokens(vocab, seq=128, pad=16):
    """Token ids in range and an attention mask whose last `pad` positions are padding."""
    g = torch.Generator().manual_seed(SEED + 2)
    ids = torch.randint(0, vocab, (1, seq), generator=g, dtype=torch.int64)
    mask = torch.ones(1, seq, dtype=torch.int64)
    if pad:
        mask[:, seq - pad:] = 0
    return ids, mask


def audio(samples=16000, channels=None):
    g = torch.Generator().manual_seed(SEED + 3)
    shape = (1, samples) if channels is None else (1, channels, samples)
    return torch.randn(*shape, generator=g) * 0.1


# ---- models written here with torch.nn ------------------------------------------------------

class TCN(nn.Module):
    """A temporal convolutional network: causal dilated 1-D convolutions in residual blocks."""

    def __init__(self, channels=64, levels=6, kernel=3, classes=10):
        super().__init__()
        self.inp = nn.Conv1d(1, channels, 1)
        self.blocks = nn.ModuleList()
        for i in range(levels):
            d = 2 ** i
            self.blocks.append(nn.ModuleDict({
                "pad": nn.ConstantPad1d(((kernel - 1) * d, 0), 0.0),
                "c1": nn.Conv1d(channels, channels, kernel, dilation=d),
                "c2": nn.Conv1d(channels, channels, 1),
            }))
        self.head = nn.Linear(channels, classes)

    def forward(self, x):
        h = self.inp(x)
        for b in self.blocks:
            y = torch.relu(b["c1"](b["pad"](h)))
            h = torch.relu(h + b["c2"](y))
        return self.head(h.mean(dim=2))


class UNet1D(nn.Module):
    """A small 1-D U-Net on raw audio: strided convs down, transposed convs up, skip concats."""

    def __init__(self, base=16, depth=4):
        super().__init__()
        self.down = nn.ModuleList()
        self.up = nn.ModuleList()
        ch = [1] + [base * 2 ** i for i in range(depth)]
        for i in range(depth):
            self.down.append(nn.Sequential(nn.Conv1d(ch[i], ch[i + 1], 8, stride=4, padding=2), nn.BatchNorm1d(ch[i + 1]), nn.ReLU(),
                                           nn.Conv1d(ch[i + 1], ch[i + 1], 3, padding=1), nn.ReLU()))
        for i in reversed(range(depth)):
            self.up.append(nn.Sequential(nn.Conv1d(ch[i + 1] * (1 if i == depth - 1 else 2), ch[i + 1], 3, padding=1), nn.ReLU(),
                                         nn.ConvTranspose1d(ch[i + 1], ch[i] if i else base, 8, stride=4, padding=2)))
        self.out = nn.Conv1d(base, 1, 1)

    def forward(self, x):
        skips = []
        for d in self.down:
            x = d(x)
            skips.append(x)
        skips.pop()
        for j, u in enumerate(self.up):
            x = u(x)
            if skips:
                x = torch.cat([x, skips.pop()], dim=1)
        return torch.tanh(self.out(x))


class ConvFeatureExtractor(nn.Module):
    """A wav2vec 2.0-style feature encoder: seven strided 1-D convs with GroupNorm and GELU,
    then LayerNorm and a projection."""

    def __init__(self, dim=256, out=256):
        super().__init__()
        spec = [(10, 5)] + [(3, 2)] * 4 + [(2, 2)] * 2
        layers, cin = [], 1
        for i, (k, s) in enumerate(spec):
            layers.append(nn.Conv1d(cin, dim, k, stride=s, bias=False))
            if i == 0:
                layers.append(nn.GroupNorm(dim, dim))
            layers.append(nn.GELU())
            cin = dim
        self.conv = nn.Sequential(*layers)
        self.norm = nn.LayerNorm(dim)
        self.proj = nn.Linear(dim, out)

    def forward(self, wav):
        h = self.conv(wav.unsqueeze(1)).transpose(1, 2)
        return self.proj(self.norm(h))


class Tagger(nn.Module):
    """A sequence tagger: embedding, a bidirectional LSTM or GRU, a linear layer per token."""

    def __init__(self, cell, vocab=5000, emb=128, hidden=128, layers=2, tags=17):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb)
        rnn = nn.LSTM if cell == "lstm" else nn.GRU
        self.rnn = rnn(emb, hidden, num_layers=layers, bidirectional=True, batch_first=True)
        self.out = nn.Linear(2 * hidden, tags)

    def forward(self, ids):
        h, _ = self.rnn(self.emb(ids))
        return self.out(h)


class CRNN(nn.Module):
    """A text-line recognizer: a conv stack over a 32-pixel-high image, then a bidirectional LSTM."""

    def __init__(self, classes=80):
        super().__init__()
        def block(i, o, pool):
            return [nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU()] + ([nn.MaxPool2d(pool)] if pool else [])
        self.cnn = nn.Sequential(*block(1, 32, (2, 2)), *block(32, 64, (2, 2)), *block(64, 128, (2, 1)), *block(128, 128, (2, 1)),
                                 *block(128, 128, (2, 1)))
        self.rnn = nn.LSTM(128, 96, bidirectional=True, batch_first=True)
        self.out = nn.Linear(192, classes)

    def forward(self, x):
        f = self.cnn(x).squeeze(2).transpose(1, 2)
        h, _ = self.rnn(f)
        return self.out(h).log_softmax(-1)


class HFWrap(nn.Module):
    """A transformers model returning a tuple of tensors (the exporters want tensors, not ModelOutput)."""

    def __init__(self, model, keys):
        super().__init__()
        self.model = model
        self.keys = keys

    def forward(self, *args):
        out = self.model(**dict(zip(self.keys, args)))
        return out[0]


class DetectionBackbone(nn.Module):
    """A detection backbone with its feature pyramid (torchvision's resnet_fpn_backbone), returning every level."""

    def __init__(self, arch):
        super().__init__()
        from torchvision.models.detection.backbone_utils import resnet_fpn_backbone
        self.body = resnet_fpn_backbone(backbone_name=arch, weights=None, trainable_layers=5)

    def forward(self, x):
        return tuple(self.body(x).values())


# ---- the zoo --------------------------------------------------------------------------------

def tv(name, **kw):
    import torchvision
    return lambda: getattr(torchvision.models, name)(weights=None, **kw)


def tv_seg(name, **kw):
    import torchvision
    return lambda: getattr(torchvision.models.segmentation, name)(weights=None, weights_backbone=None, **kw)


def tv_det(name, **kw):
    import torchvision
    return lambda: getattr(torchvision.models.detection, name)(weights=None, weights_backbone=None, **kw)


def tm(name, **kw):
    import timm
    return lambda: timm.create_model(name, pretrained=False, **kw)


def hf(kind, **cfg):
    """A transformers model from a small config object (random init)."""
    def build():
        import transformers
        config = getattr(transformers, kind + "Config")(**cfg)
        cls = {"T5": "T5EncoderModel", "Whisper": "WhisperModel"}.get(kind, kind + "Model")
        model = getattr(transformers, cls).from_config(config) if hasattr(getattr(transformers, cls), "from_config") \
            else getattr(transformers, cls)(config)
        if kind == "Whisper":
            model = model.get_encoder()
        return model
    return build


SMALL = dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024)
BERT_INPUTS = ("input_ids", "attention_mask")
SEQ_DYNAMIC = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}}

# name -> (source, exporter, builder, inputs builder -> {name: tensor}, dynamic axes or None, notes)
ZOO = {}


def add(name, source, exporter, build, inputs, dynamic=None, note="", wrap=None):
    ZOO[name] = dict(source=source, exporter=exporter, build=build, inputs=inputs, dynamic=dynamic, note=note, wrap=wrap)


IMG = lambda h=224, w=224: (lambda: {"input": image(h, w)})  # noqa: E731

# torchvision classification
add("resnet18", "torchvision", "torchscript", tv("resnet18"), IMG())
add("resnet50", "torchvision", "dynamo", tv("resnet50"), IMG())
add("resnext50_32x4d", "torchvision", "torchscript", tv("resnext50_32x4d"), IMG())
add("mobilenet_v2", "torchvision", "torchscript", tv("mobilenet_v2"), IMG())
add("mobilenet_v3_large", "torchvision", "dynamo", tv("mobilenet_v3_large"), IMG())
add("mobilenet_v3_small", "torchvision", "torchscript", tv("mobilenet_v3_small"), IMG())
add("efficientnet_b0", "torchvision", "torchscript", tv("efficientnet_b0"), IMG())
add("efficientnet_v2_s", "torchvision", "dynamo", tv("efficientnet_v2_s"), IMG())
add("regnet_y_400mf", "torchvision", "torchscript", tv("regnet_y_400mf"), IMG())
add("regnet_x_800mf", "torchvision", "dynamo", tv("regnet_x_800mf"), IMG())
add("densenet121", "torchvision", "torchscript", tv("densenet121"), IMG())
add("convnext_tiny", "torchvision", "dynamo", tv("convnext_tiny"), IMG())
add("shufflenet_v2_x1_0", "torchvision", "torchscript", tv("shufflenet_v2_x1_0"), IMG())
add("squeezenet1_1", "torchvision", "torchscript", tv("squeezenet1_1"), IMG())
add("mnasnet1_0", "torchvision", "dynamo", tv("mnasnet1_0"), IMG())
add("googlenet", "torchvision", "torchscript", tv("googlenet", aux_logits=False, init_weights=True), IMG())
add("inception_v3", "torchvision", "torchscript", tv("inception_v3", aux_logits=False, init_weights=True), IMG(299, 299))
add("vgg11_bn", "torchvision", "torchscript", tv("vgg11_bn"), IMG())
add("swin_t", "torchvision", "torchscript", tv("swin_t"), IMG())
add("vit_b_16", "torchvision", "dynamo", tv("vit_b_16"), IMG())
# torchvision segmentation and detection
add("deeplabv3_resnet50", "torchvision", "torchscript", tv_seg("deeplabv3_resnet50", aux_loss=False), IMG(160, 160),
    note="dilated ResNet-50 (output stride 8) at 160x160")
add("deeplabv3_mobilenet_v3_large", "torchvision", "dynamo", tv_seg("deeplabv3_mobilenet_v3_large", aux_loss=False), IMG())
add("fcn_resnet50", "torchvision", "torchscript", tv_seg("fcn_resnet50", aux_loss=False), IMG(160, 160), note="160x160 input")
add("lraspp_mobilenet_v3_large", "torchvision", "torchscript", tv_seg("lraspp_mobilenet_v3_large"), IMG())
add("resnet18_fpn", "torchvision", "torchscript", lambda: DetectionBackbone("resnet18"), IMG(320, 320),
    note="detection backbone + FPN (torchvision resnet_fpn_backbone), 5 levels")
add("ssdlite320_mobilenet_v3_large", "torchvision", "torchscript", tv_det("ssdlite320_mobilenet_v3_large"), IMG(320, 320),
    note="full detector with postprocessing (NMS, TopK); box outputs compared as sets")
# timm
add("vit_tiny_patch16_224", "timm", "torchscript", tm("vit_tiny_patch16_224"), IMG())
add("deit_tiny_distilled", "timm", "dynamo", tm("deit_tiny_distilled_patch16_224"), IMG())
add("mobilevit_xxs", "timm", "torchscript", tm("mobilevit_xxs"), IMG(256, 256))
add("levit_128s", "timm", "torchscript", tm("levit_128s"), IMG())
add("poolformer_s12", "timm", "dynamo", tm("poolformer_s12"), IMG())
add("ghostnet_100", "timm", "torchscript", tm("ghostnet_100"), IMG())
add("efficientvit_b0", "timm", "torchscript", tm("efficientvit_b0"), IMG())
add("fastvit_t8", "timm", "dynamo", tm("fastvit_t8"), IMG())
add("repvgg_a0", "timm", "torchscript", tm("repvgg_a0"), IMG())
add("pvt_v2_b0", "timm", "torchscript", tm("pvt_v2_b0"), IMG())
add("edgenext_xx_small", "timm", "dynamo", tm("edgenext_xx_small"), IMG(256, 256))
add("mixer_s16_224", "timm", "torchscript", tm("mixer_s16_224"), IMG())
add("hrnet_w18_small", "timm", "torchscript", tm("hrnet_w18_small"), IMG())
add("mobilenetv4_conv_small", "timm", "dynamo", tm("mobilenetv4_conv_small"), IMG())
add("convnextv2_atto", "timm", "torchscript", tm("convnextv2_atto"), IMG())
add("dla34", "timm", "torchscript", tm("dla34"), IMG())
add("rexnet_100", "timm", "dynamo", tm("rexnet_100"), IMG())
add("xcit_nano_12_p16", "timm", "torchscript", tm("xcit_nano_12_p16_224"), IMG())
add("efficientformerv2_s0", "timm", "torchscript", tm("efficientformerv2_s0"), IMG())
# transformers (small configs, random init)
BERT_TOKENS = lambda vocab: (lambda: dict(zip(BERT_INPUTS, tokens(vocab))))  # noqa: E731
add("bert_l4_h256", "transformers", "torchscript", hf("Bert", vocab_size=30522, **SMALL), BERT_TOKENS(30522), SEQ_DYNAMIC,
    note="batch and sequence dims dynamic", wrap=BERT_INPUTS)
add("distilbert_l4_h256", "transformers", "dynamo", hf("DistilBert", vocab_size=30522, dim=256, n_layers=4, n_heads=4, hidden_dim=1024),
    BERT_TOKENS(30522), SEQ_DYNAMIC, note="batch and sequence dims dynamic", wrap=BERT_INPUTS)
add("roberta_l4_h256", "transformers", "torchscript", hf("Roberta", vocab_size=50265, max_position_embeddings=514, **SMALL),
    BERT_TOKENS(50265), wrap=BERT_INPUTS)
add("albert_l4_h256", "transformers", "dynamo", hf("Albert", vocab_size=30000, embedding_size=128, **SMALL), BERT_TOKENS(30000),
    wrap=BERT_INPUTS)
add("t5_encoder_l4_d256", "transformers", "torchscript",
    hf("T5", vocab_size=32128, d_model=256, d_kv=64, d_ff=1024, num_layers=4, num_heads=4), BERT_TOKENS(32128), SEQ_DYNAMIC,
    note="T5EncoderModel; relative position buckets; dynamic batch/sequence", wrap=BERT_INPUTS)
add("gpt2_l4_h256", "transformers", "torchscript", hf("GPT2", vocab_size=50257, n_embd=256, n_layer=4, n_head=4, n_positions=512),
    BERT_TOKENS(50257), SEQ_DYNAMIC, note="causal mask; dynamic batch/sequence", wrap=BERT_INPUTS)
add("llama_l4_h256", "transformers", "dynamo",
    hf("Llama", vocab_size=32000, hidden_size=256, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
       intermediate_size=688, max_position_embeddings=512), BERT_TOKENS(32000),
    note="rotary embeddings, RMSNorm, grouped-query attention, SiLU-gated MLP", wrap=BERT_INPUTS)
add("whisper_encoder_l4_d256", "transformers", "torchscript",
    hf("Whisper", d_model=256, encoder_layers=4, encoder_attention_heads=4, encoder_ffn_dim=1024, decoder_layers=1,
       decoder_attention_heads=4, decoder_ffn_dim=256, num_mel_bins=80, max_source_positions=750),
    lambda: {"input_features": torch.randn(1, 80, 1500, generator=torch.Generator().manual_seed(SEED + 4))},
    note="WhisperEncoder, 80 mel bins x 1500 frames (15 s)", wrap=("input_features",))
add("wav2vec2_l4_h256", "transformers", "torchscript",
    hf("Wav2Vec2", hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024,
       conv_dim=(128,) * 7, num_conv_pos_embeddings=64, num_conv_pos_embedding_groups=16),
    lambda: {"input_values": audio(16000)}, note="conv feature encoder + positional conv + transformer; 1 s of 16 kHz audio",
    wrap=("input_values",))
add("deberta_v2_l4_h256", "transformers", "dynamo", hf("DebertaV2", vocab_size=32000, **SMALL), BERT_TOKENS(32000),
    note="disentangled attention (relative positions)", wrap=BERT_INPUTS)
# written here with torch.nn
add("tcn", "custom", "torchscript", lambda: TCN(), lambda: {"audio": audio(16000, channels=1)}, note="causal dilated 1-D convs")
add("unet1d", "custom", "dynamo", lambda: UNet1D(), lambda: {"audio": audio(16384, channels=1)}, note="1-D U-Net, ConvTranspose1d")
add("conv_feature_extractor", "custom", "torchscript", lambda: ConvFeatureExtractor(), lambda: {"audio": audio(16000)},
    note="wav2vec2-style strided conv stack, GroupNorm, GELU")
add("bilstm_tagger", "custom", "torchscript", lambda: Tagger("lstm"),
    lambda: {"ids": torch.randint(0, 5000, (1, 64), generator=torch.Generator().manual_seed(SEED + 5))}, note="2-layer bidirectional LSTM")
add("bigru_tagger", "custom", "dynamo", lambda: Tagger("gru"),
    lambda: {"ids": torch.randint(0, 5000, (1, 64), generator=torch.Generator().manual_seed(SEED + 5))}, note="2-layer bidirectional GRU")
add("crnn", "custom", "torchscript", lambda: CRNN(), lambda: {"image": image(32, 256, c=1)}, note="conv stack + BiLSTM text recognizer")


def revive_zero_weights(model):
    """Gives random values to weight matrices a model initializes to zero (classifier heads, some
    residual branches): with them zero an output would be constant and its comparison meaningless."""
    g = torch.Generator().manual_seed(SEED + 7)
    names = []
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim >= 2 and not p.any():
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)
                names.append(name)
    return names


def calibrate_batchnorm(model, inputs):
    """Sets the running statistics of every BatchNorm from a few seeded random batches shaped like
    the inputs (train-mode forward passes, cumulative averages): with the freshly initialized
    statistics (mean 0, variance 1) a deep random network's activations shrink layer by layer
    until the outputs are ~1e-9, which tests little. Returns whether it ran."""
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not norms or any(not torch.is_floating_point(t) for t in inputs.values()):
        return False
    g = torch.Generator().manual_seed(SEED + 11)
    for m in norms:
        m.reset_running_stats()
        m.momentum = None
    model.train()
    try:
        with torch.no_grad():
            for _ in range(4):
                model(*[torch.randn((4,) + tuple(t.shape[1:]), generator=g) * t.std() + t.mean() for t in inputs.values()])
    except Exception:
        return False  # e.g. a detector that wants targets in train mode
    finally:
        for m in norms:
            m.momentum = 0.1
        model.eval()
    return True


def export(name, spec, out_dir):
    torch.manual_seed(SEED)
    model = spec["build"]().eval()
    revived = revive_zero_weights(model)
    if spec["wrap"]:
        model = HFWrap(model, spec["wrap"]).eval()
    inputs = spec["inputs"]()
    calibrated = calibrate_batchnorm(model, inputs)
    names = list(inputs)
    args = tuple(inputs[n] for n in names)
    path = os.path.join(out_dir, f"{name}.onnx")
    with torch.no_grad():
        outs = model(*args)
    outs = outs if isinstance(outs, (tuple, list)) else (outs,)
    if isinstance(outs[0], dict):  # torchvision detectors return a list of dicts
        outs = tuple(outs[0].values())
    output_names = [f"output{i}" for i in range(len(outs))] if len(outs) > 1 else ["output"]
    dynamic = spec["dynamic"]
    tmp = path + ".part"
    if spec["exporter"] == "torchscript":
        torch.onnx.export(model, args, tmp, dynamo=False, opset_version=OPSET_TS, input_names=names, output_names=output_names,
                          dynamic_axes=dynamic, do_constant_folding=True)
    else:
        shapes = None
        if dynamic:
            dims = {}
            for axes in dynamic.values():
                for sym in axes.values():
                    dims.setdefault(sym, torch.export.Dim(sym, min=1, max=64 if sym == "batch" else 4096))
            shapes = tuple({axis: dims[sym] for axis, sym in dynamic[n].items()} if n in dynamic else None for n in names)
            if spec["wrap"]:  # HFWrap.forward(*args): one parameter holding every input
                shapes = (shapes,)
        program = torch.onnx.export(model, args, dynamo=True, opset_version=OPSET_DYNAMO, input_names=names, output_names=output_names,
                                    dynamic_shapes=shapes, external_data=False, optimize=True)
        program.save(tmp, external_data=False)
    os.replace(tmp, path)
    in_dir = os.path.join(out_dir, f"{name}.inputs")
    os.makedirs(in_dir, exist_ok=True)
    files = {}
    for n in names:
        np.save(os.path.join(in_dir, f"{n}.npy"), inputs[n].numpy())
        files[n] = f"{name}.inputs/{n}.npy"
    return path, files, revived, calibrated


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*", default=[], metavar="NAME")
    ap.add_argument("--force", action="store_true", help="export again even when NAME.onnx exists")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--ignore-unknown", action="store_true", help="skip --only names that are not architectures (run.py passes wheel names too)")
    args = ap.parse_args()
    if args.list:
        for name, s in ZOO.items():
            print(f"{name:<32} {s['source']:<13} {s['exporter']}")
        return
    unknown = [n for n in args.only if n not in ZOO]
    if unknown and not args.ignore_unknown:
        raise SystemExit(f"unknown architectures: {', '.join(unknown)} (see --list)")
    os.makedirs(zooenv.ARCH_DIR, exist_ok=True)
    with open(os.path.join(zooenv.ARCH_DIR, "order.json"), "w") as f:
        json.dump(list(ZOO), f)
    torch.set_num_threads(2)
    for name, spec in ZOO.items():
        if args.only and name not in args.only:
            continue
        meta_path = os.path.join(zooenv.ARCH_DIR, f"{name}.json")
        if not args.force and os.path.exists(meta_path) and os.path.exists(os.path.join(zooenv.ARCH_DIR, f"{name}.onnx")):
            continue
        meta = {"name": name, "source": spec["source"], "exporter": spec["exporter"], "note": spec["note"],
                "opset": OPSET_TS if spec["exporter"] == "torchscript" else OPSET_DYNAMO, "dynamic": spec["dynamic"],
                "versions": {"torch": torch.__version__}}
        started = time.time()
        try:
            path, files, revived, calibrated = export(name, spec, zooenv.ARCH_DIR)
            meta.update(onnx=os.path.basename(path), inputs=files, error=None, zeroWeightsGivenValues=revived,
                        batchnormCalibrated=calibrated)
            print(f"{name}: exported in {time.time() - started:.0f} s")
        except Exception as e:  # a model that will not export is a row of its own
            meta.update(onnx=None, inputs={}, error=f"{type(e).__name__}: {e}".splitlines()[0][:500])
            traceback.print_exc(limit=3)
            print(f"{name}: export failed: {meta['error']}")
        meta["exportSeconds"] = round(time.time() - started, 1)
        with open(meta_path, "w") as f:
            json.dump(meta, f, indent=1)


if __name__ == "__main__":
    main()
