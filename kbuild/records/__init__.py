"""The records of "nothing changed": a no-op build's (uptodate) and a passed check's (checked),
each read before the Kbuildfile runs. Nothing is imported here: `kbuild` with nothing to do
imports only the record it reads (kbuild.entry)."""
