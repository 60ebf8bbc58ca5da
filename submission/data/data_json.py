"""What `prepare` made: the .beton files of a configuration and the facts about them, saved
as data.json, which the training processes read (they open no image folder)."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..jsonfile import write_json


@dataclass
class PreparedData:
    train_path: str
    val_path: str
    num_classes: int
    train_samples: int
    eval_samples: int
    skipped_images: int = 0
    # random images written the same way, shaped like each split: the loaders' warm-up
    synthetic_train_path: str = ""
    synthetic_val_path: str = ""
    synthetic_samples: int = 0
    # head_sha256 of each split's .beton, taken here, where reading the data is allowed:
    # the ranks compare them before run_start without opening the files (data.fingerprint)
    train_head_sha256: str = ""
    val_head_sha256: str = ""
    # how the images were written ({setting: value}, beton_cache.write_settings): the ranks
    # compare them too (empty in a data.json written before they were recorded)
    write_settings: dict = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> PreparedData:
        fields = json.loads(Path(path).read_text())
        if "synthetic_path" in fields:      # written before the splits had files of their own
            fields["synthetic_train_path"] = fields["synthetic_val_path"] = fields.pop("synthetic_path")
        return cls(**fields)

    def to_dict(self) -> dict:
        return asdict(self)

    def save(self, path: Path) -> None:
        write_json(Path(path), self.to_dict())
