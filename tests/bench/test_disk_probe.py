from coordinator.bench.disk import APPEND_BYTES, FsyncProbe


def test_the_probe_times_every_append_with_one_writer_or_several_at_once(tmp_path):
    with FsyncProbe(tmp_path) as probe:
        alone = probe.latencies(count=12)
        together = probe.latencies(count=12, writers=3)
        pooled = probe.latencies(count=6, into=alone, writers=2)
        size = next(tmp_path.iterdir()).stat().st_size
    assert pooled is alone
    assert (len(alone), len(together)) == (18, 12)
    assert size == 30 * APPEND_BYTES    # every append landed, none overwrote another
    assert together.percentile_ms(0) > 0
