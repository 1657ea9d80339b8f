"""``python -m aioproducer.cli ...``, the same as the ``aioproducer`` command."""

import sys

from . import main

sys.exit(main())
