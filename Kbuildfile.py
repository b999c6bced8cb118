"""kbuild building a knowledge base of its own documentation (README.md and docs/).

Run `kbuild` here; the store is kb/, its sources are listed in kb/kbuild/sources.yml.
"""
from pathlib import Path

from kbuild.rules import knowledge_base

# search ranks by meaning as well as by words: all-MiniLM-L6-v2 on this machine (docs/retrieval.md)
kb = knowledge_base(Path(__file__).parent, store="kb", semantic={"source": "local"})

RULES = kb.rules
targets = kb.targets
before_build = kb.before_build
