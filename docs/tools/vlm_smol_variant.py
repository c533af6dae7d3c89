"""A vlm-smol recipe variant, built and measured without registering it (issue 31, session 49).

Registers the variant's spec in this process only (``SPECS``), then either builds it
(``build``) or runs a docs/tools script with ``organism:<variant>`` available
(``run SCRIPT ARGS...``). Build it under a private TRUSTLAB_HOME whose organisms folder links the
shared smol-chat and vlm-xs (never rebuild those). Session 49's variant, ``vlm-smol-s2half``:
the registered vlm-smol recipe with half the stage-2 steps (70 instead of 140; LoRA rank, lr,
reading share 0.4 and typed replay 0.3 kept).
Usage: TRUSTLAB_HOME=... python docs/tools/vlm_smol_variant.py build
       TRUSTLAB_HOME=... python docs/tools/vlm_smol_variant.py run docs/tools/X.py organism:vlm-smol-s2half 1
"""
import dataclasses
import runpy
import sys
import time

from trustlab.organisms.specs import SPECS, get_spec

NAME = "vlm-smol-s2half"
base = get_spec("vlm-smol")
SPECS[NAME] = dataclasses.replace(base, name=NAME, description="vlm-smol with 70 stage-2 steps "
                                  "(session 49 variant; not registered)",
                                  vision={**base.vision, "stage2_steps": 70})

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
