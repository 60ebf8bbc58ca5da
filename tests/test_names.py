"""Names that become folders (submission/names.py): a recipe is a shipped recipe's name or a
file the user names by its path ending in .yaml, never a path into a folder name; org,
system_name and the other names are letters, digits, '.', '_' and '-', and the harness's own
folders under results/ are no system's name; package reads a campaign.json's names as untrusted."""
from __future__ import annotations

import json
import os

import pytest
from test_package import make_campaign

from submission import package
from submission.config import ConfigError, resolve
from submission.names import RECIPES_DIR, recipe_name

from conftest import REPO, run_submission

MILD = (RECIPES_DIR / "mild.yaml").read_text()


def test_a_recipe_that_walks_out_of_the_recipes_folder_is_refused(tmp_path):
    (tmp_path / "evil.yaml").write_text(MILD)
    for recipe in (os.path.relpath(tmp_path / "evil", RECIPES_DIR), "../x", str(tmp_path / "evil")):
        with pytest.raises(ConfigError, match=rf"recipe={recipe}: neither a shipped recipe \(baseline, hot, "
                                              r"medium, mild\) nor a recipe file: .*ending in \.yaml"):
            resolve("cpu", {"recipe": recipe})


def test_a_recipe_file_named_by_its_path_is_read_and_named_by_its_file(tmp_path, monkeypatch):
    mine = tmp_path / "less-smoothing.yaml"
    mine.write_text("base: mild\nlabel_smoothing: 0.05\n")
    monkeypatch.chdir(tmp_path)
    chosen = resolve("cpu", {"recipe": "less-smoothing.yaml"})
    assert chosen.label_smoothing == 0.05 and chosen.recipe == str(mine)
    assert chosen.origin("label_smoothing") == str(mine)
    assert recipe_name(chosen.recipe) == "less-smoothing"
    assert recipe_name("mild") == "mild"
    odd = tmp_path / "two words.yaml"
    odd.write_text("base: mild\n")
    with pytest.raises(ConfigError, match="recipe file 'two words' names a folder"):
        resolve("cpu", {"recipe": str(odd)})


@pytest.mark.e2e
def test_a_recipe_outside_the_repository_writes_nothing_outside_results(tmp_path):
    results, cache = tmp_path / "results", tmp_path / "cache"
    done = run_submission("run", "system=cpu", "recipe=../../x", f"results_dir={results}",
                          f"cache_dir={cache}", "runs=1", timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "recipe=../../x: neither a shipped recipe" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []
    assert not (REPO.parent / "x").exists()


@pytest.mark.parametrize("org", ["Acme*", "Acme\nLabs", ".hidden", "-x", "Acme Labs", "a/b", "é"])
def test_an_org_outside_the_safe_names_is_refused_in_one_line(org):
    with pytest.raises(ConfigError, match=r"org '.*' names a folder: letters, digits, '\.', '_' and '-'") as refused:
        resolve("cpu", {"org": org})
    assert len([line for line in str(refused.value).splitlines() if "org" in line]) == 1


@pytest.mark.parametrize("name, message", [
    ("package", "system_name 'package' is a folder of the harness's own under results/"),
    ("tradeoff", "system_name 'tradeoff' is a folder of the harness's own"),
    ("box[1]", r"system_name 'box\[1\]' names a folder: letters, digits"),
])
def test_a_system_name_that_is_no_safe_folder_or_the_harnesss_own_is_refused(monkeypatch, tmp_path, name, message):
    from submission import system_descriptor
    descriptor = json.loads((system_descriptor.SYSTEMS_DIR / "cpu.json").read_text())
    (tmp_path / "mine.json").write_text(json.dumps({**descriptor, "system_name": name}))
    monkeypatch.setattr(system_descriptor, "SYSTEMS_DIR", tmp_path)
    with pytest.raises(ConfigError, match=message):
        resolve("mine", {})


@pytest.mark.parametrize("field, value, message", [
    ("recipe", "../../../../escape", "recipe '../../../../escape' in .*campaign.json is not a recipe's name"),
    ("system", "../cpu", "system '../cpu' in .*campaign.json names a folder"),
])
def test_package_refuses_a_campaign_record_whose_names_are_not_safe(tmp_path, field, value, message):
    results, out = tmp_path / "results", tmp_path / "deep" / "er" / "out"
    folder = make_campaign(results)
    record = json.loads((folder / "campaign.json").read_text())
    if field == "recipe":
        record["config"]["settings"]["recipe"] = value
    else:
        record["system"] = record["config"]["system"] = value
    (folder / "campaign.json").write_text(json.dumps(record))
    with pytest.raises(ValueError, match=message):
        package.build_package(results, [folder.name], "TestOrg", out, REPO)
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["results"]
