"""``python -m mixgemm {bench,dequant,sweep,tune} ...``: see mixgemm.bench.cli."""

from .bench.cli import main

raise SystemExit(main())
