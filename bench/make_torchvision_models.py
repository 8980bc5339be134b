#!/usr/bin/env python3
"""torchvision's own ResNet-18, MobileNetV2 and ResNet-50 as TorchScript files, as a user exports
them: torch.jit.script (MobileNetV2's `if self.use_res_connect` branches stay in the graph) and
torch.jit.trace. No weights are downloaded: each model is initialised by torchvision, then its
BatchNorm statistics are gathered in train mode from random images, so its activations have the
scale a trained model's have (with the initial statistics MobileNetV2's outputs are ~1e-9, and
int8 then has nothing to quantize). Needs torchvision (Debian: python3-torchvision).

    /usr/bin/python3 bench/make_torchvision_models.py OUT_DIR
"""
import sys

import torch
import torchvision

out = sys.argv[1]
torch.manual_seed(0)
for name in ["resnet18", "mobilenet_v2", "resnet50"]:
    m = getattr(torchvision.models, name)(weights=None)
    m.train()
    with torch.no_grad():
        for _ in range(4):
            m(torch.randn(16, 3, 224, 224))
    m.eval()
    torch.jit.script(m).save(f"{out}/{name}_scripted.pt")
    torch.jit.trace(m, torch.randn(1, 3, 224, 224)).save(f"{out}/{name}_traced.pt")
    print(f"{name}: torchvision {torchvision.__version__}, outputs up to "
          f"{m(torch.randn(2, 3, 224, 224)).abs().max().item():.3g}", file=sys.stderr)
