"""A kbuild plug-in that cannot be imported: the library it needs is not installed."""
import kbuild_broken_needs_this_library  # noqa: F401
