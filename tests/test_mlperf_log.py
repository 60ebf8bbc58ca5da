"""submission.mlperf_log: the logged tensor names of the model's parameters."""
import yaml

from submission.mlperf_log import mlperf_tensor_name

from conftest import mild_model


def test_logged_tensor_names_are_exactly_the_mlperf_reference_set():
    from importlib.resources import files
    rules = files("mlperf_logging") / "compliance_checker" / "training_2.0.0" / "closed_resnet.yaml"
    end = next(item["END"]["CHECK"] for item in yaml.safe_load(rules.read_text()) if "END" in item)
    expected = set(eval(end.split("==", 1)[1].strip().removeprefix("sorted(").removesuffix(")")))
    names = {mlperf_tensor_name(n) for n, _ in mild_model().named_parameters()}
    assert names == expected
