"""Fake vendor libraries for CPU tests (fake libcupti: :mod:`fakes.fake_cupti`)."""
