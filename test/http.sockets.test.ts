import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHarness, type Harness } from "./helper.js";

let h: Harness;
let port: number;
beforeAll(async () => {
  h = await createHarness();
  const url = await h.app.listen({ port: 0, host: "127.0.0.1" });
  port = Number(new URL(url).port);
});
afterAll(() => h.close());

function rawRequest(text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1", () => socket.write(text));
    let data = "";
    socket.on("data", (d) => (data += d.toString()));
    socket.on("end", () => resolve(data));
    socket.on("error", reject);
  });
}

describe("requests the HTTP parser rejects", () => {
  it("are answered with the error envelope and a request id, not Fastify's default body", async () => {
    const res = await rawRequest(
      "POST /v1/apis.createApi HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer a\u0001b\r\nContent-Length: 2\r\n\r\n{}",
    );
    expect(res).toMatch(/^HTTP\/1.1 400 /);
    expect(res).toMatch(/Unkey-Request-Id: req_/);
    const body = JSON.parse(res.slice(res.indexOf("\r\n\r\n") + 4));
    expect(body.error).toMatchObject({ code: "BAD_REQUEST", message: "the request is not valid HTTP" });
    expect(body.error.docs).toMatch(/\/docs\/errors\/BAD_REQUEST$/);
  });

  it("keeps serving after a malformed request", async () => {
    await rawRequest("GARBAGE\r\n\r\n");
    const ok = await fetch(`http://127.0.0.1:${port}/v1/liveness`);
    expect(ok.status).toBe(200);
  });
});
