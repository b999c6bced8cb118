"""The words kbuild uses to read text, each defined once.

- `tokens`: how many tokens a text costs (an estimate, no tokenizer);
- `sentences`: where sentences end;
- `markdown`: headings and their visible text, list items, fences, page markers, tables;
- `keywords`: the RFC 2119 requirement keywords;
- `ranking`: BM25 over stemmed words;
- `slugs`: a heading as a file name;
- `inline`: inline Markdown written back from its parse;
- `prose`: a span's words without their markup, its statements, the words that carry no content;
- `injection`: text that tries to steer the model that will read it;
- `secrets`, `secret_kinds`: credentials in a text, found and redacted;
- `obligations`: the sentences that oblige (RFC 2119), as requirements with how to test them;
- `slicing`: a converted source cut into chunks and regions of whole lines.

The offline backend, the checks, search and the rules all read text through these, so that a
heading, a list item or a sentence is the same thing to each of them. This package imports
nothing of kbuild outside it (tests/test_architecture.py).
"""
