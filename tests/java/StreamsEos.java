// A Kafka Streams application with processing.guarantee=exactly_once_v2: copies `input`
// to `output` unchanged, and stops once it
// has processed `expected` records (close() commits the last transaction). Prints
// "processed N" when done. Used by tests/e2e/test_exactly_once.py through kgc.
// GROUP_PROTOCOL (default classic) is Streams' `group.protocol`. An application that fails
// (on `streams`, KIP-1071, which kgc does not serve) stops at once, prints
// "failed: <the root error>" and exits 2.
//
//   java StreamsEos BOOTSTRAP APPLICATION_ID INPUT OUTPUT EXPECTED STATE_DIR [GROUP_PROTOCOL]

import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;

public class StreamsEos {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], applicationId = args[1], input = args[2], output = args[3];
        long expected = Long.parseLong(args[4]);
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[5]);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.ByteArraySerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.ByteArraySerde.class);
        props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, args.length > 6 ? args[6] : "classic");

        AtomicLong processed = new AtomicLong();
        CountDownLatch done = new CountDownLatch(1);
        StreamsBuilder builder = new StreamsBuilder();
        builder.<byte[], byte[]>stream(input)
            .peek((k, v) -> { if (processed.incrementAndGet() >= expected) done.countDown(); })
            .to(output);
        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        streams.setUncaughtExceptionHandler(e -> {
            e.printStackTrace();
            failure.compareAndSet(null, e);
            done.countDown();
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.start();
        boolean finished = done.await(240, TimeUnit.SECONDS);
        if (failure.get() != null) {
            streams.close(Duration.ofSeconds(30));
            Throwable root = failure.get();
            while (root.getCause() != null) {
                root = root.getCause();
            }
            System.out.println("failed: " + root);
            System.exit(2);
        }
        // Let one more commit interval pass, then close: close() commits the open transaction.
        Thread.sleep(500);
        streams.close(Duration.ofSeconds(60));
        System.out.println("processed " + processed.get());
        System.exit(finished ? 0 : 1);
    }
}
