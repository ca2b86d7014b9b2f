"""States, as ``triton.profiler.state``: ``state``, ``enter_state``, ``exit_state``,
``metadata_state``.  The fast paths live in :mod:`.core.states`; these are the same objects."""
from .core.states import (COMPUTE_METADATA_SCOPE_NAME, COMPUTE_METADATA_SCOPE_PREFIX, enter_state, exit_state,
                          get_metadata_state_name, metadata_state, state)

__all__ = ["state", "enter_state", "exit_state", "metadata_state", "get_metadata_state_name",
           "COMPUTE_METADATA_SCOPE_NAME", "COMPUTE_METADATA_SCOPE_PREFIX"]
