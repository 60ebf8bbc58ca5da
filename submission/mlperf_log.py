"""The only place that writes MLPerf events: a thin layer over mlperf_logging.mllog.

One `RunLog` per run writes `:::MLLOG` lines to one result file. Every line is flushed
as it is written (logging.FileHandler), so an interrupted run leaves a readable
prefix. Ranks other than 0 get a RunLog that writes nothing.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from mlperf_logging.mllog import constants as C
from mlperf_logging.mllog.mllog import MLLogger

from .config import Config
from .names import recipe_name

if TYPE_CHECKING:       # for the annotations only: torch is the trainer's
    from torch import nn

BENCHMARK = "resnet"


class _StrictFileHandler(logging.FileHandler):
    """logging swallows write errors (it prints them and goes on): a result file with lines
    missing must not pass for a complete log, so a failed write raises."""

    def handleError(self, record: logging.LogRecord) -> None:
        raise


class RunLog:
    def __init__(self, path: str | None):
        self.path = path
        self._handler = None
        self._logger = None
        if path is not None:
            logger = logging.getLogger(f"submission.mllog.{path}")
            logger.propagate = False
            logger.setLevel(logging.INFO)
            self._handler = _StrictFileHandler(path, mode="a")
            logger.addHandler(self._handler)
            self._logger = MLLogger(logger=logger, default_stack_offset=2)

    def event(self, key: str, value: Any = None, metadata: dict | None = None) -> None:
        if self._logger:
            self._logger.event(key=key, value=value, metadata=metadata)

    def start(self, key: str, value: Any = None, metadata: dict | None = None) -> None:
        if self._logger:
            self._logger.start(key=key, value=value, metadata=metadata)

    def end(self, key: str, value: Any = None, metadata: dict | None = None) -> None:
        if self._logger:
            self._logger.end(key=key, value=value, metadata=metadata)

    def close(self) -> None:
        if self._handler:
            self._handler.close()
            logging.getLogger(f"submission.mllog.{self.path}").removeHandler(self._handler)
            self._handler = self._logger = None

    # ---- the groups of events of a run, in the order they happen -------------
    def init_start(self, cache_cleared: bool) -> None:
        self.event(C.CACHE_CLEAR, value=cache_cleared)
        self.start(C.INIT_START)

    def submission(self, config: Config) -> None:
        self.event(C.SUBMISSION_ORG, config.org)
        self.event(C.SUBMISSION_PLATFORM, config.system_name)
        self.event(C.SUBMISSION_DIVISION, config.descriptor.division)
        self.event(C.SUBMISSION_STATUS, config.descriptor.status)
        self.event(C.SUBMISSION_BENCHMARK, BENCHMARK)
        self.event("number_of_nodes", config.num_nodes)
        self.event("accelerators_per_node", config.accelerators_per_node)   # what trains

    def hyperparameters(self, config: Config, seed: int, train_samples: int, eval_samples: int) -> None:
        self.event(C.SEED, seed)
        self.event(C.GLOBAL_BATCH_SIZE, config.global_batch_size)
        self.event(C.GRADIENT_ACCUMULATION_STEPS, 1)
        self.event(C.TRAIN_SAMPLES, train_samples)
        self.event(C.EVAL_SAMPLES, eval_samples)
        self.event(C.MODEL_BN_SPAN, config.batch_per_device)
        # not MLPerf keys: which recipe ran, and its methods, for whoever reads the log
        self.event("recipe", recipe_name(config.recipe), metadata={"methods": config.methods})
        # No opt_* keys: they name MLPerf's reference optimisers (sgd, lars), and the
        # decoupled SGDW of the recipe is neither; the open division does not require
        # them, and the published entry's logs carry none.

    def weights_initialization(self, model: nn.Module) -> None:
        for name, _ in model.named_parameters():
            mlperf_name = mlperf_tensor_name(name)
            if mlperf_name:
                self.event(C.WEIGHTS_INITIALIZATION, metadata={"tensor": mlperf_name})

    def init_stop_run_start(self) -> None:
        self.end(C.INIT_STOP)
        self.start(C.RUN_START)

    def epoch_start(self, epoch: int) -> None:
        self.start(C.EPOCH_START, metadata={"epoch_num": epoch})

    def epoch_stop(self, epoch: int) -> None:
        self.end(C.EPOCH_STOP, metadata={"epoch_num": epoch})

    def eval_start(self, epoch: float) -> None:
        self.start(C.EVAL_START, metadata={"epoch_num": epoch})

    def eval_result(self, epoch: float, accuracy: float) -> None:
        self.event(C.EVAL_ACCURACY, accuracy, metadata={"epoch_num": epoch})
        self.end(C.EVAL_STOP, metadata={"epoch_num": epoch})

    def run_stop(self, success: bool, **details: Any) -> None:
        status = C.SUCCESS if success else C.ABORTED
        self.end(C.RUN_STOP, metadata={"status": status, **details})


def mlperf_tensor_name(torch_name: str) -> str | None:
    """torchvision ResNet-50 parameter -> the tensor name of the MLPerf reference.

    conv1.weight -> conv0_weight, bn1.bias -> bn0_beta, layer2.0.downsample.0.weight ->
    stage2_unit1_conv1sc_weight, fc.bias -> fc1_bias. BlurPool wraps convs as `.conv`.
    """
    *path, suffix = torch_name.split(".")
    parts = [p for p in path if p != "conv"] + [suffix]
    if suffix not in ("weight", "bias"):
        return None
    if parts[0] == "fc":
        return f"fc1_{suffix}"
    if parts[0] in ("conv1", "bn1"):
        layer = "conv0" if parts[0] == "conv1" else "bn0"
        return _param(layer, suffix)
    if parts[0].startswith("layer"):
        stage, unit = int(parts[0][5:]), int(parts[1]) + 1
        module = parts[2]
        if module == "downsample":
            layer = "conv1sc" if parts[3] == "0" else "bnsc"
        else:
            layer = module
        return f"stage{stage}_unit{unit}_" + _param(layer, suffix)
    return None


def _param(layer: str, suffix: str) -> str:
    if layer.startswith("bn"):
        return f"{layer}_{'gamma' if suffix == 'weight' else 'beta'}"
    return f"{layer}_{suffix}"
