"""Which Pillow this process imports, and its version: Pillow, or Pillow-SIMD (a drop-in fork
with SIMD kernels for resizing, filters and colour conversion, built from source in its place:
SETUP_EXTRAS=pillow-simd, docs/cpu-augment.md). The bench's loader rows, the bench profile and
the set-up name it."""
from __future__ import annotations

from importlib import metadata

SIMD = "Pillow-SIMD"


def pillow_build() -> str:
    """"Pillow 13.0.0" or "Pillow-SIMD 12.1.1.post0". Both install the package PIL, so the one
    that imports is the distribution whose version is PIL's (a Pillow installed over Pillow-SIMD
    leaves Pillow-SIMD's record behind)."""
    import PIL
    try:
        if metadata.version("pillow-simd") == PIL.__version__:
            return f"{SIMD} {PIL.__version__}"
    except metadata.PackageNotFoundError:
        pass
    return f"Pillow {PIL.__version__}"
