"""``python -m proton_ctypes``: the ``proton`` command."""
from .cli import main

if __name__ == "__main__":
    main()
