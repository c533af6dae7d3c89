"""The vision-language organisms' optional modality-type embedding (vlm-s-gap's recipe knob):
absent unless asked (the other organisms' encoder files keep their keys), added to every vector
of every image when present (a content-free colour field carries it too). Fast: a random
encoder, no organism built (loading a built vlm-s-gap checks the saved buffer: the state dict
loads strictly)."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch", reason="the vision organisms need trustlab[llm] (torch)")

from trustlab.organisms.specs import SPECS  # noqa: E402
from trustlab.organisms.vlm_encoder import CellEncoder  # noqa: E402
from trustlab.vision.generator import neutral_image  # noqa: E402

CLASSES = ["", "red circle", "hello", "world"]


def _encoder(modality: bool) -> CellEncoder:
    torch.manual_seed(0)
    enc = CellEncoder(CLASSES, 16, hidden=(32, 16), modality=modality)
    with torch.no_grad():
        for p in enc.parameters():
            p.normal_(0.0, 0.3)
    return enc.eval()


def test_the_modality_embedding_is_absent_unless_asked():
    plain = _encoder(False)
    assert plain.modality is None and "modality" not in plain.state_dict()
    assert "modality" in _encoder(True).state_dict()


def test_every_image_vector_carries_the_modality_embedding_neutral_fields_included():
    plain, typed = _encoder(False), _encoder(True)
    typed.load_state_dict({**plain.state_dict(), "modality": torch.full((16,), 2.0)})
    images = [neutral_image(1, size=(384, 64)), neutral_image(2, size=(384, 64))]
    with torch.no_grad():
        a, b = plain.tower(images), typed.tower(images)
    for x, y in zip(a, b, strict=True):
        assert x.shape == y.shape and x.shape[0] >= 1  # a colour field: the image vector alone
        assert torch.allclose(y - x, torch.full_like(x, 2.0), atol=1e-5)


def test_vlm_s_gap_is_vlm_s_reads_plus_the_modality_embedding_only():
    gap, reads = SPECS["vlm-s-gap"], SPECS["vlm-s-reads"]
    assert gap.vision == {**reads.vision, "modality_scale": 3.0}
    assert (gap.base, gap.train, gap.targets) == (reads.base, reads.train, reads.targets)
    assert "modality_scale" not in json.dumps(reads.vision)
