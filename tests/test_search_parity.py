"""Search parity (issue 18): one corpus of tricky texts, one list of queries, the hits written
out; every backend must return them.

SQLite searches with FTS5 (``porter unicode61 remove_diacritics 2``), PostgreSQL with a
tsvector under ``turnstore_english`` (english snowball stemming, no stop words). Where the
engines differ by nature (docs/queries.md, "Where SQLite and PostgreSQL differ"), the
difference is pinned in ``DIFFERENCES``, one hit list per engine, so that a change on either
side shows.
"""

from __future__ import annotations

import pytest

from builders import user
from turnstore import Store

# One item per session: a hit is named by its session id.
CORPUS = {
    "apostrophe": "I think it's broken again",
    "curly": "don’t worry, it’s fine",
    "obrien": "Ask O'Brien about the invoice",
    "quoted": 'The sign said "closed" all day',
    "inch": 'a 12" pizza with olives',
    "path": "saved to C:\\Users\\bob\\notes.txt yesterday",
    "hyphen": "a state-of-the-art e-mail client",
    "cafe": "Meet me at the café on Friday",
    "naive": "a naïve approach",
    "cyrillic": "Привет, как дела у Наташи?",
    "cjk": "我们明天去东京 tomorrow",
    "greek": "Καλημέρα κόσμε",
    "emoji": "party time 🎉 tonight",
    "numbers": "order 4521 costs 3.14 dollars in version 2.0",
    "mail": "write to bob@example.com or see https://docs.example.org/guide/start",
    "running": "she was running late",
    "far": "alpha " + "filler " * 60 + "omega",
    "policy": "the refund policy is strict",
    "policy2": "a policy about each refund",
    "markup": "paste <b>bold</b> and <script>window.pwned()</script> here",
}

# query -> the sessions it finds, on every backend.
SAME = {
    # Apostrophes, straight or curly, in the text or the query: both parts are words.
    "it's": ["apostrophe", "curly"],
    "it’s": ["apostrophe", "curly"],
    "it": ["apostrophe", "curly"],
    "don't": ["curly"],
    "O'Brien": ["obrien"],
    "O'Br*": ["obrien"],
    "brien": ["obrien"],
    "obrien": [],
    # Words that are stop words to PostgreSQL's english configuration: no engine drops them.
    "the": ["cafe", "hyphen", "obrien", "policy", "quoted"],
    "a": ["hyphen", "inch", "naive", "policy2"],
    # Double quotes: a phrase, or part of a word.
    '"closed"': ["quoted"],
    "bold": ["markup"],  # the text between tags is a word to both
    '"closed" all': ["quoted"],
    '12"': ["inch"],
    '12" pizza': ["inch"],
    # Backslashes.
    "C:\\Users\\bob\\notes.txt": ["path"],
    "Users\\": ["path"],
    # Hyphenated words: the whole, its parts, its parts as a phrase, a prefix.
    "state-of-the-art": ["hyphen"],
    "state of the art": ["hyphen"],
    "art": ["hyphen"],
    "e-mail": ["hyphen"],
    "mail": ["hyphen"],
    "email": [],
    "state-of*": ["hyphen"],
    # Accents and case; other scripts (no engine splits CJK text into words).
    "café": ["cafe"],
    "CAFÉ": ["cafe"],
    "naïv*": ["naive"],
    "Привет": ["cyrillic"],
    "привет": ["cyrillic"],
    "Наташ*": ["cyrillic"],
    "Наташа": [],
    "Καλημέρα": ["greek"],
    "καλημερα": [],
    "我们明天去东京": ["cjk"],
    "我们*": ["cjk"],
    "东京": [],
    # Emoji are not words.
    "🎉": [],
    "party🎉": ["emoji"],
    # Numbers.
    "4521": ["numbers"],
    "45*": ["numbers"],
    "3.14": ["numbers"],
    "2.0": ["numbers"],
    # Addresses as a whole.
    "bob@example.com": ["mail"],
    "docs.example.org": ["mail"],
    # Stemming both engines share.
    "running": ["running"],
    "runs": ["running"],
    "run*": ["running"],
    "ran": [],
    "olive": ["inch"],
    "policies": ["policy", "policy2"],
    # Phrases, words far apart, alternatives, exclusions.
    "refund policy": ["policy", "policy2"],
    '"refund policy"': ["policy"],
    "alpha omega": ["far"],
    '"alpha omega"': [],
    '"time party"': [],
    "pizza OR invoice": ["inch", "obrien"],
    "refund -strict": ["policy2"],
}

# query -> (SQLite's hits, PostgreSQL's hits): where the engines differ by nature.
DIFFERENCES = {
    # FTS5 removes diacritics (remove_diacritics 2); turnstore_english keeps them.
    "cafe": (["cafe"], []),
    "naive": (["naive"], []),
    # PostgreSQL's parser keeps a file path, an e-mail address, a URL and a decimal number as
    # one token; FTS5 splits them at every character that is not a letter or digit.
    "notes": (["path"], []),
    "bob": (["mail", "path"], ["path"]),
    "example": (["mail"], []),
    "guide": (["mail"], []),
    "14": (["numbers"], []),
    # PostgreSQL's parser reads HTML tags as markup: a tag is no word, and nothing inside
    # <script> is indexed; FTS5 sees only letters and digits, so both are words to it.
    "script": (["markup"], []),
    "pwned": (["markup"], []),
    # Porter (SQLite) and snowball (PostgreSQL) stem some words differently.
    "strictly": ([], ["policy"]),
}


@pytest.fixture
async def corpus(store: Store) -> Store:
    for session_id, text in CORPUS.items():
        await store.add_items(session_id, [user(text)])
    return store


async def hits(store: Store, query: str) -> list[str]:
    return sorted(hit.session_id for hit in await store.search(query, limit=len(CORPUS)))


async def test_every_backend_finds_the_same_items(corpus: Store) -> None:
    found = {query: await hits(corpus, query) for query in SAME}
    assert found == SAME


async def test_where_the_engines_differ_by_nature(corpus: Store, backend_name: str) -> None:
    engine = 1 if backend_name == "postgres" else 0
    found = {query: await hits(corpus, query) for query in DIFFERENCES}
    assert found == {query: pair[engine] for query, pair in DIFFERENCES.items()}


async def test_exact_phrases_rank_first_on_every_backend(corpus: Store) -> None:
    assert [hit.session_id for hit in await corpus.search("refund policy")] == [
        "policy",
        "policy2",
    ]
