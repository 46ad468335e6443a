"""Share-group tests: every log directory a test leaves in its tmp_path is checked."""

from __future__ import annotations

from tests.log_dirs import verify_tmp_path_at_teardown

# Every log directory a test leaves in its tmp_path is checked with `seglog verify`.
__all__ = ["verify_tmp_path_at_teardown"]
