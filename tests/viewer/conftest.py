"""Fixtures of the viewer tests."""

import pytest

from .helpers import install_reference_profiles


@pytest.fixture(scope="session")
def ref_dir(tmp_path_factory):
    """A directory holding the H200 reference profiles as ``<name>.hatchet``."""
    return install_reference_profiles(tmp_path_factory.mktemp("reference"))
