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
