"""``python -m npformer``: the same command line as ``python -m npformer.experiment``.

Trains one configuration of the copy/sort experiment or the whole grid (chapter 10).
"""

import sys

from npformer.experiment import main

sys.exit(main())
