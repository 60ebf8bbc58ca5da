"""Tradeoff curves: each configuration (a recipe, or a recipe with settings changed) trained
at several budgets and seeds, top-1 against training minutes or cost.

  command           the `tradeoff` verb: its modes (run a grid or one point, report, list,
                    published), one function each
  grid              a grid file: configurations, budgets, seeds, targets; its points
  points            trains one point (a run of the harness, target off) and reads its
                    point.json; the only module here that starts runs
  grid_progress     points done, minutes so far and left, while a grid runs
  analysis          the points' curves over seeds, the Pareto frontier, the cheapest point to a
                    target, speed-ups against the baseline, disturbed timings (pure functions)
  tables, plots     the same as markdown tables and as plots
  grid_report       tradeoff.md and tradeoff.json of a grid's finished points
  projected_points  the points' minutes and dollars projected to other systems from bench profiles
"""
