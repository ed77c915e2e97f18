// What the kafkajs group scripts share: a bounded run, bounded waits, a sequenced
// producer and a consumer that records what it takes and commits each batch before the next.
import { Kafka, logLevel } from "kafkajs";

process.env.KAFKAJS_NO_PARTITIONER_WARNING = "1";

export function client(bootstrap) {
  return new Kafka({ clientId: "kgc-e2e-kafkajs", brokers: [bootstrap], logLevel: logLevel.WARN });
}

// The whole script fails (exit 2) if it runs past `ms`, whatever it waits on.
export function limitRun(ms, what) {
  setTimeout(() => {
    console.error(`${what}: overall time limit reached`);
    process.exit(2);
  }, ms).unref();
}

// Resolves with the time waited once `condition()` holds; throws after `waitMs`.
export async function waitUntil(condition, what, waitMs) {
  const start = Date.now();
  while (!condition()) {
    if (Date.now() - start > waitMs) throw new Error(`not after ${waitMs} ms: ${what()}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return Date.now() - start;
}

// COUNT records per partition, values "<partition>:<sequence>" from sequence FROM. Not
// idempotent: Tansu answers kafkajs's InitProducerId (v1, no transactional id) with
// UNKNOWN_SERVER_ERROR even when asked directly; librdkafka's idempotent producer works.
export async function produceSequenced(kafka, topic, partitions, from, count) {
  const producer = kafka.producer({ maxInFlightRequests: 1 });
  await producer.connect();
  const messages = [];
  for (let seq = from; seq < from + count; seq++) {
    for (let p = 0; p < partitions; p++) messages.push({ partition: p, value: `${p}:${seq}` });
  }
  await producer.send({ topic, acks: -1, messages });
  await producer.disconnect();
}

// A subscribed consumer that appends what it takes to `consumed` and commits each batch
// before taking more (the tests check committed offsets).
export async function startMember(kafka, { groupId, topic, name, consumed, retries }) {
  const member = { name, assignment: [], consumer: kafka.consumer({
    groupId, sessionTimeout: 6000, heartbeatInterval: 100, maxWaitTimeInMs: 100, retry: { retries } }) };
  member.consumer.on(member.consumer.events.GROUP_JOIN, ({ payload }) => {
    member.assignment = payload.memberAssignment[topic] ?? [];
  });
  await member.consumer.connect();
  await member.consumer.subscribe({ topic, fromBeginning: true });
  await member.consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch }) => {
      for (const m of batch.messages) {
        consumed.push({ member: name, partition: batch.partition, offset: Number(m.offset), value: m.value.toString() });
      }
      await member.consumer.commitOffsets([
        { topic, partition: batch.partition, offset: String(BigInt(batch.lastOffset()) + 1n) },
      ]);
    },
  });
  return member;
}

// Every partition owned once by `members`, each owning some.
export function ownsAllPartitions(members, partitions) {
  const owned = members.flatMap((m) => m.assignment).sort((a, b) => a - b);
  return members.every((m) => m.assignment.length > 0)
    && owned.length === partitions && owned.every((p, i) => p === i);
}
