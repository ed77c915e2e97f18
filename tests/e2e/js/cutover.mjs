// kafkajs for the cut-over test (tests/e2e/test_adoption.py): three consumers of GROUP form
// a group at BOOTSTRAP (Tansu directly, or kgc), then the script produces COUNT records per
// partition from sequence FROM, and the consumers take them, each batch committed before
// the next; then they leave one at a time.
//
// Usage: node cutover.mjs BOOTSTRAP TOPIC GROUP PARTITIONS FROM COUNT
// Prints one JSON line: when the group formed (ms since the epoch) and what each consumer
// received. Every wait is bounded.
import { client, limitRun, ownsAllPartitions, produceSequenced, startMember, waitUntil } from "./common.mjs";

const [bootstrap, topic, groupId, partitionsArg, fromArg, countArg] = process.argv.slice(2);
const [partitions, from, count] = [partitionsArg, fromArg, countArg].map(Number);
const WAIT_MS = 45_000;
limitRun(100_000, "kafkajs cut-over");

const kafka = client(bootstrap);
const consumed = [];
const formed = (running) => ownsAllPartitions(running, partitions);
const assignments = (running) => () => JSON.stringify(running.map((m) => m.assignment));

const members = [];
for (let i = 0; i < 3; i++) {
  members.push(await startMember(kafka, { groupId, topic, name: `${groupId}-${bootstrap}-${i}`, consumed, retries: 30 }));
}
await waitUntil(() => formed(members), assignments(members), WAIT_MS);
const formedAtMs = Date.now();

await produceSequenced(kafka, topic, partitions, from, count);
await waitUntil(() => consumed.length >= partitions * count, () => `${consumed.length} consumed`, WAIT_MS);
// One at a time, each once the others have taken over its partitions, as a rolling restart
// does: Tansu's coordinator keeps naming a departed leader if the leader leaves while the
// group is rebalancing, and such a group never forms again.
for (let i = 0; i < members.length; i++) {
  await members[i].consumer.disconnect();
  const rest = members.slice(i + 1);
  if (rest.length) await waitUntil(() => formed(rest), assignments(rest), WAIT_MS);
}
console.log(JSON.stringify({ formedAtMs, consumed }));
