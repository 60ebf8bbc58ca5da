"""Which Pillow the harness runs (Pillow, or Pillow-SIMD built in its place by
SETUP_EXTRAS=pillow-simd scripts/bootstrap.sh), and Pillow-SIMD serving torchvision and the
torchvision loader where it is installed. CI's set-up does not build it (minutes): there the
Pillow-SIMD test skips and says so."""
from __future__ import annotations

import io
from importlib import metadata

import numpy as np
import PIL
import pytest
from PIL import Image

from submission.data.pillow_build import SIMD, pillow_build
from submission.data.synthetic_images import FolderShape, picture

SIMD_INSTALLED = pillow_build().startswith(SIMD)


def test_the_pillow_that_imports_is_named_with_its_version():
    name, version = pillow_build().split()
    assert name in ("Pillow", SIMD) and version == PIL.__version__
    distribution = "pillow-simd" if name == SIMD else "pillow"
    assert metadata.version(distribution) == PIL.__version__


@pytest.mark.skipif(not SIMD_INSTALLED, reason=(
    f"Pillow-SIMD is not installed here ({pillow_build()}): `SETUP_EXTRAS=pillow-simd "
    "scripts/bootstrap.sh` builds it in place of Pillow, which takes minutes, so CI's set-up does not"))
def test_pillow_simd_serves_torchvision_and_the_torchvision_loaders_transforms():
    from submission.loaders.torchvision_loader import image_transform
    from submission.methods.randaugment import RandAugment
    from submission.methods.trivialaugment import TrivialAugment

    photo = picture(1, 3, "train", FolderShape(classes=4, train_per_class=1, val_per_class=1, sides=(300, 400)))
    stored = io.BytesIO()
    photo.save(stored, "JPEG", quality=90)
    decoded = Image.open(io.BytesIO(stored.getvalue())).convert("RGB")
    assert decoded.size == photo.size and abs(np.asarray(decoded).mean() - np.asarray(photo).mean()) < 2
    np.random.seed(0)
    for augment in (None, RandAugment(10, 1, "all"), TrivialAugment("wide")):
        out = image_transform(176, 0.08, augment)(decoded)
        assert tuple(out.shape) == (3, 176, 176)
    # a resize of a whole image with Pillow-SIMD's kernels lands within a level or two of the
    # exact antialiased result's mean
    small = np.asarray(photo.resize((100, 75), Image.Resampling.BILINEAR)).astype(float)
    assert abs(small.mean() - np.asarray(photo).astype(float).mean()) < 2
