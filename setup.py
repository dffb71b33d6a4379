"""Packaging: the checkout's top-level folders install under the one import name ``agentic_repro``.

``agentic_repro.harness`` is ``harness/``, ``agentic_repro.dyflow`` is ``dyflow/``, ... (``package_dir``: the wheel
copies the real folders; in the checkout ``agentic_repro/<folder>`` is a link to ``../<folder>``, which is what an
editor or type checker follows). The Hydra configs install as ``agentic_repro/configs`` beside them, so
``harness/run.py``'s ``config_path="../configs"`` finds them in a wheel as in the checkout. No generic name
(``harness``, ``scripts``, ``training``...) becomes a top-level module: an editable install maps only
``agentic_repro`` (to the checkout's ``agentic_repro/``). ``tests/`` and ``bench/`` are not shipped.
"""
from setuptools import find_packages, setup

PACKAGES = ["harness", "evaluators", "baselines", "denoiseflow", "dyflow", "auq", "dynagraph", "agents", "envs",
            "training", "scripts", "viewer"]

packages, package_dir = ["agentic_repro"], {"agentic_repro": "agentic_repro"}
for pkg in find_packages(include=PACKAGES + [f"{p}.*" for p in PACKAGES]):
    packages.append(f"agentic_repro.{pkg}")
    package_dir[f"agentic_repro.{pkg}"] = pkg.replace(".", "/")
packages.append("agentic_repro.configs")
package_dir["agentic_repro.configs"] = "configs"

setup(packages=packages, package_dir=package_dir, include_package_data=False, package_data={
    "agentic_repro.configs": ["*.yaml", "*/*.yaml"],
    "agentic_repro.scripts": ["experiments/*.yaml"],
    "agentic_repro.viewer": ["templates/*.html", "static/*"],
    "agentic_repro.evaluators": ["deepresearch_prompts/*.txt"],
    "agentic_repro.baselines.autoflow": ["prompts/*.json"],
    "": ["*.md", "*.json"],
})
