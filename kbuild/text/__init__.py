"""The words kbuild uses to read text, each defined once.

- `tokens`: how many tokens a text costs (an estimate, no tokenizer);
- `sentences`: where sentences end;
- `markdown`: headings and their visible text, list items, fences, page markers, tables;
- `keywords`: the RFC 2119 requirement keywords;
- `ranking`: BM25 over stemmed words;
- `slugs`: a heading as a file name.

Slicing, the offline backend, the checks, search and the rules all read text through these, so
that a heading, a list item or a sentence is the same thing to each of them.
"""
