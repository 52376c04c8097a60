"""A scripted model server on loopback for tests and dry runs (Anthropic messages, OpenAI chat
completions and OpenAI Responses).

It replays a scripted conversation, reporting exactly the usage numbers the script gives, so a
test can check that what an agent reports and evalq stores match what the "provider" billed.
"""

from evalq.modelserver.script import Script, Turn, load_script
from evalq.modelserver.server import ModelServer

__all__ = ["ModelServer", "Script", "Turn", "load_script"]
