"""WebShop's pages as text: what the original HTML templates show, rendered the two ways agents read them.

A page is the list of its visible texts in template order, each tagged ``text``, ``button``, ``option``
(a radio value, possibly selected) or ``product`` (an ASIN link) — what BeautifulSoup's visible-text walk
yields on the original ``web_agent_site/templates/*.html``. Two renderings:

- ``react``: ReAct's WebShop client (``WebShop.ipynb``, ``webshop_text``): buttons and ASINs as ``[x]`` on
  their own line, options inline, a selected option as ``[[x]]``, the instruction only on the search page,
  only the first ``results_shown`` products of a result page (ReAct shows 3);
- ``simple``: WebShop's own text environment (``WebAgentTextEnv``, observation_mode ``text``): every visible
  text joined with `` [SEP] ``.

The done page keeps only its visible heading and score: the original HTML also carries the goal (its asin,
attributes, options, price ceiling) in a ``display:none`` block that a BeautifulSoup text walk would leak;
no rendering here shows it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SUB_PAGES = ("Description", "Features", "Reviews", "Attributes")


@dataclass(frozen=True)
class Elem:
    kind: str  # text | button | option | product
    text: str
    selected: bool = False


def instruction(goal_text: str, search_page: bool = False) -> list[Elem]:
    return [Elem("text", "Instruction: " if search_page else "Instruction:"), Elem("text", goal_text)]


def search_page(goal_text: str) -> list[Elem]:
    return [Elem("text", "WebShop"), *instruction(goal_text, True), Elem("button", "Search")]


def results_page(goal_text: str, products: list[dict[str, Any]], page: int, total: int) -> list[Elem]:
    out = [*instruction(goal_text), Elem("button", "Back to Search"), Elem("text", f"Page {page} (Total results: {total})")]
    if page > 1:
        out.append(Elem("button", "< Prev"))
    out.append(Elem("button", "Next >"))
    for p in products:
        out += [Elem("product", p["asin"]), Elem("text", p["Title"]), Elem("text", p["Price"])]
    return out


def item_page(goal_text: str, product: dict[str, Any], chosen: dict[str, str], show_attrs: bool) -> list[Elem]:
    out = [*instruction(goal_text), Elem("button", "Back to Search"), Elem("button", "< Prev")]
    for name, values in product["options"].items():
        out.append(Elem("text", name))
        out += [Elem("option", v, chosen.get(name) == v) for v in values]
    out += [Elem("text", product["Title"]), Elem("text", f"Price: {product['Price']}"),
            Elem("text", f"Rating: {product['Rating']}")]
    out += [Elem("button", b) for b in SUB_PAGES if b != "Attributes" or show_attrs]
    out.append(Elem("button", "Buy Now"))
    return out


def sub_page(goal_text: str, product: dict[str, Any], which: str) -> list[Elem]:
    out = [*instruction(goal_text), Elem("button", "Back to Search"), Elem("button", "< Prev")]
    if which == "Description":
        out.append(Elem("text", product["Description"]))
    elif which == "Features":
        out += [Elem("text", b) for b in product["BulletPoints"]]
    elif which == "Attributes":
        out += [Elem("text", a) for a in product["Attributes"]]
        out += [Elem("text", product["category"]), Elem("text", product["query"]),
                Elem("text", product["product_category"])]
    # Reviews: the original loads none (its review loading is commented out), so the page lists nothing
    return [e for e in out if e.text.strip()]


def done_page(reward: float) -> list[Elem]:
    return [Elem("text", "Thank you for shopping with us!"), Elem("text", "Your score (min 0.0, max 1.0)"),
            Elem("text", str(reward))]


def render_simple(elems: list[Elem]) -> str:
    return " [SEP] ".join(e.text.strip() for e in elems)


def render_react(elems: list[Elem], *, search: bool, results_shown: int) -> str:
    """ReAct's rendering (see the module docstring); ``search``: this is the search page (shows the instruction)."""
    out, n_text, n_prod, since_prod = "", 0, 0, 0
    for e in elems:
        if e.kind == "button":
            piece = f"\n[{e.text}] "
        elif e.kind == "option":
            piece = f"[[{e.text}]]" if e.selected else f"[{e.text}]"
        elif e.kind == "product":
            piece = f"\n[{e.text}] " if n_prod < results_shown else ""
            n_prod += 1
            since_prod = 0
        else:
            piece = f"\n{e.text} "
            if n_text < 2 and not search:
                piece = ""  # the instruction is shown on the search page only
            if since_prod <= 2 and n_prod > results_shown:
                piece = ""  # title and price of a product past the shown ones
            n_text += 1
        since_prod += 1
        out += piece
    return out
