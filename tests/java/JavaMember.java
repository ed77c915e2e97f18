// One unmodified Java KafkaConsumer (kafka-clients) as a consumer-group member, driven line by
// line over stdin/stdout by tests/support/java_client.py, so that the tests treat it like their
// Python-reachable members. One file, no build tool: it runs as it is through the JVM's
// source launcher, and the tests compile it once with javac (tests/support/kafka_dist.py):
//
//   java -cp "<kafka jars>/*" tests/java/JavaMember.java BOOTSTRAP GROUP TOPIC [key=value ...]
//
// key=value pairs are consumer properties (group.protocol, partition.assignment.strategy,
// group.instance.id, security ...), except `commit=sync|async`, how `commit` commits.
//
// Commands, one per line; each gets one JSON line back:
//   poll MS     -> {"records":[[partition,offset,"base64 value"],...],"assigned":[..],"revoked":[..],"lost":[..]}
//                  (the rebalance listener's calls since the last poll, partitions as numbers)
//   assignment  -> {"assignment":[partitions]}
//   commit [P=O ...] -> {"committed":{"partition":offset,...}}  what was consumed, or the offsets
//                  given; sync: once the coordinator acknowledged; async: once sent (an async
//                  failure is reported by a later poll as "commit_error")
//   close       -> {"closed":true}, then the process exits
// A failure answers {"error":"..."} and the member keeps running.
//
// Like a careful application, the rebalance listener commits what was consumed from partitions
// before they are revoked, so their next owner resumes exactly where this member stopped.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.StringJoiner;
import java.util.TreeSet;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class JavaMember {
    private final KafkaConsumer<byte[], byte[]> consumer;
    private final boolean asyncCommits;
    private final String topic;
    // Positions consumed and not yet committed, by partition: what `commit` and a revocation commit.
    private final Map<TopicPartition, OffsetAndMetadata> pending = new HashMap<>();
    private final List<String> events = new ArrayList<>();

    private JavaMember(Properties props, boolean asyncCommits, String topic) {
        this.consumer = new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        this.asyncCommits = asyncCommits;
        this.topic = topic;
        consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
            @Override public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                Map<TopicPartition, OffsetAndMetadata> revoked = new HashMap<>();
                for (TopicPartition tp : partitions) {
                    OffsetAndMetadata at = pending.remove(tp);
                    if (at != null) revoked.put(tp, at);
                }
                if (!revoked.isEmpty()) consumer.commitSync(revoked);
                events.add("\"revoked\":" + numbers(partitions));
            }
            @Override public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                events.add("\"assigned\":" + numbers(partitions));
            }
            @Override public void onPartitionsLost(Collection<TopicPartition> partitions) {
                for (TopicPartition tp : partitions) pending.remove(tp);
                events.add("\"lost\":" + numbers(partitions));
            }
        });
    }

    private static String numbers(Collection<TopicPartition> partitions) {
        StringJoiner out = new StringJoiner(",", "[", "]");
        new TreeSet<>(partitions.stream().map(TopicPartition::partition).toList())
            .forEach(p -> out.add(p.toString()));
        return out.toString();
    }

    private static String quote(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n") + "\"";
    }

    private String poll(long ms) {
        StringJoiner records = new StringJoiner(",", "[", "]");
        for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(ms))) {
            String value = r.value() == null ? "null" : quote(Base64.getEncoder().encodeToString(r.value()));
            records.add("[" + r.partition() + "," + r.offset() + "," + value + "]");
            pending.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
        }
        StringJoiner out = new StringJoiner(",", "{", "}");
        out.add("\"records\":" + records);
        events.forEach(out::add);
        events.clear();
        return out.toString();
    }

    private String assignment() {
        return "{\"assignment\":" + numbers(consumer.assignment()) + "}";
    }

    private String commit(String[] given) {
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        if (given.length > 1) {
            for (int i = 1; i < given.length; i++) {
                String[] po = given[i].split("=");
                TopicPartition tp = new TopicPartition(topic, Integer.parseInt(po[0]));
                offsets.put(tp, new OffsetAndMetadata(Long.parseLong(po[1])));
                pending.remove(tp);  // the application chose this partition's offset
            }
        } else {
            offsets.putAll(pending);
            pending.clear();
        }
        if (asyncCommits) {
            consumer.commitAsync(offsets, (done, error) -> {
                if (error != null) events.add("\"commit_error\":" + quote(error.toString()));
            });
        } else {
            consumer.commitSync(offsets);
        }
        StringJoiner out = new StringJoiner(",", "{", "}");
        offsets.forEach((tp, at) -> out.add("\"" + tp.partition() + "\":" + at.offset()));
        return "{\"committed\":" + out + "}";
    }

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, args[1]);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        boolean async = false;
        for (int i = 3; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            if (kv[0].equals("commit")) async = kv[1].equals("async");
            else props.put(kv[0], kv[1]);
        }
        JavaMember member = new JavaMember(props, async, args[2]);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] cmd = line.trim().split(" ");
            String answer;
            try {
                answer = switch (cmd[0]) {
                    case "poll" -> member.poll(Long.parseLong(cmd[1]));
                    case "assignment" -> member.assignment();
                    case "commit" -> member.commit(cmd);
                    case "close" -> {
                        member.consumer.close();
                        yield "{\"closed\":true}";
                    }
                    default -> "{\"error\":" + quote("unknown command " + cmd[0]) + "}";
                };
            } catch (Exception e) {
                answer = "{\"error\":" + quote(e.toString()) + "}";
            }
            System.out.println(answer);
            System.out.flush();
            if (cmd[0].equals("close")) return;
        }
        member.consumer.close();  // stdin closed: the test is gone, leave the group
    }
}
