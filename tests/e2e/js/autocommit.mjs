// kafkajs with its default auto-commit through kgc: one consumer joins GROUP and reads TOPIC
// with `run({ eachMessage })` and nothing else set, so kafkajs commits what it resolved after
// each batch, by itself. It prints one JSON line, {"consumed": [{partition, offset, value}]},
// once it has read COUNT records, then keeps running (its commits are what the test checks)
// until its stdin closes, when it disconnects and exits 0. tests/e2e/test_kafkajs.py judges it.
//
// Usage: node autocommit.mjs BOOTSTRAP TOPIC GROUP COUNT
// Every wait is bounded; any failure exits non-zero.
import { client, limitRun } from "./common.mjs";

const [bootstrap, topic, groupId, countArg] = process.argv.slice(2);
const count = Number(countArg);
limitRun(90_000, "kafkajs autocommit");

const consumer = client(bootstrap).consumer({ groupId });
const consumed = [];
await consumer.connect();
await consumer.subscribe({ topic, fromBeginning: true });
await consumer.run({
  eachMessage: async ({ partition, message }) => {
    consumed.push({ partition, offset: Number(message.offset), value: message.value.toString() });
    if (consumed.length === count) console.log(JSON.stringify({ consumed }));
  },
});
process.stdin.resume();
await new Promise((resolve) => process.stdin.on("end", resolve));
await consumer.disconnect();
process.exit(0);
