"""The WebShop text environment: search, result pages of 10, item pages with options, ``click[buy now]``.

One engine per worker process holds the catalogue and its search index; ``reset(problem)`` starts a
session on the goal the problem carries (``problem.gold``: the scorer side), ``step`` takes
``search[<query>]`` or ``click[<button, ASIN or option value>]`` (the argument is lower-cased, as the
original text environment does). Two protocols (``protocol`` in the benchmark config):

- ``react`` (default; what ReAct and Reflexion evaluate and AUQ builds on): ReAct's WebShop client rules —
  search only from the search page; ``Next >`` and the result page's ``< Prev`` are refused ("ad hoc page
  limitation" in ReAct's notebook); clicking an option answers "You have clicked <value>."; an action that
  does not apply answers "Invalid action!"; ``think[...]`` answers "OK." and changes nothing;
- ``text_env``: WebShop's ``WebAgentTextEnv`` rules — search from any page, paging both ways, an option
  click re-renders the item page, an action that does not apply changes nothing.

Either way a step is a step (the host's ``max_steps`` counts it). The purchase reward is
:func:`agentic_repro.envs.webshop.reward.purchase_reward` with the product's drawn price (:mod:`agentic_repro.envs.webshop.catalog`).
What a step's ``info`` carries is what the page shows or the agent chose (never the goal's attributes,
options or price ceiling, never the reward's parts): the purchase (asin, options, price) and the reward.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from agentic_repro.envs.webshop import catalog, pages
from agentic_repro.envs.webshop.reward import noun_tagger, purchase_reward
from agentic_repro.envs.webshop.search import SEARCH_RETURN_N, ProductSearch, document_text
from agentic_repro.harness.env import StepResult
from agentic_repro.harness.types import Problem

PAGE_SIZE = 10  # engine.py PRODUCT_WINDOW
_ACTION = re.compile(r"^\s*(\w+)\[(.*)\]\s*$", re.DOTALL)


def parse_action(action: Any) -> tuple[str, str | None]:
    m = _ACTION.match(str(action))
    if m is None:
        return str(action).strip(), None
    return m.group(1).lower(), m.group(2).strip()


class WebShopEngine:
    """WebShop for one session at a time (synchronous; the benchmark runs it in worker processes)."""

    def __init__(self, products: str, attributes: str, human: str, price_seed: int, protocol: str = "react",
                 results_shown: int = PAGE_SIZE, show_attrs: bool = False, noun_tagger_kind: str = "auto",
                 k1: float = 0.9, b: float = 0.4) -> None:
        if protocol not in ("react", "text_env"):
            raise ValueError(f"webshop protocol={protocol!r}: choose react or text_env")
        self.products, self.prices, _ = catalog.build(Path(products), Path(attributes), Path(human), int(price_seed))
        self.by_asin = {p["asin"]: p for p in self.products}
        self.search_index = ProductSearch([document_text(p) for p in self.products], k1=k1, b=b)
        self.nouns, self.noun_tagger_name = noun_tagger(noun_tagger_kind)
        self.protocol = protocol
        self.results_shown = int(results_shown)
        self.show_attrs = bool(show_attrs)
        self._s: dict[str, Any] | None = None

    # ---- pages ---------------------------------------------------------------------------------
    def _page_products(self) -> list[dict[str, Any]]:
        s = self._s
        start = (s["page_num"] - 1) * PAGE_SIZE
        return [self.by_asin[a] for a in s["results"][start:start + PAGE_SIZE]]

    def _elems(self) -> list[pages.Elem]:
        s = self._s
        goal = s["goal"]["instruction_text"]
        if s["page"] == "init":
            return pages.search_page(goal)
        if s["page"] == "search":
            return pages.results_page(goal, self._page_products(), s["page_num"], len(s["results"]))
        if s["page"] == "item":
            return pages.item_page(goal, self.by_asin[s["asin"]], s["options"], self.show_attrs)
        if s["page"] == "item_sub":
            return pages.sub_page(goal, self.by_asin[s["asin"]], s["subpage"])
        return pages.done_page(s["reward"])

    def _observation(self) -> str:
        s = self._s
        if s["page"] == "done" and self.protocol == "react":
            return f"Your score (min 0.0, max 1.0): {s['reward']}"
        elems = self._elems()
        if self.protocol == "react":
            return pages.render_react(elems, search=s["page"] == "init", results_shown=self.results_shown)
        return pages.render_simple(elems)

    def _clickables(self) -> dict[str, str]:
        """lower-cased click argument -> kind (button, product, option) on the current page."""
        out: dict[str, str] = {}
        for e in self._elems():
            if e.kind in ("button", "product") and e.text != "Search":
                out[e.text.lower()] = e.kind
            elif e.kind == "option":
                out[e.text] = "option"
        return out

    def _admissible(self) -> list[str]:
        s = self._s
        if s["page"] == "done":
            return []
        acts = ["search[<your query>]"] if s["page"] == "init" else []
        shown = 0
        for arg, kind in self._clickables().items():
            if self.protocol == "react":
                if s["page"] == "search" and arg in ("next >", "< prev"):
                    continue
                if kind == "product":
                    shown += 1
                    if shown > self.results_shown:
                        continue
            acts.append(f"click[{arg}]")
        return acts

    def _result(self, observation: str | None = None, reward: float = 0.0, info: dict[str, Any] | None = None,
                ) -> StepResult:
        done = self._s["page"] == "done"
        return StepResult(self._observation() if observation is None else observation, reward, done,
                          info or {}, self._admissible())

    # ---- protocol ------------------------------------------------------------------------------
    def reset(self, problem: Problem, seed: int) -> StepResult:
        goal = problem.gold
        if not isinstance(goal, dict) or "instruction_text" not in goal:
            raise ValueError(f"WebShop problem {problem.id} carries no goal")
        self._s = {"goal": goal, "page": "init", "keywords": None, "results": [], "page_num": 1, "asin": None,
                   "options": {}, "subpage": None, "reward": None}
        return self._result(info={"protocol": self.protocol, "seed_used": False})

    def _search(self, query: str) -> None:
        s = self._s
        s.update(page="search", keywords=query, page_num=1, asin=None, options={},
                 results=[self.products[i]["asin"] for i in self.search_index.search(query, k=SEARCH_RETURN_N)])

    def _buy(self) -> StepResult:
        s = self._s
        product = self.by_asin[s["asin"]]
        price = self.prices[s["asin"]]
        reward, _parts = purchase_reward(product, s["goal"], price, s["options"], self.nouns)
        s.update(page="done", reward=reward)
        return self._result(reward=reward, info={"success": reward == 1.0, "reward": reward, "purchased": {
            "asin": s["asin"], "options": dict(s["options"]), "price": price}, "noun_tagger": self.noun_tagger_name})

    def step(self, action: Any) -> StepResult:
        s = self._s
        if s is None:
            raise RuntimeError("WebShop step before reset")
        if s["page"] == "done":
            raise RuntimeError("WebShop step after the purchase")
        name, arg = parse_action(action)
        if self.protocol == "react":
            return self._step_react(name, arg)
        return self._step_text_env(name, arg)

    def _invalid(self) -> StepResult:
        if self.protocol == "react":
            return self._result("Invalid action!", info={"valid": False})
        return self._result(info={"valid": False})

    def _step_react(self, name: str, arg: str | None) -> StepResult:
        s = self._s
        if name == "think" and arg is not None:
            return self._result("OK.", info={"valid": True})
        if name == "search" and arg and s["page"] == "init":
            self._search(arg.lower())
            return self._result(info={"valid": True})
        if name != "click" or not arg:
            return self._invalid()
        button, page = arg.lower(), s["page"]
        if button == "buy now" and page == "item":
            return self._buy()
        if button == "back to search" and page in ("search", "item", "item_sub"):
            s.update(page="init")
        elif button == "< prev" and page == "item_sub":
            s.update(page="item")
        elif button == "< prev" and page == "item":
            s.update(page="search", options={})
        elif page == "item" and button in {b.lower() for b in pages.SUB_PAGES} and \
                (button != "attributes" or self.show_attrs):
            s.update(page="item_sub", subpage=button.capitalize())
        elif page == "search" and button.upper() in [p["asin"] for p in self._page_products()]:
            s.update(page="item", asin=button.upper(), options={})
        elif page == "item" and self._option_name(button) is not None:
            s["options"][self._option_name(button)] = button
            return self._result(f"You have clicked {button}.", info={"valid": True})
        else:
            return self._invalid()
        return self._result(info={"valid": True})

    def _option_name(self, value: str) -> str | None:
        for name, values in self.by_asin[self._s["asin"]]["options"].items():
            if value in values:
                return name
        return None

    def _step_text_env(self, name: str, arg: str | None) -> StepResult:
        s = self._s
        arg = arg.lower() if arg is not None else None
        if name == "search" and arg:
            self._search(arg)
            return self._result(info={"valid": True})
        clickables = self._clickables()
        if name != "click" or arg is None or arg not in clickables:
            return self._invalid()
        page, kind = s["page"], clickables[arg]
        if arg == "buy now":
            return self._buy()
        if arg == "back to search":
            s.update(page="init")
        elif arg == "next >" and page == "search":
            s["page_num"] += 1
        elif arg == "< prev" and page == "search":
            s["page_num"] -= 1
        elif arg == "< prev" and page == "item_sub":
            s.update(page="item")
        elif arg == "< prev" and page == "item":
            s.update(page="search")
        elif kind == "button" and arg in {b.lower() for b in pages.SUB_PAGES}:
            s.update(page="item_sub", subpage=arg.capitalize())
        elif kind == "product":
            s.update(page="item", asin=arg.upper())
        elif kind == "option":
            s["options"][self._option_name(arg)] = arg
        return self._result(info={"valid": True})

    def close(self) -> None:
        self._s = None
