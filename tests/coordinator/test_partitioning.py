import tracemalloc

import pytest

from coordinator.partitioning import java_string_hash, partition_for


@pytest.mark.parametrize(("group_id", "java_hash", "partition"), [
    ("test", 3556498, 48),
    ("my-group", -1906497762, 12),
    ("console-consumer-12345", 158455506, 6),
    ("grüppe", -1233264812, 12),
    ("g😀", 1871882, 32),                     # a non-BMP character hashes as two UTF-16 units
    ("polygenelubricants", -2147483648, 0),   # Utils.abs(MIN_VALUE) is 0, not 48 or -48
    ("", 0, 0),
])
def test_partition_for_matches_kafka(group_id, java_hash, partition):
    assert java_string_hash(group_id) == java_hash
    assert partition_for(group_id) == partition


def test_partition_count_is_configurable():
    assert partition_for("test", 7) == 3556498 % 7


def test_long_group_ids_are_placed_as_kafka_places_them_and_not_kept_by_the_cache():
    # The placement cache holds its ids: 65,536 ids of 32 KB, a few DescribeGroups' worth,
    # would hold 2 GiB. Longer ids are hashed each time instead.
    long_id = "grüppe-" + "x" * 1_000
    assert partition_for(long_id) == abs(java_string_hash(long_id)) % 50
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(10):
            partition_for(f"{i}-" + "x" * 20_000)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 50_000        # not 10 ids of 20 KB
