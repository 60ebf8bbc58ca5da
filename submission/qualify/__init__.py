"""`python -m submission qualify`: what each recipe costs on this machine, measured in one
command inside a time budget (default 8 minutes on a GPU, 5 on a CPU).

    python -m submission qualify [minutes=M] [data_dir=DIR] [out=DIR] [recipes=mild,medium,hot]
        [key=value ...]

On a synthetic ImageNet-format folder it makes itself (data_dir= to use yours), converted
as a run converts it, it runs as separate processes: each recipe's bench (its own step,
sides and loader; eager, then compiled where the device compiles), a campaign of 2 short
runs with their energy, and writes one small folder: qualify.md (every figure beside its
command), qualify.json, the profiles `project` and `tradeoff` read, the campaign's report
and one log. Parts that would not fit the budget are left out and named.

  plan.py     the parts, the sizes of each device, the estimates and the budget
  command.py  the options, the parts run one by one, the figures gathered
  record.py   the folder, qualify.json (one type) and qualify.md
"""
from .command import main

__all__ = ["main"]
