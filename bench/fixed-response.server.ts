/**
 * The ceiling for bench/verify.bench.ts: a minimal Fastify 5 server with one POST route, `/v1/keys.verifyKey`,
 * that parses the JSON body (Fastify's default parser, as keyhaven's requests go through) and answers a fixed,
 * pre-serialized JSON body of about 300 bytes shaped like a verify answer. No logging, no validation, no
 * database: what one Node process serving HTTP through Fastify does at best on this machine.
 *
 * Run:   PORT=8081 node --import tsx bench/fixed-response.server.ts      (HOST defaults to 127.0.0.1)
 */
import Fastify from "fastify";

const ANSWER = JSON.stringify({
  requestId: "req_4fJ9sQm2XvTc8bLpNw3Ry7",
  valid: true,
  code: "VALID",
  keyId: "key_7dKp2Vx9QmLs4RtYw8Bn3c",
  name: "bench key",
  ownerId: "user_2b8f4c1e9a7d",
  remaining: 1999999999,
  ratelimit: { limit: 1000000000, remaining: 999999999, reset: 1767225600000 },
  enabled: true,
  permissions: [],
  roles: [],
});

const port = Number(process.env.PORT ?? 8081);
const host = process.env.HOST ?? "127.0.0.1";

const app = Fastify({ logger: false });
app.post("/v1/keys.verifyKey", async (_req, reply) => {
  return reply.type("application/json; charset=utf-8").send(ANSWER);
});

await app.listen({ port, host });

let closing = false;
const shutdown = () => {
  if (closing) process.exit(1);
  closing = true;
  app.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
};
process.on("SIGINT", shutdown);
process.on("SIGTERM", shutdown);
