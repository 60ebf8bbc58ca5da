"""Names that become folders, and recipes by name or by file.

org, system_name, a grid's name and a recipe's name become folders (results/<system_name>/,
package/<org>/, implementations/pytorch-<recipe>/): each is a safe name, letters, digits,
'.', '_' and '-', starting with a letter or a digit (no '..', no slash, no glob character,
no new line), of at most 100 characters. The harness's own folders under results/
(archive, package, tradeoff, qualify) are no system's name.

`recipe=` is a shipped recipe's name (submission/recipes/<name>.yaml) or a file the user
names explicitly, by a path ending in .yaml that exists; its name (in folders and logs) is
then the file's name without .yaml, a safe name too. Anything else, `../x` included, is
refused: a recipe is never a path into a folder name.
"""
from __future__ import annotations

import re
from pathlib import Path

from .errors import ConfigError
from .run_folder import HARNESS_FOLDERS

RECIPES_DIR = Path(__file__).resolve().parent / "recipes"
RECIPE_FILE = ".yaml"
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
LONGEST = 100


def folder_name_problem(what: str, name: str, reserved: tuple[str, ...] = ()) -> str | None:
    """Why `name` cannot be one folder's name (`what`: org, system_name, ...), or None."""
    if not SAFE_NAME.fullmatch(name):
        return (f"{what} {name!r} names a folder: letters, digits, '.', '_' and '-' only, "
                "starting with a letter or a digit")
    if len(name) > LONGEST:
        return f"{what} is {len(name)} characters long; a folder name of at most {LONGEST} is needed"
    if name in reserved:
        return f"{what} {name!r} is a folder of the harness's own under results/: choose another name"
    return None


def system_name_problem(name: str) -> str | None:
    """Why `name` cannot be a system's name (its folder under results/), or None."""
    return folder_name_problem("system_name", name, HARNESS_FOLDERS)


def shipped_recipes() -> list[str]:
    return sorted(p.stem for p in RECIPES_DIR.glob(f"*{RECIPE_FILE}"))


def recipe_path(recipe: str) -> Path:
    """The file `recipe=` means: a shipped recipe by name, or the user's file by its path."""
    if recipe in shipped_recipes():
        return RECIPES_DIR / f"{recipe}{RECIPE_FILE}"
    path = Path(recipe)
    if recipe.endswith(RECIPE_FILE) and path.is_file():
        problem = folder_name_problem("recipe file", path.stem)
        if problem:
            raise ConfigError(f"recipe={recipe}: {problem} (implementations/pytorch-<name>/ in a package): "
                              "rename the file")
        return path.resolve()
    raise ConfigError(f"recipe={recipe}: neither a shipped recipe ({', '.join(shipped_recipes())}) nor a "
                      f"recipe file: name a shipped recipe, or a file of yours by its path ending in "
                      f"{RECIPE_FILE} (e.g. recipe=./my-recipe{RECIPE_FILE})")


def recipe_name(recipe: str) -> str:
    """A recipe as folders and logs name it: a shipped one's name, a file's name without .yaml."""
    return Path(recipe).stem if recipe.endswith(RECIPE_FILE) else recipe


def recipe_name_problem(recipe: str) -> str | None:
    """Why a recorded recipe (a campaign.json's) cannot name a folder, or None."""
    if not recipe.endswith(RECIPE_FILE) and recipe not in shipped_recipes():
        return "is not a recipe's name (a shipped recipe, or a file ending in .yaml)"
    return folder_name_problem("its name", recipe_name(recipe))
