"""The tests' murmur2 agrees with Kafka's own test vectors (UtilsTest.testMurmur2)."""

from tests.helpers.murmur2 import murmur2, partition_for


def test_murmur2_matches_kafka_vectors() -> None:
    vectors = {
        b"21": -973932308,
        b"foobar": -790332482,
        b"a-little-bit-long-string": -985981536,
        b"a-little-bit-longer-string": -1486304829,
        b"abc": 479470107,
    }
    for data, want in vectors.items():
        assert murmur2(data) == want, data


def test_partition_for_is_positive_modulo() -> None:
    assert partition_for(b"21", 6) == (-973932308 & 0x7FFFFFFF) % 6
