"""The `backend` fixture of the hostile tests (import it): each test runs in both sandboxes."""

import pytest

from evalq.graders.sandbox import get_sandbox


@pytest.fixture(params=["bwrap", "docker"])
def backend(request):
    sandbox = get_sandbox(request.param)
    ok, why = sandbox.available()
    if not ok:
        pytest.fail(f"sandbox '{request.param}' is not available: {why}", pytrace=False)
    return sandbox
