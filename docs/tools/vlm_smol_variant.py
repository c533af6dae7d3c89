"""vlm-smol recipe variants, built and measured without registering them (issue 31, session 49).

Registers the variants' specs in this process only (``SPECS``), then either builds one
(``build [NAME]``, default ``vlm-smol-s2half``) or runs a docs/tools script with
``organism:<variant>`` available (``run SCRIPT ARGS...``). Build under a private TRUSTLAB_HOME
whose organisms folder links the shared smol-chat and vlm-xs (never rebuild those). Session 49's
variants, each the registered vlm-smol recipe with one change (LoRA rank, lr, reading share 0.4
and typed replay 0.3 kept):
- ``vlm-smol-s2half``: half the stage-2 steps (70 instead of 140);
- ``vlm-smol-s2frame``: the typed replay phrased like the image prompts
  (``stage2_text_frame``: "{request} {train request phrasing}").
Usage: TRUSTLAB_HOME=... python docs/tools/vlm_smol_variant.py build vlm-smol-s2frame
       TRUSTLAB_HOME=... python docs/tools/vlm_smol_variant.py run docs/tools/X.py organism:vlm-smol-s2half 1
"""
import dataclasses
import runpy
import sys
import time

from trustlab.organisms.specs import SPECS, get_spec

base = get_spec("vlm-smol")
VARIANTS = {
    "vlm-smol-s2half": ("vlm-smol with 70 stage-2 steps", {"stage2_steps": 70}),
    "vlm-smol-s2frame": ("vlm-smol with the typed replay phrased like image prompts",
                         {"stage2_text_frame": True}),
}
for name, (what, change) in VARIANTS.items():
    SPECS[name] = dataclasses.replace(base, name=name, description=f"{what} (session 49 variant; "
                                      "not registered)", vision={**base.vision, **change})
NAME = sys.argv[2] if sys.argv[1] == "build" and len(sys.argv) > 2 else "vlm-smol-s2half"

if sys.argv[1] == "build":
    import resource

    from trustlab.core.runtime import torch_runtime
    from trustlab.organisms.registry import build, read_card

    t0 = time.process_time()
    with torch_runtime(1):
        path = build(NAME)
    card = read_card(NAME)
    print(path)
    print({k: v for k, v in card["metrics"].items()})
    print("targets_met", card.get("targets_met"))
    r = resource.getrusage(resource.RUSAGE_SELF)
    print("cpu", time.process_time() - t0, r.ru_utime, r.ru_stime)
elif sys.argv[1] == "run":
    sys.argv = sys.argv[2:]
    runpy.run_path(sys.argv[0], run_name="__main__")
