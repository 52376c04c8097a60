"""Who executed a study's runs, recorded so that person never rates them.

Blinded review needs raters who did not run what they score: the launcher's id goes into the
stored lock (outside its digest, like the sandbox it ran in), rides along in exported result
rows, and `evalq blind` and `evalq import` check raters against it. `EVALQ_EXECUTOR` names the
person (an id from the rater pool); without it, the login name the command runs under.
"""

from __future__ import annotations

import getpass
import os
from typing import Optional


def executor_id() -> Optional[str]:
    named = os.environ.get("EVALQ_EXECUTOR", "").strip()
    if named:
        return named
    try:
        return getpass.getuser() or None
    except (KeyError, OSError):  # a uid with no passwd entry (a container's)
        return None
