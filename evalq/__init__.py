"""evalq: paired, pre-registered experiments on coding agents."""

__version__ = "0.1.0"
