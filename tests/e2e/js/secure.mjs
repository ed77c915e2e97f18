// kafkajs through a kgc with TLS and SASL (or mTLS): one consumer joins a group, consumes
// COUNT records from TOPIC, commits and leaves.
//
// Usage: node secure.mjs BOOTSTRAP TOPIC GROUP COUNT SECURITY_JSON
// SECURITY_JSON: {"ca": file, "cert": file?, "key": file?, "mechanism": "SCRAM-SHA-512"|"PLAIN"?,
// "username"?, "password"?}. Prints one JSON line: {"consumed": n}. Every wait is bounded;
// any failure (an authentication error included) exits non-zero with the error on stderr.
import { readFileSync } from "node:fs";
import { Kafka, logLevel } from "kafkajs";

const [bootstrap, topic, groupId, countArg, securityArg] = process.argv.slice(2);
const count = Number(countArg);
const security = JSON.parse(securityArg);

setTimeout(() => {
  console.error("kafkajs secure: overall time limit reached");
  process.exit(2);
}, 45_000).unref();

const ssl = { ca: [readFileSync(security.ca, "utf-8")] };
if (security.cert) {
  ssl.cert = readFileSync(security.cert, "utf-8");
  ssl.key = readFileSync(security.key, "utf-8");
}
const sasl = security.mechanism
  ? { mechanism: security.mechanism.toLowerCase(), username: security.username, password: security.password }
  : undefined;
const kafka = new Kafka({ clientId: "kgc-secure-kafkajs", brokers: [bootstrap], ssl, sasl, logLevel: logLevel.NOTHING,
                          retry: { retries: 2 } });

const consumer = kafka.consumer({ groupId, sessionTimeout: 6000, heartbeatInterval: 200 });
let consumed = 0;
try {
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  let done;
  const finished = new Promise((resolve) => { done = resolve; });
  await consumer.run({
    eachMessage: async () => {
      consumed += 1;
      if (consumed >= count) done();
    },
  });
  await finished;
  await consumer.commitOffsets([{ topic, partition: 0, offset: String(count) }]);
  await consumer.disconnect();
  console.log(JSON.stringify({ consumed }));
  process.exit(0);
} catch (error) {
  console.error(`${error.name}: ${error.message} ${error.type ?? ""}`);
  process.exit(1);
}
