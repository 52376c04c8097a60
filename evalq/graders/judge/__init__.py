"""Helpers for hidden tests that judge the agent's code from outside its process.

    from evalq_judge import load_subject, run, output
    slug = load_subject("textutil.slug")
    assert slug.slugify("a b") == "a-b"      # slugify runs in the subject, == runs here

The grader copies this package's source files into each grading's folder and binds that copy
read-only into the judge's sandbox as `evalq_judge` (and into the subject's, for its server).
"""

from .client import (SubjectError, build, call_timeout, SubjectGone, SubjectHung, SubjectUnavailable, Handle,
                     load_subject, output, read_text, run, tmp_dir,
                     write_text)

__all__ = ["SubjectError", "build", "call_timeout", "SubjectGone", "SubjectHung", "SubjectUnavailable", "Handle",
           "load_subject", "output", "read_text", "run", "tmp_dir", "write_text"]
