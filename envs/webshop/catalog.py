"""WebShop's products, drawn prices and human-instruction goals, read as the original loader reads them.

Facts from princeton-nlp/WebShop (``web_agent_site/engine/engine.py`` ``load_products`` /
``generate_product_prices`` and ``engine/goal.py`` ``get_human_goals``), re-implemented, no code copied:

- products with ``asin == 'nan'`` or longer than 10 characters are dropped, duplicates keep the first;
- ``pricing`` ("$a" or "$a - $b") becomes one or two floats; an empty one is ``[100.0]`` ("$100.0");
- options: lower-cased option names, values stripped, ``/`` written `` | `` and lower-cased;
- ``Attributes`` come from ``items_ins_v2_1000.json`` (``['DUMMY_ATTR']`` when absent);
- a product's price is its single price, else ``uniform(low, high)``; a goal's ``price_upper`` is the larger
  of two draws from the first four multiples of 10 above that price (none below 2: no price limit).

The original draws those with Python's *unseeded* global ``random``; here one ``random.Random(price_seed)``
draws them in the same order (all product prices, then each goal's ceiling), so a run is repeatable and
the seed is recorded. The goal order is the original's: ``random.seed(233); random.shuffle(goals)``.
"""
from __future__ import annotations

import json
import random
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

PRICE_RANGE = [10.0 * i for i in range(1, 100)]
GOAL_SHUFFLE_SEED = 233  # web_agent_site/app.py and envs/web_agent_text_env.py
NO_PRICE_LIMIT = 1000000


def _parse_pricing(raw: Any) -> tuple[list[float], str]:
    if not raw:
        return [100.0], "$100.0"
    prices = [float(Decimal(re.sub(r"[^\d.]", "", part))) for part in str(raw).split("$")[1:]]
    if len(prices) == 1:
        return prices, f"${prices[0]}"
    return prices[:2], f"${prices[0]} to ${prices[1]}"


def _options(raw: dict[str, Any] | None) -> dict[str, list[str]]:
    options: dict[str, list[str]] = {}
    for name, contents in (raw or {}).items():
        if contents is None:
            continue
        options[name.lower()] = [c["value"].strip().replace("/", " | ").lower() for c in contents]
    return options


def load_products(products_path: Path, attributes_path: Path, human_path: Path | None) -> list[dict[str, Any]]:
    """The catalogue as the environment and the reward see it (one dict per product, file order)."""
    raw = json.loads(Path(products_path).read_text(encoding="utf-8"))
    attributes = json.loads(Path(attributes_path).read_text(encoding="utf-8"))
    human = json.loads(Path(human_path).read_text(encoding="utf-8")) if human_path is not None else {}
    seen: set[str] = set()
    products = []
    for p in raw:
        asin = p["asin"]
        if asin == "nan" or len(asin) > 10 or asin in seen:
            continue
        seen.add(asin)
        pricing, price_tag = _parse_pricing(p.get("pricing"))
        bullets = p["small_description"] if isinstance(p["small_description"], list) else [p["small_description"]]
        attrs = attributes.get(asin, {})
        products.append({
            "asin": asin,
            "Title": p["name"],
            "name": p["name"],
            "Description": p["full_description"],
            "BulletPoints": bullets,
            "pricing": pricing,
            "Price": price_tag,
            "Rating": "N.A.",  # the original loads no reviews or ratings (commented out there)
            "options": _options(p.get("customization_options")),
            "Attributes": attrs["attributes"] if "attributes" in attrs else ["DUMMY_ATTR"],
            "instructions": human.get(asin),
            "category": p["category"],
            "query": p["query"].lower().strip(),
            "product_category": p["product_category"],
        })
    return products


def draw_prices(products: list[dict[str, Any]], rng: random.Random) -> dict[str, float]:
    """Each product's price: its only price, else uniform over its range (the original's rule)."""
    prices = {}
    for p in products:
        pricing = p["pricing"]
        prices[p["asin"]] = 100.0 if not pricing else pricing[0] if len(pricing) == 1 else rng.uniform(*pricing[:2])
    return prices


def human_goals(products: list[dict[str, Any]], prices: dict[str, float], rng: random.Random) -> list[dict[str, Any]]:
    """One goal per human instruction with at least one attribute, in catalogue order (before the shuffle)."""
    goals = []
    for item in products:
        for ins in item.get("instructions") or []:
            attributes = ins["instruction_attributes"]
            if not attributes:
                continue  # the original skips (and counts) these
            ceiling = [p for p in PRICE_RANGE if p > prices[item["asin"]]][:4]
            if len(ceiling) >= 2:
                _, price_upper = sorted(rng.sample(ceiling, 2))
                price_text = f", and price lower than {price_upper:.2f} dollars"
            else:
                price_upper, price_text = NO_PRICE_LIMIT, ""
            goals.append({
                "asin": item["asin"],
                "category": item["category"],
                "query": item["query"],
                "name": item["name"],
                "product_category": item["product_category"],
                "instruction_text": ins["instruction"].strip(".") + price_text,
                "attributes": attributes,
                "price_upper": price_upper,
                "goal_options": ins["instruction_options"],
            })
    return goals


def build(products_path: Path, attributes_path: Path, human_path: Path, price_seed: int,
          ) -> tuple[list[dict[str, Any]], dict[str, float], list[dict[str, Any]]]:
    """(products, drawn prices, goals in the evaluated order: shuffled with seed 233)."""
    products = load_products(products_path, attributes_path, human_path)
    rng = random.Random(price_seed)
    prices = draw_prices(products, rng)
    goals = human_goals(products, prices, rng)
    random.Random(GOAL_SHUFFLE_SEED).shuffle(goals)
    return products, prices, goals
