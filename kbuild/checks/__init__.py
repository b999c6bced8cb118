"""Checks of generated pages that need no model: links, formats, the grounding of a
page's statements in its sources (`grounding`), whether a rebuilt page means the same as the old
one (`meaning`), and the whole store's check (`store`, `kbuild check`)."""
