"""Tradeoff curves: each configuration (a recipe, or a recipe with settings changed) trained
at several budgets and seeds, top-1 against training minutes or cost.

  analysis  the points of the runs, their curves over seeds, the Pareto frontier, the
            cheapest point to a target, speed-ups against a baseline's curve, time to accuracy
  tables    the same as markdown tables
  plots     top-1 against minutes or cost, with the frontier and published points

All of it is pure functions on given points: nothing here trains or reads result folders.
"""
