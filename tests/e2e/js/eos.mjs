// kafkajs's consume-transform-produce loop through kgc: one consumer (read_committed, no
// auto-commit) in GROUP copies SOURCE to TARGET, up to 40 records of a batch in each
// transaction of a transactional producer: the records sent, then their next offset added
// with `sendOffsets` (AddOffsetsToTxn, then TxnOffsetCommit), then committed. Every third
// transaction is aborted instead, and the partition rewound to what the group has committed,
// as asked through kgc (an aborted offset kgc let through would skip records).
//
// Usage: node eos.mjs BOOTSTRAP SOURCE TARGET GROUP RECORDS
// Prints one JSON line ({"committed", "aborted", "transactions"}) once RECORDS went out in
// committed transactions; any failure exits non-zero.
import { client, limitRun, waitUntil } from "./common.mjs";

const [bootstrap, source, target, groupId, recordsArg] = process.argv.slice(2);
const records = Number(recordsArg);
const PER_TRANSACTION = 40;
limitRun(90_000, "kafkajs exactly-once copy");

const kafka = client(bootstrap);
const admin = kafka.admin();
const producer = kafka.producer({ transactionalId: `kafkajs-copier-${groupId}`, idempotent: true,
                                  maxInFlightRequests: 1 });
const consumer = kafka.consumer({ groupId, readUncommitted: false, maxWaitTimeInMs: 100 });
let committed = 0, aborted = 0, transactions = 0;
let failure = null;

async function committedOffset(partition) {
  const [{ partitions }] = await admin.fetchOffsets({ groupId, topics: [source] });
  const offset = Number(partitions.find((p) => p.partition === partition).offset);
  return offset >= 0 ? offset : 0;
}

await Promise.all([admin.connect(), producer.connect(), consumer.connect()]);
await consumer.subscribe({ topic: source, fromBeginning: true });
await consumer.run({
  autoCommit: false,
  eachBatchAutoResolve: false,
  eachBatch: async ({ batch, resolveOffset }) => {
    for (let at = 0; at < batch.messages.length && !failure && committed < records; at += PER_TRANSACTION) {
      const messages = batch.messages.slice(at, at + PER_TRANSACTION);
      const last = messages[messages.length - 1].offset;
      try {
        const txn = await producer.transaction();
        await txn.send({ topic: target, messages: messages.map((m) => ({ value: m.value })) });
        await txn.sendOffsets({ consumerGroupId: groupId, topics: [{ topic: source, partitions: [
          { partition: batch.partition, offset: String(BigInt(last) + 1n) }] }] });
        transactions += 1;
        if (transactions % 3 === 0) {
          await txn.abort();
          aborted += messages.length;
          const offset = await committedOffset(batch.partition);
          consumer.seek({ topic: source, partition: batch.partition, offset: String(offset) });
          return;
        }
        await txn.commit();
        committed += messages.length;
        resolveOffset(last);
      } catch (err) {
        failure = err;
      }
    }
  },
});
await waitUntil(() => failure || committed >= records, () => `committed ${committed} of ${records}`, 80_000);
await consumer.disconnect();
await Promise.all([producer.disconnect(), admin.disconnect()]);
if (failure) throw failure;
console.log(JSON.stringify({ committed, aborted, transactions }));
