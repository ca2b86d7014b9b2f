"""``python -m proton_ctypes``: the ``proton`` command."""
from .proton import main

if __name__ == "__main__":
    main()
