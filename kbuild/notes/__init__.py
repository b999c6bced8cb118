"""Notes: what an agent or a person learned, written back as sources through a checked channel.

- `note`: a note's file, its front matter, status and history;
- `learning`: deltas (`kbuild learn`, the MCP tool `learn`), checked before anything is written;
- `forgetting`: a tombstone instead of a note's text (`kbuild forget`);
- `bundle`: one project's knowledge as a folder or .tar.gz that travels to another store;
- `findings`: what `kbuild check` says of the notes.
"""
