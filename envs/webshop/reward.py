"""WebShop's purchase reward, as ``web_agent_site/engine/goal.py`` defines it (re-implemented, no code copied).

    reward = (attributes matched + options matched + [price <= price_upper])
             / (#goal attributes + #goal options + 1)  x  r_type

- an attribute matches if ``thefuzz`` ``token_set_ratio`` > 85 against one of the product's attributes,
  else if it is a substring of the lower-cased title, bullet points or description;
- an option matches if token_set_ratio > 85 against a chosen option, both first colour-normalised
  (the first colour word of the original's list contained in the string replaces it);
- r_type: 1.0 when the product's query equals the goal's, or >= 2 category-path parts are shared, or the
  noun overlap of the names (share of the goal name's nouns also in the product name) is > 0.2; else 0.5;
  0.1 when the overlap is < 0.1; 0.0 when it is 0. No noun in the goal name counts as overlap 0.2.

Nouns are spaCy ``en_core_web_lg``'s NOUN/PROPN tags, as the original (goal.py loads ``en_core_web_lg``; its
setup also fetches ``en_core_web_sm``, which the search engine's tools use). That model is not in the package
registry this project installs from, so when it is absent (``noun_tagger: auto``) a recorded fallback tags every
content word (not a function word, not a number) as a noun: :func:`fallback_nouns`. The two agree whenever the
product bought is the goal's own product (overlap 1 either way); on other products the fallback changes r_type
in ~20% of cases (issue 21's measurement), so the tables footnote every WebShop cell scored with it.
"""
from __future__ import annotations

import re
from typing import Any
from collections.abc import Callable

from thefuzz import fuzz  # pyright: ignore[reportMissingImports]  (the agents extra)

FUZZ_THRESHOLD = 85

# web_agent_site/engine/normalize.py COLOR_SET, in its order (the first one contained wins)
COLOR_SET = ["alabaster", "apricot", "aqua", "ash", "asphalt", "azure", "banana", "beige", "black", "blue", "blush", "bordeaux", "bronze", "brown", "burgundy", "camel", "camo", "caramel", "champagne", "charcoal", "cheetah", "chestnut", "chocolate", "christmas", "coffee", "cognac", "copper", "coral", "cranberry", "cream", "crystal", "dark", "denim", "eggplant", "elephant", "espresso", "fuchsia", "gold", "granite", "grape", "graphite", "grass", "gray", "green", "grey", "heather", "indigo", "ivory", "ivy", "khaki", "lavender", "lemon", "leopard", "light", "lilac", "lime", "magenta", "maroon", "mauve", "merlot", "midnight", "mint", "mocha", "multicolor", "mushroom", "mustard", "natural", "navy", "nude", "olive", "orange", "peach", "pewter", "pink", "plum", "purple", "rainbow", "red", "rose", "royal", "rust", "sand", "sapphire", "seashell", "silver", "skull", "slate", "steel", "stone", "stonewash", "sunflower", "tan", "taupe", "teal", "tiger", "turquoise", "violet", "walnut", "wheat", "white", "wine", "yellow"]

# Closed-class English words (determiners, pronouns, prepositions, conjunctions, auxiliaries, particles):
# what the fallback tagger never calls a noun.
FUNCTION_WORDS = frozenset(["a", "an", "the", "this", "that", "these", "those", "my", "your", "his", "her", "its", "our", "their", "some", "any", "no", "every", "each", "all", "both", "either", "neither", "few", "many", "much", "more", "most", "other", "another", "such", "what", "which", "whose", "who", "whom", "i", "you", "he", "she", "it", "we", "they", "me", "him", "us", "them", "myself", "yourself", "itself", "ourselves", "themselves", "of", "in", "on", "at", "by", "for", "with", "about", "against", "between", "into", "through", "during", "before", "after", "above", "below", "to", "from", "up", "down", "out", "off", "over", "under", "again", "further", "then", "once", "here", "there", "when", "where", "why", "how", "and", "but", "or", "nor", "so", "yet", "if", "because", "as", "until", "while", "than", "though", "although", "unless", "since", "whether", "is", "am", "are", "was", "were", "be", "been", "being", "have", "has", "had", "having", "do", "does", "did", "doing", "can", "could", "shall", "should", "will", "would", "may", "might", "must", "not", "only", "own", "same", "too", "very", "just", "per", "via", "vs", "x", "w"])
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'\-]*")


def normalize_color(text: str) -> str:
    for color in COLOR_SET:
        if color in text:
            return color
    return text


def fallback_nouns(text: str) -> list[str]:
    """The recorded fallback tagger: lower-cased words that are neither function words nor numbers."""
    words = [w.strip("'-").lower() for w in _WORD.findall(text)]
    return [w for w in words if w and w not in FUNCTION_WORDS and not re.fullmatch(r"[\d.,\-]+", w)]


SPACY_MODEL = "en_core_web_lg"   # web_agent_site/engine/goal.py: spacy.load("en_core_web_lg")
FALLBACK_NAME = "fallback:content-words-v1"


def noun_tagger(kind: str = "auto") -> tuple[Callable[[str], list[str]], str]:
    """(tagger, recorded name). ``auto``: spaCy's en_core_web_lg (the original's) when installed, else the
    fallback; ``spacy``: the model or an error; ``fallback``: the fallback."""
    if kind not in ("auto", "spacy", "fallback"):
        raise ValueError(f"webshop noun_tagger={kind!r}: choose auto, spacy or fallback")
    if kind == "auto":
        import importlib.util

        if importlib.util.find_spec(SPACY_MODEL) is None:  # no model: skip spaCy's slow import
            return fallback_nouns, FALLBACK_NAME
    if kind in ("auto", "spacy"):
        try:
            import spacy  # pyright: ignore[reportMissingImports]  (optional)

            nlp = spacy.load(SPACY_MODEL)
        except Exception as exc:  # absent package or model
            if kind == "spacy":
                raise RuntimeError(f"webshop noun_tagger=spacy needs spaCy and its {SPACY_MODEL} model ({exc}); "
                                   "use noun_tagger=fallback or install them") from exc
        else:
            def spacy_nouns(text: str) -> list[str]:
                return [t.text.lower() for t in nlp(text) if t.pos_ in ("PNOUN", "NOUN", "PROPN")]

            return spacy_nouns, f"spacy:{SPACY_MODEL}-{nlp.meta.get('version', '?')}"
    return fallback_nouns, FALLBACK_NAME


def type_reward(product: dict[str, Any], goal: dict[str, Any], nouns: Callable[[str], list[str]]) -> dict[str, Any]:
    query_match = product["query"] == goal["query"]
    got = {x.strip() for x in product["product_category"].split("\u203a")}
    want = {x.strip() for x in goal["product_category"].split("\u203a")}
    category_match = len(got & want) >= 2
    got_nouns, want_nouns = nouns(product["name"]), nouns(goal["name"])
    title_score = 0.2 if not want_nouns else len(set(got_nouns) & set(want_nouns)) / len(want_nouns)
    r_type = 1.0 if (query_match or category_match or title_score > 0.2) else 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return {"r_type": r_type, "query_match": query_match, "category_match": category_match, "title_score": title_score}


def attribute_matches(product: dict[str, Any], goal: dict[str, Any]) -> int:
    hits = 0
    text_fields = (product["Title"].lower(), " ".join(product["BulletPoints"]).lower(), product["Description"].lower())
    for g in goal["attributes"]:
        if any(fuzz.token_set_ratio(p, g) > FUZZ_THRESHOLD for p in product["Attributes"]) or \
                any(g in field for field in text_fields):
            hits += 1
    return hits


def option_matches(chosen: list[str], goal_options: list[str]) -> int:
    chosen = [normalize_color(o) for o in chosen]
    hits = 0
    for g in (normalize_color(o) for o in goal_options):
        if any(fuzz.token_set_ratio(p, g) > FUZZ_THRESHOLD for p in chosen):
            hits += 1
    return hits


def purchase_reward(product: dict[str, Any], goal: dict[str, Any], price: float, chosen_options: dict[str, str],
                    nouns: Callable[[str], list[str]]) -> tuple[float, dict[str, Any]]:
    """(reward, its parts) for buying ``product`` at ``price`` with ``chosen_options`` ({name: value})."""
    goal_options = list(goal["goal_options"].values()) if isinstance(goal["goal_options"], dict) \
        else list(goal["goal_options"])  # human goals: a list; synthetic ones: {name: value}
    t = type_reward(product, goal, nouns)
    r_price = price <= goal["price_upper"]
    n_att = attribute_matches(product, goal)
    n_opt = option_matches(list(chosen_options.values()), goal_options)
    denom = len(goal["attributes"]) + len(goal_options) + 1
    reward = (n_att + n_opt + int(r_price)) / denom * t["r_type"]
    parts = {**t, "r_att": n_att / len(goal["attributes"]), "attributes_matched": n_att,
             "options_matched": n_opt, "r_option": n_opt / len(goal_options) if goal_options else None,
             "r_price": bool(r_price), "denominator": denom}
    return reward, parts
