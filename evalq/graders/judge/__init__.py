"""Helpers for hidden tests that judge the agent's code from outside its process.

    from evalq_judge import load_subject, run, output
    slug = load_subject("textutil.slug")
    assert slug.slugify("a b") == "a-b"      # slugify runs in the subject, == runs here

The subject is used for one thing: calling the code under test (load_subject, the handles it
gives, run, build). Everything else a check needs runs here, in the judge, out of the agent's
code's reach: the files it hands to that code or reads back (files.py: tmp_dir, write_text,
read_text, set_mtime) and static checks of its source (source.py: source_text,
module_source, source_tree, from a copy taken before the subject started).

The grader copies this package's source files into each grading's folder and binds that copy
read-only into the judge's sandbox as `evalq_judge` (and into the subject's, for its server).
"""

from .client import (SubjectError, SubjectGone, SubjectHung, SubjectRefused,
                     SubjectUnavailable, Handle, build, call_timeout, load_subject, output, run)
from .files import (SharedFileError, read_bytes, read_text, set_mtime, tmp_dir, write_bytes,
                    write_text)
from .source import SourceMissing, module_path, module_source, source_text, source_tree

__all__ = ["SubjectError", "SubjectGone", "SubjectHung", "SubjectRefused", "SubjectUnavailable",
           "Handle", "build", "call_timeout", "load_subject", "output", "run",
           "SharedFileError", "read_bytes", "read_text", "set_mtime", "tmp_dir", "write_bytes",
           "write_text", "SourceMissing", "module_path", "module_source", "source_text",
           "source_tree"]
