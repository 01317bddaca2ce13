import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, createHarness, type Harness, type Tenant } from "./helper.js";
import { consoleClient, signedIn, textOf } from "./console-client.js";

describe("console sessions", () => {
  let h: Harness;
  let t: Tenant;
  beforeAll(async () => {
    h = await createHarness({ KEYHAVEN_ADMIN_TOKEN: ADMIN_TOKEN });
    t = await h.tenant();
  });
  afterAll(() => h?.close());

  it("sends an unsigned visitor to the sign-in page, keeping where it was going", async () => {
    const res = await consoleClient(h.app).get("/console/?x=1");
    expect(res.status).toBe(303);
    expect(res.location).toBe("/console/sign-in?next=%2Fconsole%2F%3Fx%3D1");
  });

  it("signs in with a root key, shows its workspace, and signs out for good", async () => {
    const c = await signedIn(h.app, t.rootKey);
    const page = await c.get("/console/");
    expect(page.status).toBe(200);
    expect(textOf(page.html)).toContain(t.rootKeyId);
    expect(page.html).not.toContain(t.rootKey);
    const cookie = c.cookie!;
    expect((await c.post("/console/sign-out")).status).toBe(303);
    expect(c.cookie).toBeUndefined();
    c.cookie = cookie;
    expect((await c.get("/console/")).status).toBe(303);
  });

  it("signs the operator in to the operator's pages", async () => {
    const c = consoleClient(h.app);
    const res = await c.post("/console/sign-in", { secret: ADMIN_TOKEN });
    expect(res.status).toBe(303);
    expect(res.location).toBe("/console/operator/workspaces");
  });
});
