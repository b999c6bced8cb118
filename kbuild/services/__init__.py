"""What the commands and the MCP server do besides building, each for one command or tool:

- `status`: what is stale and why (`kbuild status`, `kbuild explain`, a dry run's estimate);
- `doctor`: the setup checked, read-only (`kbuild doctor`);
- `scaffold`: a new knowledge base (`kbuild init`);
- `watch`: a build per burst of edits (`kbuild watch`);
- `browse`: a page's parent index and the pages below it (`kbuild show`, the MCP `show` tool);
- `graphtext`: the recorded graph as dot, Mermaid or JSON (`kbuild graph`);
- `progress`: a build's progress bar or log lines;
- `answers`: the versioned JSON that `--json` and the MCP tools answer with (docs/json.md);
- `mcp_server`: the store served to MCP clients over stdio (`kbuild mcp`).

The command line (kbuild.cli) is the shell that parses arguments and calls these.
"""
