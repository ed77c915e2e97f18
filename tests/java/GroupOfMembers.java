import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.BrokenBarrierException;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

// The members of one group, as applications run them (tests/bench/java_group.py drives it):
// `members` consumers, one thread each, are created, then subscribe to `topic` in `group` all
// at once and poll until the group has settled: every member holds partitions, all
// `partitions` are held, none holds more than one more than another, for a second on end.
// Then, together, each commits its own partitions with commitSync `commits` times in a row
// (offset n at the n-th), as an application commits after each batch, and closes.
//
// Arguments: bootstrap group topic partitions members commits protocol, the protocol one of
// eager (classic, RangeAssignor), cooperative (classic, CooperativeStickyAssignor) or consumer
// (group.protocol=consumer, the coordinator's default assignor).
// Prints one JSON line: {"settled_ms": from the subscriptions to the group's lasting balance,
// "seconds": wall time of the commit loops, "latencies_us": [...]}.
public final class GroupOfMembers {
    private static final long SETTLE_MS = 1_000;
    private static final long TIMEOUT_MS = 120_000;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], group = args[1], topic = args[2];
        int partitions = Integer.parseInt(args[3]);
        int members = Integer.parseInt(args[4]);
        int commits = Integer.parseInt(args[5]);
        String protocol = args[6];

        AtomicIntegerArray held = new AtomicIntegerArray(members);
        AtomicLong settledSince = new AtomicLong(Long.MAX_VALUE);
        CyclicBarrier subscribe = new CyclicBarrier(members + 1);
        CyclicBarrier start = new CyclicBarrier(members + 1);
        long[][] latencies = new long[members][commits];
        List<Throwable> failures = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < members; i++) {
            int me = i;
            Thread t = new Thread(() -> {
                try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(properties(bootstrap, group, protocol, me))) {
                    subscribe.await(TIMEOUT_MS, TimeUnit.MILLISECONDS);
                    consumer.subscribe(List.of(topic));
                    long deadline = System.currentTimeMillis() + TIMEOUT_MS;
                    while (!settledFor(held, settledSince, partitions)) {
                        if (System.currentTimeMillis() > deadline) {
                            throw new IllegalStateException("the group did not settle within " + TIMEOUT_MS + " ms");
                        }
                        consumer.poll(Duration.ofMillis(20));
                        held.set(me, consumer.assignment().size());
                        settle(held, settledSince, partitions);
                    }
                    start.await(TIMEOUT_MS, TimeUnit.MILLISECONDS);
                    for (int n = 0; n < commits; n++) {
                        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                        for (TopicPartition tp : consumer.assignment()) {
                            offsets.put(tp, new OffsetAndMetadata(n + 1));
                        }
                        long began = System.nanoTime();
                        consumer.commitSync(offsets);
                        latencies[me][n] = (System.nanoTime() - began) / 1_000;
                    }
                } catch (Throwable e) {
                    synchronized (failures) {
                        failures.add(e);
                    }
                    subscribe.reset();  // the others stop waiting for this one
                    start.reset();
                }
            }, "member-" + i);
            threads.add(t);
            t.start();
        }
        long subscribed, settled;
        try {
            subscribe.await(TIMEOUT_MS, TimeUnit.MILLISECONDS);
            subscribed = System.currentTimeMillis();
            start.await(TIMEOUT_MS, TimeUnit.MILLISECONDS);
            settled = settledSince.get() - subscribed;
        } catch (BrokenBarrierException | TimeoutException e) {
            Thread.sleep(100);      // the member that broke it records why
            synchronized (failures) {
                (failures.isEmpty() ? e : failures.get(0)).printStackTrace();
            }
            System.exit(1);
            return;
        }
        long began = System.nanoTime();
        for (Thread t : threads) {
            t.join(TIMEOUT_MS);
        }
        double seconds = (System.nanoTime() - began) / 1e9;
        if (!failures.isEmpty()) {
            failures.get(0).printStackTrace();
            System.exit(1);
        }
        StringBuilder out = new StringBuilder("{\"settled_ms\":").append(settled)
            .append(",\"seconds\":").append(seconds).append(",\"latencies_us\":[");
        for (int i = 0; i < members; i++) {
            for (int n = 0; n < commits; n++) {
                if (i > 0 || n > 0) out.append(',');
                out.append(latencies[i][n]);
            }
        }
        System.out.println(out.append("]}"));
    }

    private static Properties properties(String bootstrap, String group, String protocol, int member) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("client.id", "member-" + member);
        p.put("enable.auto.commit", "false");
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        switch (protocol) {
            case "eager" -> p.put("partition.assignment.strategy", RangeAssignor.class.getName());
            case "cooperative" -> p.put("partition.assignment.strategy", CooperativeStickyAssignor.class.getName());
            case "consumer" -> p.put("group.protocol", "consumer");
            default -> throw new IllegalArgumentException("unknown protocol " + protocol);
        }
        return p;
    }

    // Whether every member holds partitions, all are held, and none holds more than one more than another.
    private static boolean balanced(AtomicIntegerArray held, int partitions) {
        int sum = 0, least = Integer.MAX_VALUE, most = 0;
        for (int i = 0; i < held.length(); i++) {
            int n = held.get(i);
            sum += n;
            least = Math.min(least, n);
            most = Math.max(most, n);
        }
        return least > 0 && sum == partitions && most - least <= 1;
    }

    private static void settle(AtomicIntegerArray held, AtomicLong settledSince, int partitions) {
        if (balanced(held, partitions)) {
            settledSince.compareAndSet(Long.MAX_VALUE, System.currentTimeMillis());
        } else {
            settledSince.set(Long.MAX_VALUE);
        }
    }

    private static boolean settledFor(AtomicIntegerArray held, AtomicLong settledSince, int partitions) {
        long since = settledSince.get();
        return balanced(held, partitions) && since != Long.MAX_VALUE && System.currentTimeMillis() - since >= SETTLE_MS;
    }
}
