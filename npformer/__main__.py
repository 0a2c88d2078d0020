"""``python -m npformer``: the experiment's command line, or ``verify``.

- ``python -m npformer verify`` checks this machine against a dozen of the book's numbers
  (``npformer.book.verify``; the preface runs it).
- Anything else is the command line of ``python -m npformer.training.experiment``: it trains one
  configuration of the copy/sort experiment or the whole grid (chapter 10).
"""

import sys

if sys.argv[1:2] == ["verify"]:
    from npformer.book.verify import main

    sys.exit(main(sys.argv[2:]))

from npformer.training.experiment import main

sys.exit(main())
