// kafkajs through kgc: three consumers form a group, consume, one leaves, the other two take
// over, everyone commits, and a new consumer resumes at the committed offsets.
//
// Usage: node group.mjs BOOTSTRAP TOPIC GROUP PARTITIONS FIRST SECOND RESUME
// The topic must exist. The script produces (kafkajs producer, acks=all, one request in
// flight, through kgc) values "<partition>:<sequence>" and prints one JSON line on stdout with what each
// consumer received and what it saw of the group; tests/e2e/test_kafkajs.py judges it.
// Every wait is bounded; any failure exits non-zero.
import { Kafka, logLevel } from "kafkajs";

const [bootstrap, topic, groupId, partitionsArg, firstArg, secondArg, resumeArg] = process.argv.slice(2);
const partitions = Number(partitionsArg);
const [first, second, resume] = [firstArg, secondArg, resumeArg].map(Number);
const WAIT_MS = 30_000;

setTimeout(() => {
  console.error("kafkajs e2e: overall time limit reached");
  process.exit(2);
}, 90_000).unref();

process.env.KAFKAJS_NO_PARTITIONER_WARNING = "1";
const kafka = new Kafka({ clientId: "kgc-e2e-kafkajs", brokers: [bootstrap], logLevel: logLevel.WARN });
const consumed = [];

async function waitUntil(condition, what) {
  const start = Date.now();
  while (!condition()) {
    if (Date.now() - start > WAIT_MS) throw new Error(`not after ${WAIT_MS} ms: ${what()}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return Date.now() - start;
}

async function produce(fromSequence, count) {
  // Not idempotent: Tansu answers kafkajs's InitProducerId (v1, no transactional id) with
  // UNKNOWN_SERVER_ERROR even when asked directly; librdkafka's idempotent producer works.
  const producer = kafka.producer({ maxInFlightRequests: 1 });
  await producer.connect();
  const messages = [];
  for (let seq = fromSequence; seq < fromSequence + count; seq++) {
    for (let p = 0; p < partitions; p++) messages.push({ partition: p, value: `${p}:${seq}` });
  }
  await producer.send({ topic, acks: -1, messages });
  await producer.disconnect();
}

async function startMember(name) {
  const member = { name, assignment: [], joins: 0, consumer: kafka.consumer({
    groupId, sessionTimeout: 6000, heartbeatInterval: 100, maxWaitTimeInMs: 100, retry: { retries: 10 } }) };
  member.consumer.on(member.consumer.events.GROUP_JOIN, ({ payload }) => {
    member.assignment = payload.memberAssignment[topic] ?? [];
    member.joins += 1;
  });
  await member.consumer.connect();
  await member.consumer.subscribe({ topic, fromBeginning: true });
  await member.consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch }) => {
      for (const m of batch.messages) {
        consumed.push({ member: name, partition: batch.partition, offset: Number(m.offset), value: m.value.toString() });
      }
      // Commit what this batch consumed before taking more (the test checks committed offsets).
      await member.consumer.commitOffsets([
        { topic, partition: batch.partition, offset: String(BigInt(batch.lastOffset()) + 1n) },
      ]);
    },
  });
  return member;
}

function ownsAllPartitions(members) {
  const owned = members.flatMap((m) => m.assignment).sort((a, b) => a - b);
  return members.every((m) => m.assignment.length > 0)
    && owned.length === partitions && owned.every((p, i) => p === i);
}

const snapshot = (members) => Object.fromEntries(members.map((m) => [m.name, [...m.assignment]]));

const members = [];
for (let i = 0; i < 3; i++) members.push(await startMember(`kafkajs-${i}`));
await waitUntil(() => ownsAllPartitions(members), () => JSON.stringify(snapshot(members)));
const formed = snapshot(members);

await produce(0, first);
await waitUntil(() => consumed.length >= partitions * first, () => `${consumed.length} consumed`);

const leaving = members.pop();
await leaving.consumer.disconnect();
const recoveryMs = await waitUntil(() => ownsAllPartitions(members), () => JSON.stringify(snapshot(members)));
const afterLeave = snapshot(members);

await produce(first, second);
await waitUntil(() => consumed.length >= partitions * (first + second), () => `${consumed.length} consumed`);
for (const m of members) await m.consumer.disconnect();

await produce(first + second, resume);
const resumer = await startMember("kafkajs-resumer");
await waitUntil(() => consumed.length >= partitions * (first + second + resume), () => `${consumed.length} consumed`);
await resumer.consumer.disconnect();

console.log(JSON.stringify({ formed, afterLeave, recoveryMs, consumed }));
