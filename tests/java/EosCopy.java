// The Java client's own consume-transform-produce loop, as exactly-once applications write
// it: a subscribed consumer (read_committed), a transactional producer, each batch of
// records produced and its offsets sent with sendOffsetsToTransaction(offsets,
// consumer.groupMetadata()) in one transaction; every ABORT_EVERY-th transaction is aborted
// and the consumer rewound to the group's committed offsets, as an application retrying its
// transaction does. Stops once EXPECTED records went out in committed transactions, and
// prints "copied N aborted M". Used by tests/e2e/test_exactly_once.py through kgc.
//
//   java EosCopy BOOTSTRAP GROUP INPUT OUTPUT EXPECTED GROUP_PROTOCOL ABORT_EVERY

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class EosCopy {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], group = args[1], input = args[2], output = args[3];
        long expected = Long.parseLong(args[4]);
        String groupProtocol = args[5];
        int abortEvery = Integer.parseInt(args[6]);

        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        c.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, groupProtocol);
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        c.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 20);      // many small transactions, as a loop's
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "eos-copy-" + group);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);

        long copied = 0;
        int transactions = 0, aborted = 0;
        long deadline = System.currentTimeMillis() + 240_000;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(c);
             KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            consumer.subscribe(List.of(input));
            while (copied < expected && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    continue;
                }
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    producer.send(new ProducerRecord<>(output, r.key(), r.value()));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                transactions++;
                if (abortEvery > 0 && transactions % abortEvery == 0) {
                    producer.abortTransaction();
                    aborted++;
                    // Back to what the group committed: the aborted offsets must not be there.
                    Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(consumer.assignment());
                    for (TopicPartition tp : consumer.assignment()) {
                        OffsetAndMetadata at = committed.get(tp);
                        consumer.seek(tp, at == null ? 0 : at.offset());
                    }
                } else {
                    producer.commitTransaction();
                    copied += records.count();
                }
            }
        }
        System.out.println("copied " + copied + " aborted " + aborted);
        System.exit(copied == expected ? 0 : 1);
    }
}
