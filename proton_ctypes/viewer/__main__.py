"""``python -m proton_ctypes.viewer``: same as the ``proton-viewer`` command."""

import sys

from .cli import main

sys.exit(main())
