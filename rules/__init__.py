"""kbuild's default rule set, written on the engine's public API (kbuild.engine).

Installed as `kbuild.rules`. A Kbuildfile.py may import these rules, add its own, or replace them.
"""
