// kafkajs through kgc: three consumers form a group, consume, one leaves, the other two take
// over, everyone commits, and a new consumer resumes at the committed offsets.
//
// Usage: node group.mjs BOOTSTRAP TOPIC GROUP PARTITIONS FIRST SECOND RESUME
// The topic must exist. The script produces (kafkajs producer, acks=all, one request in
// flight, through kgc) values "<partition>:<sequence>" and prints one JSON line on stdout with what each
// consumer received and what it saw of the group; tests/e2e/test_kafkajs.py judges it.
// Every wait is bounded; any failure exits non-zero.
import { client, limitRun, ownsAllPartitions, produceSequenced, startMember, waitUntil } from "./common.mjs";

const [bootstrap, topic, groupId, partitionsArg, firstArg, secondArg, resumeArg] = process.argv.slice(2);
const partitions = Number(partitionsArg);
const [first, second, resume] = [firstArg, secondArg, resumeArg].map(Number);
const WAIT_MS = 30_000;
limitRun(90_000, "kafkajs e2e");

const kafka = client(bootstrap);
const consumed = [];
const member = (name) => startMember(kafka, { groupId, topic, name, consumed, retries: 10 });
const snapshot = (members) => Object.fromEntries(members.map((m) => [m.name, [...m.assignment]]));
const formed = (members) => waitUntil(() => ownsAllPartitions(members, partitions),
  () => JSON.stringify(snapshot(members)), WAIT_MS);
const consumedAll = (n) => waitUntil(() => consumed.length >= partitions * n, () => `${consumed.length} consumed`, WAIT_MS);

const members = [];
for (let i = 0; i < 3; i++) members.push(await member(`kafkajs-${i}`));
await formed(members);
const formedAssignment = snapshot(members);

await produceSequenced(kafka, topic, partitions, 0, first);
await consumedAll(first);

const leaving = members.pop();
await leaving.consumer.disconnect();
const recoveryMs = await formed(members);
const afterLeave = snapshot(members);

await produceSequenced(kafka, topic, partitions, first, second);
await consumedAll(first + second);
for (const m of members) await m.consumer.disconnect();

await produceSequenced(kafka, topic, partitions, first + second, resume);
const resumer = await member("kafkajs-resumer");
await consumedAll(first + second + resume);
await resumer.consumer.disconnect();

console.log(JSON.stringify({ formed: formedAssignment, afterLeave, recoveryMs, consumed }));
