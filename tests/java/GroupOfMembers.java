import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.BrokenBarrierException;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ThreadLocalRandom;
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
// (offset n at the n-th), as an application commits after each batch. With churn (the last two
// arguments), the members then keep polling while a new member joins, until the group has
// settled again, and then while the first member leaves (closes), until it has settled once
// more, each change `quiet_ms` and a random spell of up to `jitter_ms` after the group last
// settled; then all close.
//
// Arguments: bootstrap group topic partitions members commits protocol [quiet_ms jitter_ms],
// the protocol one of eager (classic, RangeAssignor), cooperative (classic,
// CooperativeStickyAssignor) or consumer (group.protocol=consumer, the coordinator's default
// assignor).
// Prints one JSON line: {"settled_ms": from the subscriptions to the group's lasting balance,
// "joined_ms": from the newcomer's subscribe to the balance that includes it, "left_ms": from
// the first member's close to the balance without it (both -1 without churn), "seconds": wall
// time of the commit loops, "latencies_us": [...]}.
public final class GroupOfMembers {
    private static final long SETTLE_MS = 1_000;
    private static final long TIMEOUT_MS = 120_000;

    // Which members are in the group and what each holds; SETTLED_SINCE is when the group
    // last became balanced (MAX_VALUE: it is not). A membership change and the reset of
    // SETTLED_SINCE happen under the lock, so a member's balance check made before the
    // change cannot mark the changed group settled.
    private static final Object LOCK = new Object();
    private static AtomicIntegerArray held;
    private static AtomicIntegerArray present;
    private static final AtomicLong SETTLED_SINCE = new AtomicLong(Long.MAX_VALUE);
    private static volatile boolean done;
    private static volatile boolean firstLeaves;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], group = args[1], topic = args[2];
        int partitions = Integer.parseInt(args[3]);
        int members = Integer.parseInt(args[4]);
        int commits = Integer.parseInt(args[5]);
        String protocol = args[6];
        boolean churn = args.length > 7;
        long quietMs = churn ? Long.parseLong(args[7]) : 0;
        long jitterMs = churn ? Long.parseLong(args[8]) : 0;

        held = new AtomicIntegerArray(members + 1);
        present = new AtomicIntegerArray(members + 1);
        for (int i = 0; i < members; i++) {
            present.set(i, 1);
        }
        CyclicBarrier subscribe = new CyclicBarrier(members + 1);
        CyclicBarrier start = new CyclicBarrier(members + 1);
        CountDownLatch committed = new CountDownLatch(members);
        CountDownLatch newcomerSubscribes = new CountDownLatch(1);
        long[][] latencies = new long[members][commits];
        List<Throwable> failures = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < members; i++) {
            int me = i;
            threads.add(member(me, failures, () -> {
                try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(properties(bootstrap, group, protocol, me))) {
                    subscribe.await(TIMEOUT_MS, TimeUnit.MILLISECONDS);
                    consumer.subscribe(List.of(topic));
                    long deadline = System.currentTimeMillis() + TIMEOUT_MS;
                    while (!settledFor(partitions)) {
                        if (System.currentTimeMillis() > deadline) {
                            throw new IllegalStateException("the group did not settle within " + TIMEOUT_MS + " ms");
                        }
                        pollOnce(consumer, me, partitions);
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
                    committed.countDown();
                    while (churn && !done && !(me == 0 && firstLeaves)) {
                        pollOnce(consumer, me, partitions);
                    }
                }
            }, committed, subscribe, start));
        }
        if (churn) {
            threads.add(member(members, failures, () -> {
                try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(properties(bootstrap, group, protocol, members))) {
                    newcomerSubscribes.await();
                    consumer.subscribe(List.of(topic));
                    while (!done) {
                        pollOnce(consumer, members, partitions);
                    }
                }
            }, committed, subscribe, start));
        }
        long subscribed, settled;
        try {
            subscribe.await(TIMEOUT_MS, TimeUnit.MILLISECONDS);
            subscribed = System.currentTimeMillis();
            start.await(TIMEOUT_MS, TimeUnit.MILLISECONDS);
            settled = SETTLED_SINCE.get() - subscribed;
        } catch (BrokenBarrierException | TimeoutException e) {
            fail(e, failures);
            return;
        }
        long began = System.nanoTime();
        if (!committed.await(TIMEOUT_MS, TimeUnit.MILLISECONDS) || !failures.isEmpty()) {
            fail(new IllegalStateException("the members did not commit within " + TIMEOUT_MS + " ms"), failures);
        }
        double seconds = (System.nanoTime() - began) / 1e9;
        long joined = -1, left = -1;
        if (churn) {
            joined = change(members, partitions, quietMs, jitterMs, failures, newcomerSubscribes::countDown);
            left = change(0, partitions, quietMs, jitterMs, failures, () -> firstLeaves = true);
            done = true;
        }
        for (Thread t : threads) {
            t.join(TIMEOUT_MS);
        }
        if (!failures.isEmpty()) {
            fail(null, failures);
        }
        StringBuilder out = new StringBuilder("{\"settled_ms\":").append(settled)
            .append(",\"joined_ms\":").append(joined).append(",\"left_ms\":").append(left)
            .append(",\"seconds\":").append(seconds).append(",\"latencies_us\":[");
        for (int i = 0; i < members; i++) {
            for (int n = 0; n < commits; n++) {
                if (i > 0 || n > 0) out.append(',');
                out.append(latencies[i][n]);
            }
        }
        System.out.println(out.append("]}"));
    }

    private interface Body {
        void run() throws Exception;
    }

    // A member's thread: a failure is recorded and stops the others waiting for this one.
    private static Thread member(int me, List<Throwable> failures, Body body, CountDownLatch committed,
                                 CyclicBarrier... barriers) {
        Thread t = new Thread(() -> {
            try {
                body.run();
            } catch (Throwable e) {
                synchronized (failures) {
                    failures.add(e);
                }
                for (CyclicBarrier barrier : barriers) {
                    barrier.reset();
                }
                while (committed.getCount() > 0) {
                    committed.countDown();
                }
            }
        }, "member-" + me);
        t.start();
        return t;
    }

    private static void fail(Throwable cause, List<Throwable> failures) throws InterruptedException {
        Thread.sleep(100);      // the member that failed records why
        synchronized (failures) {
            (failures.isEmpty() ? cause : failures.get(0)).printStackTrace();
        }
        System.exit(1);
    }

    private static void pollOnce(KafkaConsumer<byte[], byte[]> consumer, int me, int partitions) {
        consumer.poll(Duration.ofMillis(20));
        held.set(me, consumer.assignment().size());
        settle(partitions);
    }

    // After `quietMs` and up to `jitterMs` more, member `who` joins (the newcomer) or leaves (the
    // first member) as `act` makes it; the time from then until the group is balanced again, as it
    // then stays for a second.
    private static long change(int who, int partitions, long quietMs, long jitterMs, List<Throwable> failures,
                               Runnable act) throws Exception {
        Thread.sleep(quietMs + (jitterMs > 0 ? ThreadLocalRandom.current().nextLong(jitterMs) : 0));
        long began;
        synchronized (LOCK) {
            boolean joins = present.get(who) == 0;
            present.set(who, joins ? 1 : 0);
            if (!joins) {
                held.set(who, 0);
            }
            SETTLED_SINCE.set(Long.MAX_VALUE);
            began = System.currentTimeMillis();
        }
        act.run();
        long deadline = began + TIMEOUT_MS;
        while (!settledFor(partitions)) {
            if (System.currentTimeMillis() > deadline || !failures.isEmpty()) {
                fail(new IllegalStateException("the group did not settle after member " + who
                                               + " came or went within " + TIMEOUT_MS + " ms"), failures);
            }
            Thread.sleep(10);
        }
        return SETTLED_SINCE.get() - began;
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

    // Whether every present member holds partitions, all are held, and none holds more than one more than another.
    private static boolean balanced(int partitions) {
        int sum = 0, least = Integer.MAX_VALUE, most = 0;
        for (int i = 0; i < held.length(); i++) {
            if (present.get(i) == 0) {
                continue;
            }
            int n = held.get(i);
            sum += n;
            least = Math.min(least, n);
            most = Math.max(most, n);
        }
        return least > 0 && sum == partitions && most - least <= 1;
    }

    private static void settle(int partitions) {
        synchronized (LOCK) {
            if (balanced(partitions)) {
                SETTLED_SINCE.compareAndSet(Long.MAX_VALUE, System.currentTimeMillis());
            } else {
                SETTLED_SINCE.set(Long.MAX_VALUE);
            }
        }
    }

    private static boolean settledFor(int partitions) {
        synchronized (LOCK) {
            long since = SETTLED_SINCE.get();
            return balanced(partitions) && since != Long.MAX_VALUE && System.currentTimeMillis() - since >= SETTLE_MS;
        }
    }
}
