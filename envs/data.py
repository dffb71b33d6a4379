"""The environments' data files for ``make data``: ALFWorld's games and WebShop's product files, checked.

ALFWorld: the 274 evaluation games (``valid_seen`` + ``valid_unseen``) are copied from
``../shared/datasets/alfworld/json_2.1.1`` when present, else taken from alfworld's own release asset
(``json_2.1.2_tw-pddl.zip``, the one ``alfworld-download`` fetches); either way the sha256 of all
``game.tw-pddl`` files concatenated in sorted path order must equal :data:`ALFWORLD_SHA256`.

WebShop: the 1,000-product setting needs three files under ``webshop/``. ``items_ins_v2_1000.json`` is in
``../shared/datasets/webshop``; the other two are downloaded from the WebShop authors' Google Drive ids
(their ``setup.sh``) and kept only when size and sha256 match :data:`WEBSHOP_FILES`. Offline, they stay
missing and the benchmark says so in one line (:func:`webshop_missing_message`).
"""
from __future__ import annotations

import hashlib
import io
import shutil
import urllib.request
import zipfile
from pathlib import Path

ALFWORLD_DIR = "alfworld/json_2.1.1"
ALFWORLD_SPLITS = {"valid_seen": 140, "valid_unseen": 134}
ALFWORLD_SHA256 = "d6eb458e9495b9a261518aec3c3ff090384bbc1db4106873292d4054a71fbaa6"  # ../shared/datasets/README.md
ALFWORLD_ZIP = "https://github.com/alfworld/alfworld/releases/download/0.4.0/json_2.1.2_tw-pddl.zip"

GDRIVE = "https://drive.google.com/uc?export=download&id={id}"
# file -> (bytes, sha256, git blob, Google Drive id from princeton-nlp/WebShop setup.sh)
WEBSHOP_FILES: dict[str, tuple[int, str, str, str]] = {
    "items_shuffle_1000.json": (4_467_013, "30a4765c3a327af72d9a9a95a6b2486d516f0fa1d3ecd83681901ce82a21b269",
                                "08dfda9a1c896e0f69d50e3437dd3fe94419b7d7", "1EgHdxQ_YxqIQlvvq5iKlCrkEKR6-j0Ib"),
    "items_ins_v2_1000.json": (147_099, "f88a36314a397b53b3d9c3fa5878e5f7b26d35019a51ec83fbedeca61a948f6f",
                               "22837ad99f3173712fc9cb1cce7de6b75fe90595", "1IduG0xl544V_A_jv3tHXC0kyFi7PnyBu"),
    "items_human_ins.json": (5_137_548, "cf78667548a71786e1d9049c24b802e48e1084ad4bb021cae56ce1f6d96954a3",
                             "b2ab7479b9798e0b62ea394e065f3d506875f090", "14Kb5SPBk_jfdLZ_CDBNitW98QLDlKR5O"),
}


def tree_sha256(files: list[Path]) -> str:
    h = hashlib.sha256()
    for f in files:
        h.update(f.read_bytes())
    return h.hexdigest()


def alfworld_games(root: Path) -> list[Path]:
    """The evaluation games under ``root`` (= ``<data>/alfworld/json_2.1.1``), in sorted path order."""
    return sorted(p for split in ALFWORLD_SPLITS for p in (root / split).glob("*/*/game.tw-pddl"))


def fetch_alfworld(dest: Path, shared: Path) -> str:
    """Place the ALFWorld games under ``dest``; returns a one-line report, raises when they cannot be checked."""
    target = dest / ALFWORLD_DIR
    if alfworld_games(target) and tree_sha256(alfworld_games(target)) == ALFWORLD_SHA256:
        return f"ok  {ALFWORLD_DIR}  (already there, 274 games)"
    source = shared / ALFWORLD_DIR
    if alfworld_games(source):
        for f in alfworld_games(source):
            out = target / f.relative_to(source)
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, out)
        origin = str(source)
    else:
        with urllib.request.urlopen(ALFWORLD_ZIP, timeout=120) as resp:  # fixed https URL
            archive = zipfile.ZipFile(io.BytesIO(resp.read()))
        for name in archive.namelist():
            parts = name.split("/")
            if parts[-1] == "game.tw-pddl" and len(parts) >= 4 and parts[-4] in ALFWORLD_SPLITS:
                out = target.joinpath(*parts[-4:])
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(archive.read(name))
        origin = ALFWORLD_ZIP
    games = alfworld_games(target)
    got = tree_sha256(games)
    if got != ALFWORLD_SHA256:
        raise RuntimeError(f"{ALFWORLD_DIR}: sha256 of the {len(games)} games is {got}, expected {ALFWORLD_SHA256}")
    return f"ok  {ALFWORLD_DIR}  ({origin}, {len(games)} games)"


def _checked(data: bytes, name: str) -> bytes:
    size, sha, _blob, _gid = WEBSHOP_FILES[name]
    got = hashlib.sha256(data).hexdigest()
    if len(data) != size or got != sha:
        raise RuntimeError(f"webshop/{name}: got {len(data):,} bytes sha256 {got[:12]}..., expected {size:,} bytes "
                           f"{sha[:12]}...")
    return data


def fetch_webshop(dest: Path, shared: Path, download: bool = True) -> list[str]:
    """Place the WebShop files under ``dest/webshop``; returns one line per file (``ERR`` lines when missing)."""
    lines = []
    for name, (_size, sha, _blob, gid) in WEBSHOP_FILES.items():
        target = dest / "webshop" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_file() and hashlib.sha256(target.read_bytes()).hexdigest() == sha:
            lines.append(f"ok  webshop/{name}  (already there)")
            continue
        try:
            source = shared / "webshop" / name
            if source.is_file():
                target.write_bytes(_checked(source.read_bytes(), name))
                lines.append(f"ok  webshop/{name}  ({source})")
            elif download:
                with urllib.request.urlopen(GDRIVE.format(id=gid), timeout=30) as resp:
                    target.write_bytes(_checked(resp.read(), name))
                lines.append(f"ok  webshop/{name}  (WebShop's Google Drive file {gid})")
            else:
                raise RuntimeError("not in ../shared/datasets/webshop and downloads are off")
        except Exception as exc:  # noqa: BLE001 - report each file; the benchmark refuses to run without it
            lines.append(f"ERR webshop/{name}: {type(exc).__name__}: {exc}")
    return lines


def webshop_missing_message(missing: list[str], folder: Path) -> str:
    """The one line a WebShop run fails with when product files are absent."""
    return (f"WebShop needs {', '.join(missing)} in {folder} (not obtainable offline): run `make data` with internet "
            "access (downloads them from the WebShop authors' Google Drive and checks size and sha256), or copy them "
            "there and re-run `make data` to check them")


# ---- agent prompts (ReAct / Reflexion few-shot prompts) ------------------------------------------
AGENT_PROMPTS_DIR = "agent_prompts"
_REACT = "https://raw.githubusercontent.com/ysymyth/ReAct/6bdb3a1fd38b8188fc7ba4102969fe483df8fdc9/"
_REFLEXION = "https://raw.githubusercontent.com/noahshinn/reflexion/218cf0ef1df84b05ce379dd4a8e47f17766733a0/"
# file -> (bytes, sha256, source URL (repo @ commit / path), how the JSONL is built from the source, name)
AGENT_PROMPTS: dict[str, tuple[int, str, str, str, str]] = {
    "react_alfworld_3prompts.jsonl": (
        62_988, "a2533600d19424bc68932712d982d04b1d4fb4aa4b549b15195bc4c447f7b84f",
        _REACT + "prompts/alfworld_3prompts.json", "json-object", ""),
    "react_webshop_prompts.jsonl": (
        3_434, "b2973c7bb8b3e0aad75e0f84125d02e228f398ad8dc5698427ec4d1ec574e157",
        _REACT + "WebShop.ipynb", "notebook-strings", "prompt1:4,prompt1_actonly:5"),
    "reflexion_webshop_base_prompt.jsonl": (
        1_877, "de1b12540e4be52a2ce7038e0865d7992ad4c626b8a2ee6c8c9fb5df582fe4a8",
        _REFLEXION + "webshop_runs/base_prompt.txt", "text", "webshop_base_prompt"),
    "reflexion_webshop_reflection_few_shot_examples.jsonl": (
        4_789, "0a1cb6a59c1700cbe5b956c6e0054da1670015dbde2f2c3d4decb65a9fcdc169",
        _REFLEXION + "webshop_runs/reflection_few_shot_examples.txt", "text", "webshop_reflection_few_shot_examples"),
    "reflexion_alfworld_few_shot_examples.jsonl": (
        4_224, "6eb8c3ff2513f2be3856789f26877cfa9e70b2cea5c93e9a91178558f25965c5",
        _REFLEXION + "alfworld_runs/reflexion_few_shot_examples.txt", "text", "alfworld_reflexion_few_shot_examples"),
}


def _prompt_jsonl(source: bytes, how: str, name: str) -> bytes:
    """The JSONL record(s) of ../shared/datasets/README.md's rule for each prompt file, from the upstream bytes."""
    import ast
    import json

    if how == "json-object":
        rows = [{"key": k, "prompt": v} for k, v in json.loads(source).items()]
    elif how == "text":
        rows = [{"name": name, "text": source.decode("utf-8")}]
    elif how == "notebook-strings":  # string literals assigned in given notebook code cells (no code is kept)
        cells = json.loads(source)["cells"]
        rows = []
        for item in name.split(","):
            var, cell = item.split(":")
            tree = ast.parse("".join(cells[int(cell)]["source"]))
            value = next(ast.literal_eval(n.value) for n in ast.walk(tree) if isinstance(n, ast.Assign)
                         and any(getattr(t, "id", None) == var for t in n.targets))
            rows.append({"name": var, "cell": int(cell), "prompt": value})
    else:
        raise ValueError(how)
    return "".join(json.dumps(r) + "\n" for r in rows).encode("utf-8")


def fetch_agent_prompts(dest: Path, shared: Path, download: bool = True) -> list[str]:
    """Place ReAct's and Reflexion's few-shot prompt files under ``dest/agent_prompts`` (copied from
    ``shared/agent_prompts`` or rebuilt from the upstream files at the pinned commits); each is kept only when
    its size and sha256 match :data:`AGENT_PROMPTS`. One line per file; ``ERR`` lines when one is missing."""
    import json

    lines, record = [], {}
    folder = dest / AGENT_PROMPTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    for name, (size, sha, url, how, arg) in AGENT_PROMPTS.items():
        target = folder / name
        record[name] = {"bytes": size, "sha256": sha, "source": url, "built_as": how}
        if target.is_file() and hashlib.sha256(target.read_bytes()).hexdigest() == sha:
            lines.append(f"ok  {AGENT_PROMPTS_DIR}/{name}  (already there)")
            continue
        try:
            source = shared / AGENT_PROMPTS_DIR / name
            if source.is_file():
                data, origin = source.read_bytes(), str(source)
            elif download:
                with urllib.request.urlopen(url, timeout=30) as resp:  # pinned https URL
                    data, origin = _prompt_jsonl(resp.read(), how, arg), url
            else:
                raise RuntimeError(f"not in {shared / AGENT_PROMPTS_DIR} and downloads are off")
            got = hashlib.sha256(data).hexdigest()
            if len(data) != size or got != sha:
                raise RuntimeError(f"got {len(data):,} bytes sha256 {got[:12]}..., expected {size:,} bytes {sha[:12]}...")
            target.write_bytes(data)
            lines.append(f"ok  {AGENT_PROMPTS_DIR}/{name}  ({origin})")
        except Exception as exc:  # noqa: BLE001 - one line per file; the agents refuse to run without it
            lines.append(f"ERR {AGENT_PROMPTS_DIR}/{name}: {type(exc).__name__}: {exc}")
    (folder / "provenance.json").write_text(json.dumps(record, indent=1) + "\n")
    return lines
