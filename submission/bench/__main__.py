"""`python -m submission.bench ...`: the same as `python -m submission bench ...`."""
import sys

from .command import main

sys.exit(main())
