// kafkajs for the cut-over test (tests/e2e/test_adoption.py): three consumers of GROUP form
// a group at BOOTSTRAP (Tansu directly, or kgc), then the script produces COUNT records per
// partition from sequence FROM, and the consumers take them, each batch committed before
// the next; then they leave one at a time.
//
// Usage: node cutover.mjs BOOTSTRAP TOPIC GROUP PARTITIONS FROM COUNT
// Prints one JSON line: when the group formed (ms since the epoch) and what each consumer
// received. Every wait is bounded.
import { Kafka, logLevel } from "kafkajs";

const [bootstrap, topic, groupId, partitionsArg, fromArg, countArg] = process.argv.slice(2);
const [partitions, from, count] = [partitionsArg, fromArg, countArg].map(Number);
const WAIT_MS = 45_000;

setTimeout(() => {
  console.error("kafkajs cut-over: overall time limit reached");
  process.exit(2);
}, 100_000).unref();

process.env.KAFKAJS_NO_PARTITIONER_WARNING = "1";
const kafka = new Kafka({ clientId: "kgc-e2e-kafkajs", brokers: [bootstrap], logLevel: logLevel.WARN });
const consumed = [];

async function waitUntil(condition, what) {
  const start = Date.now();
  while (!condition()) {
    if (Date.now() - start > WAIT_MS) throw new Error(`not after ${WAIT_MS} ms: ${what()}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

async function startMember(name) {
  const member = { name, assignment: [], consumer: kafka.consumer({
    groupId, sessionTimeout: 6000, heartbeatInterval: 100, maxWaitTimeInMs: 100, retry: { retries: 30 } }) };
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

const members = [];
for (let i = 0; i < 3; i++) members.push(await startMember(`${groupId}-${bootstrap}-${i}`));
// Every partition owned once by the running members, each owning some.
function formed(running) {
  const owned = running.flatMap((m) => m.assignment).sort((a, b) => a - b);
  return running.every((m) => m.assignment.length > 0) && owned.length === partitions
    && owned.every((p, i) => p === i);
}
await waitUntil(() => formed(members), () => JSON.stringify(members.map((m) => m.assignment)));
const formedAtMs = Date.now();

const producer = kafka.producer({ maxInFlightRequests: 1 });
await producer.connect();
const messages = [];
for (let seq = from; seq < from + count; seq++) {
  for (let p = 0; p < partitions; p++) messages.push({ partition: p, value: `${p}:${seq}` });
}
await producer.send({ topic, acks: -1, messages });
await producer.disconnect();

await waitUntil(() => consumed.length >= partitions * count, () => `${consumed.length} consumed`);
// One at a time, each once the others have taken over its partitions, as a rolling restart
// does: Tansu's coordinator keeps naming a departed leader if the leader leaves while the
// group is rebalancing, and such a group never forms again.
for (let i = 0; i < members.length; i++) {
  await members[i].consumer.disconnect();
  const rest = members.slice(i + 1);
  if (rest.length) await waitUntil(() => formed(rest), () => JSON.stringify(rest.map((m) => m.assignment)));
}
console.log(JSON.stringify({ formedAtMs, consumed }));
