"""Writers: pure functions of a session phase, and the atomic file write they share."""
