"""The kb/ tree: where every page lives, the sources people list, and fetching them."""
