from agentic_repro.harness.cache import ResponseCache, cache_key

MSG = [{"role": "user", "content": "hi"}]


def test_sampled_requests_are_distinct_entries():
    base = {"temperature": 0.7, "max_tokens": 10, "seed": 1}
    keys = {cache_key("b", MSG, base, i) for i in range(5)}
    assert len(keys) == 5  # inspect_ai #2580: five draws must not collapse into one


def test_every_sampling_parameter_changes_the_key():
    base = {"temperature": 0.7, "top_p": 1.0, "max_tokens": 10, "seed": 1, "stop": ["x"]}
    k0 = cache_key("b", MSG, base, 0)
    for field, value in [("temperature", 0.0), ("top_p", 0.9), ("max_tokens", 11), ("seed", 2), ("stop", ["y"])]:
        assert cache_key("b", MSG, {**base, field: value}, 0) != k0, field
    assert cache_key("other-model", MSG, base, 0) != k0
    assert cache_key("b", [{"role": "user", "content": "hi!"}], base, 0) != k0
    assert cache_key("b", MSG, dict(reversed(list(base.items()))), 0) == k0  # order-insensitive


def test_modes(tmp_path):
    path = tmp_path / "c.sqlite"
    rw = ResponseCache(path, "read-write")
    rw.put("k", {"v": 1})
    assert rw.get("k") == {"v": 1} and len(rw) == 1
    rw.close()
    ro = ResponseCache(path, "read-only")
    ro.put("k2", {"v": 2})
    assert ro.get("k") == {"v": 1} and ro.get("k2") is None
    ro.close()
    off = ResponseCache(path, "off")
    assert off.get("k") is None


def test_bad_mode_names_the_fix(tmp_path):
    import pytest

    with pytest.raises(ValueError, match="cache.mode"):
        ResponseCache(tmp_path / "c.sqlite", "sometimes")  # type: ignore[arg-type]


def test_a_put_is_visible_to_another_connection_at_once(tmp_path):
    """A completion is on disk before its ledger line is written (a SIGKILL right after keeps it)."""
    import asyncio

    path = tmp_path / "c.sqlite"

    async def main():
        c = ResponseCache(path)
        c.put("k", {"v": 1})
        c.put("k2", {"v": 2})
        other = ResponseCache(path, "read-only")  # another process's view
        seen = (other.get("k"), other.get("k2"))
        other.close()
        c.put("k3", {"v": 3})
        c.close()  # a pending commit is not lost at close
        return seen

    assert asyncio.run(main()) == ({"v": 1}, {"v": 2})
    assert ResponseCache(path).get("k3") == {"v": 3}
