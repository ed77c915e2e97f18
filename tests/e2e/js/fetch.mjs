// kafkajs fetching bulk data through kgc: one consumer in a group of its own reads a topic
// from the beginning and checks every record as tests/e2e/throughput.py's SequenceCheck
// does: "<partition>:<sequence>:" then padding to RECORD_BYTES, each partition's sequence
// 0, 1, 2, ... with nothing missing, repeated or out of order.
//
// Usage: node fetch.mjs BOOTSTRAP TOPIC GROUP RECORDS PARTITIONS RECORD_BYTES
// Prints one JSON line ({"received": N}) once RECORDS arrived; any failure exits non-zero.
import { Kafka, logLevel } from "kafkajs";

const [bootstrap, topic, groupId, recordsArg, partitionsArg, recordBytesArg] = process.argv.slice(2);
const [records, partitions, recordBytes] = [recordsArg, partitionsArg, recordBytesArg].map(Number);

setTimeout(() => {
  console.error(`kafkajs fetch: time limit reached with ${received} of ${records} records`);
  process.exit(2);
}, 120_000).unref();

const kafka = new Kafka({ clientId: "kgc-e2e-kafkajs-fetch", brokers: [bootstrap], logLevel: logLevel.WARN });
const consumer = kafka.consumer({ groupId, maxWaitTimeInMs: 100 });
const nextSeq = new Array(partitions).fill(0);
let received = 0;
let done;
const finished = new Promise((resolve, reject) => { done = { resolve, reject }; });

await consumer.connect();
await consumer.subscribe({ topic, fromBeginning: true });
await consumer.run({
  autoCommit: false,
  eachBatch: async ({ batch }) => {
    try {
      for (const m of batch.messages) {
        const [partition, seq] = m.value.toString("latin1", 0, 32).split(":", 2).map(Number);
        if (partition !== batch.partition || seq !== nextSeq[batch.partition] || m.value.length !== recordBytes) {
          throw new Error(`partition ${batch.partition} expected ${nextSeq[batch.partition]}, got ` +
                          `${partition}:${seq} (${m.value.length} bytes)`);
        }
        nextSeq[batch.partition] += 1;
        received += 1;
      }
      if (received >= records) done.resolve();
    } catch (error) {
      done.reject(error);
    }
  },
});
try {
  await finished;
} finally {
  await consumer.disconnect();
}
console.log(JSON.stringify({ received }));
