"""WebShop: reward on hand-computed cases, Lucene-like search, loader, pages and both protocols, on the
hand-made fixture in the real file format (tests/fixtures/webshop; never WebShop numbers)."""
from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from agentic_repro.envs.webshop import catalog
from agentic_repro.envs.webshop.engine import WebShopEngine, parse_action
from agentic_repro.envs.webshop.reward import (fallback_nouns, normalize_color, option_matches, purchase_reward,
                                 type_reward)
from agentic_repro.envs.webshop.search import Analyzer, ProductSearch, document_text
from agentic_repro.harness.types import Problem

FIX = Path(__file__).parent / "fixtures" / "webshop"
FILES = (FIX / "items_shuffle_1000.json", FIX / "items_ins_v2_1000.json", FIX / "items_human_ins.json")


@pytest.fixture(scope="module")
def built():
    return catalog.build(*FILES, price_seed=0)


@pytest.fixture(scope="module")
def engine():
    return WebShopEngine(*map(str, FILES), price_seed=0, noun_tagger_kind="fallback")


def _product(built, asin):
    return next(p for p in built[0] if p["asin"] == asin)


def _goal(built, asin):
    return next(g for g in built[2] if g["asin"] == asin)


# ---- loader ------------------------------------------------------------------------------------
def test_loader_drops_nan_and_duplicate_asins_and_parses_prices_and_options(built):
    products, prices, goals = built
    asins = [p["asin"] for p in products]
    assert "nan" not in asins and asins.count("B000DEOD01") == 1 and len(products) == 18
    deo = _product(built, "B000DEOD01")
    assert deo["Title"].startswith("Bright Citrus")  # the first record wins, not the duplicate
    assert deo["options"] == {"scent": ["bright citrus", "calming lavender", "ginger fresh"],
                              "size": ["3 ounce (pack of 1)", "3-ounce (2-pack)"]}
    assert deo["query"] == "deodorant"  # lower-cased and stripped
    assert _product(built, "B000TABL01")["Price"] == "$100.0" and prices["B000TABL01"] == 100.0
    shoe = _product(built, "B000SHOE01")
    assert shoe["pricing"] == [35.0, 60.0] and shoe["Price"] == "$35.0 to $60.0"
    assert 35.0 <= prices["B000SHOE01"] <= 60.0
    assert shoe["BulletPoints"] == ["Rubber sole; slip-on design"]  # a string becomes one bullet
    assert _product(built, "B000SHOE02")["Attributes"] == []
    assert _product(built, "B000MUG000")["Attributes"] == ["DUMMY_ATTR"]  # absent from the attribute file


def test_goals_skip_attribute_less_instructions_add_price_text_and_use_the_233_shuffle(built):
    products, prices, goals = built
    assert len(goals) == 4  # 5 instructions, one without attributes
    rng = random.Random(0)
    unshuffled = catalog.human_goals(products, catalog.draw_prices(products, rng), rng)
    expected = list(unshuffled)
    random.Random(233).shuffle(expected)
    assert [g["asin"] for g in goals] == [g["asin"] for g in expected]
    deo = _goal(built, "B000DEOD01")
    # price 10.99: the ceiling is the larger of two of [20, 30, 40, 50]
    assert deo["price_upper"] in (30.0, 40.0, 50.0)
    assert deo["instruction_text"] == ("i would like a 3 ounce bottle of bright citrus deodorant for sensitive skin"
                                       f", and price lower than {deo['price_upper']:.2f} dollars")
    assert deo["goal_options"] == ["bright citrus", "3 ounce (pack of 1)"]


def test_price_seed_is_what_fixes_the_draws():
    a = catalog.build(*FILES, price_seed=0)
    b = catalog.build(*FILES, price_seed=0)
    c = catalog.build(*FILES, price_seed=1)
    assert a[1] == b[1] and [g["price_upper"] for g in a[2]] == [g["price_upper"] for g in b[2]]
    assert a[1]["B000SHOE01"] != c[1]["B000SHOE01"]


# ---- reward: hand-computed ---------------------------------------------------------------------
def _deo_goal(price_upper=40.0):
    return {"asin": "B000DEOD01", "query": "deodorant", "name": "Bright Citrus Deodorant by Earth Mama",
            "product_category": "Beauty & Personal Care \u203a Personal Care \u203a Deodorants & Antiperspirants",
            "attributes": ["sensitive skin"], "goal_options": ["bright citrus", "3 ounce (pack of 1)"],
            "price_upper": price_upper, "instruction_text": "..."}


def test_reward_right_product_right_options_is_one(built):
    r, parts = purchase_reward(_product(built, "B000DEOD01"), _deo_goal(), 10.99,
                               {"scent": "bright citrus", "size": "3 ounce (pack of 1)"}, fallback_nouns)
    assert r == 1.0 and parts["r_type"] == 1.0 and parts["denominator"] == 4


def test_reward_no_options_chosen_is_half(built):
    # (1 attribute + 0 options + price) / (1 + 2 + 1)
    r, _ = purchase_reward(_product(built, "B000DEOD01"), _deo_goal(), 10.99, {}, fallback_nouns)
    assert r == pytest.approx(2 / 4)


def test_reward_price_over_the_ceiling_loses_its_share(built):
    r, parts = purchase_reward(_product(built, "B000DEOD01"), _deo_goal(price_upper=10.0), 10.99,
                               {"scent": "bright citrus", "size": "3 ounce (pack of 1)"}, fallback_nouns)
    assert parts["r_price"] is False and r == pytest.approx(3 / 4)


def test_reward_sibling_product_same_query(built):
    # ginger fresh deodorant: attribute matches, neither option, price ok; same query -> r_type 1
    r, parts = purchase_reward(_product(built, "B000DEOD02"), _deo_goal(), 10.99, {"scent": "ginger fresh"},
                               fallback_nouns)
    assert parts["query_match"] and parts["options_matched"] == 0 and r == pytest.approx(2 / 4)


def test_reward_unrelated_product_has_type_zero(built):
    r, parts = purchase_reward(_product(built, "B000HEAD01"), _deo_goal(), 45.5, {"color": "blue"}, fallback_nouns)
    assert parts["title_score"] == 0.0 and parts["r_type"] == 0.0 and r == 0.0


def test_attribute_substring_of_the_title_counts(built):
    shoe = _product(built, "B000SHOE01")
    goal = {**_goal(built, "B000SHOE01"), "price_upper": 1000.0}
    assert "arch support" not in shoe["Attributes"]  # only in the title
    r, parts = purchase_reward(shoe, goal, 50.0, {"size": "7.5 wide"}, fallback_nouns)
    assert parts["attributes_matched"] == 1 and r == 1.0


def test_type_reward_thresholds():
    base = {"query": "q1", "product_category": "A \u203a B"}
    goal = {"query": "q2", "product_category": "C \u203a D", "name": " ".join(f"noun{i}" for i in range(10))}
    two = type_reward({**base, "name": "noun0 noun1 other"}, goal, fallback_nouns)
    assert two["title_score"] == pytest.approx(0.2) and two["r_type"] == 0.5  # not > 0.2 -> 0.5
    three = type_reward({**base, "name": "noun0 noun1 noun2"}, goal, fallback_nouns)
    assert three["r_type"] == 1.0  # 0.3 > 0.2
    goal11 = {**goal, "name": " ".join(f"noun{i}" for i in range(11))}
    low = type_reward({**base, "name": "noun0"}, goal11, fallback_nouns)
    assert low["title_score"] == pytest.approx(1 / 11) and low["r_type"] == 0.1  # < 0.1
    cat = type_reward({"query": "q1", "product_category": "A \u203a B \u203a X", "name": "noun0"},
                      {**goal11, "product_category": "A \u203a B \u203a Y"}, fallback_nouns)
    assert cat["category_match"] and cat["r_type"] == 0.1  # < 0.1 overrides a category match
    empty = type_reward({**base, "name": "anything"}, {**goal, "name": "the of and"}, fallback_nouns)
    assert empty["title_score"] == 0.2 and empty["r_type"] == 0.5


def test_colour_normalisation_and_fuzzy_options():
    assert normalize_color("dark cognac brown") == "brown"  # the first colour of the list contained wins
    assert normalize_color("navy blue") == "blue"
    assert option_matches(["dark cognac brown"], ["dark cognac brown"]) == 1
    assert option_matches(["navy blue"], ["navy"]) == 0  # 'blue' vs 'navy' after normalisation
    assert option_matches(["3-ounce (2-pack)"], ["3 ounce 2 pack"]) == 1  # token_set_ratio 100 after processing
    assert option_matches(["size 7"], ["size 8"]) == 0


def test_fallback_noun_tagger_drops_function_words_and_numbers():
    assert fallback_nouns("Easy Spirit Traveltime Women's Mule Shoes with Arch Support, 7.5 Wide") == [
        "easy", "spirit", "traveltime", "women's", "mule", "shoes", "arch", "support", "wide"]


# ---- search ------------------------------------------------------------------------------------
def test_analyzer_is_lucene_like():
    a = Analyzer()
    assert a("The shoes are for running") == ["shoe", "run"]  # stop words out, Porter stems
    assert a("Women's 3.5 inch") == ["women", "3.5", "inch"]  # possessive removed, decimals kept whole
    assert a("a-b") == ["b"]  # 'a' is a stop word; '-' splits


def test_search_ranks_and_counts_only_matching_documents(built):
    products = built[0]
    idx = ProductSearch([document_text(p) for p in products])
    hits = [products[i]["asin"] for i in idx.search("bright citrus deodorant")]
    assert hits[0] == "B000DEOD01" and set(hits) == {"B000DEOD01", "B000DEOD02"}
    assert idx.search("zzzz unknownword") == []
    assert len(idx.search("coffee")) == 13  # 4 mugs, 8 cups, 1 table
    # a repeated term weighs more: 'coffee coffee table' still puts the table first
    assert products[idx.search("coffee coffee table")[0]]["asin"] == "B000TABL01"


def test_document_text_is_title_description_first_bullet_options(built):
    text = document_text(_product(built, "B000DEOD01"))
    assert "aluminum free deodorant" in text and "long-lasting" not in text  # only the first bullet
    assert text.endswith("scent: bright citrus, calming lavender, ginger fresh, and size: 3 ounce (pack of 1), "
                         "3-ounce (2-pack)")


# ---- the engine, react protocol ----------------------------------------------------------------
def _problem(built, asin):
    g = _goal(built, asin)
    return Problem(id="fixed_x", index=0, fields={"goal_index": 0}, gold=g, benchmark="webshop-fixture")


def test_parse_action():
    assert parse_action("click[Buy Now]") == ("click", "Buy Now")
    assert parse_action(" search[ a b ] ") == ("search", "a b")
    assert parse_action("buy it") == ("buy it", None)


def test_react_episode_buys_with_reward_one(engine, built):
    r = engine.reset(_problem(built, "B000DEOD01"), 0)
    assert "Instruction:" in r.observation and "bright citrus deodorant" in r.observation
    assert r.actions == ["search[<your query>]"]
    r = engine.step("search[bright citrus deodorant]")
    assert "[B000DEOD01]" in r.observation and "Page 1 (Total results: 2)" in r.observation
    assert "Instruction" not in r.observation  # ReAct shows it on the search page only
    r = engine.step("click[B000DEOD01]")
    assert "scent [bright citrus][calming lavender][ginger fresh]" in r.observation and "[Buy Now]" in r.observation
    assert engine.step("click[bright citrus]").observation == "You have clicked bright citrus."
    assert engine.step("click[3 ounce (pack of 1)]").observation == "You have clicked 3 ounce (pack of 1)."
    r = engine.step("click[Buy Now]")
    assert r.done and r.reward == 1.0 and r.observation == "Your score (min 0.0, max 1.0): 1.0"
    assert r.info["success"] is True and r.info["purchased"]["options"] == {"scent": "bright citrus",
                                                                            "size": "3 ounce (pack of 1)"}
    # nothing of the goal's hidden fields reaches the method
    assert not {"attributes", "goal_options", "price_upper", "asin"} & set(r.info)


def test_react_invalid_actions_and_think(engine, built):
    engine.reset(_problem(built, "B000DEOD01"), 0)
    assert engine.step("click[Buy Now]").observation == "Invalid action!"  # not on an item page
    assert engine.step("think[I should search]").observation == "OK."
    engine.step("search[deodorant]")
    assert engine.step("search[again]").observation == "Invalid action!"  # search only from the search page
    assert engine.step("click[Next >]").observation == "Invalid action!"  # ReAct's page limitation
    assert engine.step("click[B000HEAD01]").observation == "Invalid action!"  # not on this page
    assert engine.step("nonsense").observation == "Invalid action!"
    r = engine.step("click[B000DEOD02]")
    assert "ginger fresh" in r.observation
    r = engine.step("click[< Prev]")
    assert "Page 1" in r.observation
    r = engine.step("click[Back to Search]")
    assert r.actions == ["search[<your query>]"]


def test_results_shown_limits_the_listing_not_the_page(built):
    eng = WebShopEngine(*map(str, FILES), price_seed=0, results_shown=3, noun_tagger_kind="fallback")
    eng.reset(_problem(built, "B000TABL01"), 0)
    r = eng.step("search[coffee]")
    assert r.observation.count("\n[B000") == 3 and "Total results: 13" in r.observation
    assert sum(a.startswith("click[b000") for a in r.actions) == 3
    # a product of the page that is not listed can still be clicked, as in ReAct's client
    unlisted = next(a for a in ("B000CUP005", "B000CUP006", "B000MUG000") if a not in r.observation)
    r = eng.step(f"click[{unlisted}]")
    assert "[Buy Now]" in r.observation


def test_text_env_protocol_pages_and_options(built):
    eng = WebShopEngine(*map(str, FILES), price_seed=0, protocol="text_env", noun_tagger_kind="fallback")
    r = eng.reset(_problem(built, "B000TABL01"), 0)
    assert r.observation.startswith("WebShop [SEP] Instruction: [SEP] i want a solid wood table")
    assert r.observation.endswith(" [SEP] Search")
    r = eng.step("search[coffee]")
    assert "Page 1 (Total results: 13)" in r.observation and r.observation.count("B000") == 10
    r = eng.step("click[next >]")
    assert "Page 2 (Total results: 13)" in r.observation and "B000TABL01" in r.observation
    same = eng.step("click[buy now]")  # not clickable here: nothing happens
    assert same.observation == r.observation and same.reward == 0 and not same.done
    eng.step("click[b000tabl01]")
    r = eng.step("click[dark cognac brown]")
    assert "Dark Cognac Brown" in r.observation  # the item page again
    r = eng.step("click[buy now]")
    assert r.done and r.reward == 1.0 and "Your score (min 0.0, max 1.0) [SEP] 1.0" in r.observation


def test_wrong_purchase_scores_less_than_one(engine, built):
    engine.reset(_problem(built, "B000TABL01"), 0)
    engine.step("search[coffee mug]")
    engine.step("click[B000MUG000]")
    r = engine.step("click[Buy Now]")
    assert r.done and r.reward < 1.0 and r.info["success"] is False


def test_step_after_purchase_is_an_error(engine, built):
    engine.reset(_problem(built, "B000DEOD01"), 0)
    engine.step("search[deodorant]")
    engine.step("click[B000DEOD01]")
    engine.step("click[Buy Now]")
    with pytest.raises(RuntimeError):
        engine.step("click[Buy Now]")


# ---- the benchmark: data checks ----------------------------------------------------------------
def _cfg(tmp_path, **kw):
    import yaml

    cfg = yaml.safe_load((Path(__file__).parents[1] / "configs" / "benchmark" / "webshop.yaml").read_text())
    cfg.update(data_dir=str(tmp_path), **kw)
    return cfg


def test_missing_product_files_fail_in_one_line_naming_them_and_the_command(tmp_path):
    from agentic_repro.envs.webshop.benchmark import WebShop

    (tmp_path / "webshop").mkdir()
    shutil.copy(FIX / "items_ins_v2_1000.json", tmp_path / "webshop")
    with pytest.raises(FileNotFoundError) as exc:
        WebShop(_cfg(tmp_path)).load()
    msg = str(exc.value)
    assert "\n" not in msg and "items_shuffle_1000.json" in msg and "items_human_ins.json" in msg
    assert "make data" in msg


def test_unverified_product_files_are_refused_unless_allowed_and_then_labelled(tmp_path):
    from agentic_repro.envs.webshop.benchmark import WebShop

    shutil.copytree(FIX, tmp_path / "webshop")
    with pytest.raises(ValueError, match="allow_unverified_data"):
        WebShop(_cfg(tmp_path)).load()
    with pytest.raises(ValueError, match="webshop-fixture"):  # not under the name of the real benchmark
        WebShop(_cfg(tmp_path, allow_unverified_data=True)).load()
    problems, info = WebShop(_cfg(tmp_path, allow_unverified_data=True, name="webshop-fixture")).load()
    assert len(problems) == 4 and "not WebShop" in info.split
    assert problems[0].id == "fixed_0" and problems[0].fields == {"goal_index": 0}
    assert problems[0].gold["instruction_text"]  # the goal is scorer-side


def test_noun_tagger_choice_is_recorded():
    import importlib.util

    from agentic_repro.envs.webshop.reward import noun_tagger

    assert noun_tagger("fallback")[1] == "fallback:content-words-v1"
    # the original's model: goal.py loads en_core_web_lg (not en_core_web_sm)
    has_model = importlib.util.find_spec("en_core_web_lg") is not None
    assert noun_tagger("auto")[1].startswith("spacy:en_core_web_lg-" if has_model else "fallback:")
    if not has_model:   # spacy asks for the original's model, by name
        with pytest.raises(RuntimeError, match="en_core_web_lg model .*noun_tagger=fallback"):
            noun_tagger("spacy")
    with pytest.raises(ValueError):
        noun_tagger("nltk")


# ---- fidelity: ReAct's own few-shot observations come out of the react rendering -----------------
def _react_prompt_observation(after_action: str) -> str:
    import json

    shared = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "agent_prompts"
    rows = [json.loads(line) for line in (shared / "react_webshop_prompts.jsonl").read_text().splitlines()]
    prompt = next(r["prompt"] for r in rows if r["name"] == "prompt1")
    start = prompt.index(f"Action: {after_action}\nObservation: ") + len(f"Action: {after_action}\nObservation: ")
    return prompt[start:prompt.index("\n\nAction:", start)]


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip().splitlines()]


def test_react_rendering_reproduces_the_react_prompt_pages():
    from agentic_repro.envs.webshop import pages

    title = ("Bright Citrus Deodorant by Earth Mama | Natural and Safe for Sensitive Skin, Pregnancy and "
             "Breastfeeding, Contains Organic Calendula 3-Ounce")
    product = {"asin": "B078GWRC1J", "Title": title, "Price": "$10.99", "Rating": "N.A.",
               "options": {"scent": ["assorted scents", "bright citrus", "calming lavender", "ginger fresh",
                                     "simply non-scents"],
                           "size": ["travel set (4-pack)", "3 ounce (pack of 1)", "3-ounce (2-pack)"]}}
    item = pages.render_react(pages.item_page("goal", product, {}, show_attrs=False), search=False, results_shown=3)
    assert _lines(item) == _lines(_react_prompt_observation("click[B078GWRC1J]"))
    others = [
        {"asin": "B078GTKVXY", "Title": "Ginger Fresh Deodorant by Earth Mama | Natural and Safe for Sensitive Skin, "
         "Pregnancy and Breastfeeding, Contains Organic Calendula 3-Ounce", "Price": "$10.99"},
        {"asin": "B08KBVJ4XN", "Title": "Barrel and Oak - Aluminum-Free Deodorant, Deodorant for Men, Essential "
         "Oil-Based Scent, 24-Hour Odor Protection, Cedar & Patchouli Blend, Gentle on Sensitive Skin (Mountain Sage, "
         "2.7 oz, 2-Pack)", "Price": "$15.95"}]
    hidden = [{"asin": f"B0HIDDEN{i:02d}", "Title": f"not shown {i}", "Price": "$1.00"} for i in range(7)]
    results = pages.render_react(pages.results_page("goal", [product, *others, *hidden], 1, 50), search=False,
                                 results_shown=3)
    assert _lines(results) == _lines(_react_prompt_observation(
        "search[3 ounce bright citrus deodorant sensitive skin]"))
    start = pages.render_react(pages.search_page(
        "i would like a 3 ounce bottle of bright citrus deodorant for sensitive skin, and price lower than 50.00 "
        "dollars"), search=True, results_shown=3)
    assert _lines(start)[1:] == ["Instruction:", "i would like a 3 ounce bottle of bright citrus deodorant for "
                                 "sensitive skin, and price lower than 50.00 dollars", "[Search]"]


def test_every_scored_webshop_problem_records_its_noun_tagger(tmp_path):
    """Through the runner on the fixture: a problem that buys and one that never buys both record the tagger
    in score_details (the AUQ tables footnote WebShop cells from it), and the scorer uses the same one."""
    import re

    import yaml

    from tests.conftest import make_spec, run
    from tests.doubles import ScriptedBackbone
    from tests.test_envs_runner import CONFIGS

    cfg = yaml.safe_load((CONFIGS / "webshop.yaml").read_text())
    cfg.update(name="webshop-fixture", allow_unverified_data=True,
               files={"products": str(FIX / "items_shuffle_1000.json"),
                      "attributes": str(FIX / "items_ins_v2_1000.json"), "human": str(FIX / "items_human_ins.json")})
    cfg["env"] = {**cfg["env"], "process": False, "max_steps": 5}

    def script(messages, sampling):
        text = messages[-1]["content"]
        offered = re.findall(r"'([^']+)'", text.split("Your admissible actions of the current situation are:")[-1]
                             .split("\n")[0])
        if any(a.startswith("search[") for a in offered):
            q = " ".join(re.search(r"Your task is to: (.+)", text).group(1).split()[2:6])
            return f"<think>t</think><action>search[ {q} ]</action>"
        buy = [a for a in offered if a.lower() == "click[buy now]"] or \
            [a for a in offered if re.match(r"click\[B[0-9A-Z]{9}\]", a, re.IGNORECASE)] or offered
        return f"<think>t</think><action>{buy[0]}</action>"

    def never_buys(messages, sampling):
        return "<think>t</think><action>click[< prev]</action>"

    for name, fn in (("buys", script), ("never", never_buys)):
        spec = make_spec(tmp_path / name, {"name": "react", "solver": "agentic_repro.baselines.react:react",
                                           "params": {"few_shot": 0, "style": "auq"}})
        spec.benchmark_cfg.clear()
        spec.benchmark_cfg.update({**cfg, "limit": 1})
        run(spec, ScriptedBackbone(fn))
        preds = [json.loads(x) for x in (spec.out_dir / "predictions.jsonl").read_text().splitlines()]
        assert preds and all(p["status"] == "ok" for p in preds)
        for p in preds:
            assert p["score_details"]["noun_tagger"] == noun_tagger_name(), (name, p["score_details"])
        if name == "buys":
            assert preds[0]["score_details"]["purchased"] is not None
        else:
            assert preds[0]["score_details"]["purchased"] is None


def noun_tagger_name():
    from agentic_repro.envs.webshop.reward import noun_tagger

    return noun_tagger("auto")[1]
