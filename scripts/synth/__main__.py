"""``python -m kvfabric.scripts.synth`` (``make synth``)."""

import sys

from .cli import main

sys.exit(main())
