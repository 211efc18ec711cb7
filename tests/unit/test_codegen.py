"""tools.codegen: spec parsing, overrides, determinism and the --check mode."""

from __future__ import annotations

from pathlib import Path

from tools.codegen import __main__ as cli
from tools.codegen.jsonc import loads, strip_comments
from tools.codegen.naming import attr_name
from tools.codegen.schema import MAX_VERSION, Versions, specs_by_name


def test_comments_stripped_outside_strings_only() -> None:
    text = '// header\n{ "a": "http://x//y", // trailing\n  "b": "q\\"//" }\n// end'
    assert loads(text) == {'a': 'http://x//y', 'b': 'q"//'}
    assert strip_comments('x // c\ny').count('\n') == 1


def test_versions() -> None:
    assert Versions.parse('3+') == Versions(3, MAX_VERSION)
    assert Versions.parse('0-12') == Versions(0, 12)
    assert Versions.parse('5') == Versions(5, 5)
    assert not Versions.parse('none') and 4 not in Versions.parse('none')
    assert 2 in Versions.parse('0-2') and 3 not in Versions.parse('0-2')


def test_attr_names() -> None:
    assert attr_name('ThrottleTimeMs') == 'throttle_time_ms'
    assert attr_name('V3AndBelowTopics') == 'v3_and_below_topics'


def test_produce_override() -> None:
    specs = specs_by_name()
    for name in ('ProduceRequest', 'ProduceResponse'):
        assert (specs[name].valid.lo, specs[name].valid.hi) == (0, 13)
    v0 = [f.attr for f in specs['ProduceRequest'].root.fields if 0 in f.versions]
    assert v0 == ['acks', 'timeout_ms', 'topic_data']
    resp_v0 = [f.attr for f in specs['ProduceResponse'].root.fields if 0 in f.versions]
    assert resp_v0 == ['responses']


def test_generation_is_deterministic_and_committed() -> None:
    files = cli.generate()
    assert files == cli.generate()
    assert cli.check(cli.DEFAULT_OUT, files) == []


def test_check_reports_missing_differing_and_extra(tmp_path: Path) -> None:
    files = {'__init__.py': 'x = 1\n', 'a.py': 'a = 1\n', 'b.py': 'b = 1\n'}
    assert cli.write(tmp_path, files) == 3
    assert cli.check(tmp_path, files) == []
    (tmp_path / 'a.py').write_text('a = 2\n')
    (tmp_path / 'b.py').unlink()
    (tmp_path / 'stale.py').write_text('')
    assert cli.check(tmp_path, files) == [f'differs: {tmp_path / "a.py"}',
                                          f'missing: {tmp_path / "b.py"}',
                                          f'extra: {tmp_path / "stale.py"}']
    cli.write(tmp_path, files)
    assert cli.check(tmp_path, files) == []
    assert not (tmp_path / 'stale.py').exists()
