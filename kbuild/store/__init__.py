"""The store: the kb/ tree where every page lives, the sources people list and fetching them
(`layout`, `pages`, `sources`, `fetch`, `links`, `writelock`), and what kbuild keeps beside it:
the local state's layout in `.kbuild/` (`localstate`), build reports (`reports`), the pages a
person edited by hand (`handedits`) and the block kbuild keeps in a harness's instruction files
(`harness`)."""
