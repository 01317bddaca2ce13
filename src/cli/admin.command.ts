import { parseArgs } from "node:util";
import { loadCliEnv } from "../config.js";
import { type CallResult, DEFAULT_URL, getJson, parseBaseUrl, postJson } from "./http.js";

export const ADMIN_HELP = `Usage: keyhaven admin <command> [options]

Manages workspaces, root keys and failed migrations through the operator routes of a running server (see docs/api.md, "Operator routes").

Commands:
  workspace create --name <name>       Create a workspace; prints its id.
  workspace list                       List the workspaces: id, state, name (every page).
  workspace disable <workspaceId>      Disable a workspace: its root keys and its keys' verifications are refused.
  workspace enable <workspaceId>       Enable it again.
  root-key create --workspace <workspaceId> --permission <p> [--permission <p> ...] [--name <name>]
  root-key create --workspace <workspaceId> --no-permissions [--name <name>]
                                       Create a root key (e.g. --permission '*'; several permissions may also be
                                       given comma-separated); prints its id and the key, which is shown only this
                                       once. --no-permissions creates a key without any permission: it
                                       authenticates, but every route that needs a permission refuses it (403
                                       INSUFFICIENT_PERMISSIONS). One of the two is required.
  root-key list --workspace <workspaceId>
                                       List a workspace's root keys: id, start, permissions, name (never the key).
  root-key delete <keyId>              Delete a root key: it is refused from its next call on.
  migration retry --workspace <workspaceId> <migrationId>
                                       Queue again the batches of an enqueueKeys migration that failed as a
                                       whole (an error retrying could not fix); prints how many.

Options:
  --admin-token <token>    Operator token. Default: the KEYHAVEN_ADMIN_TOKEN environment variable (preferred: a
                           command-line argument is visible to other users of the machine).
  --url <url>              The keyhaven server. Default: ${DEFAULT_URL}
  --json                   Print the server's JSON answer instead of text (a list: one JSON array of every item).
  -h, --help               Show this help.

Exit codes: 0 done, 1 refused by the server or the server unreachable, 2 usage error.
`;

const OPTIONS = {
  "admin-token": { type: "string" },
  url: { type: "string" },
  json: { type: "boolean" },
  name: { type: "string" },
  workspace: { type: "string" },
  permission: { type: "string", multiple: true },
  "no-permissions": { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const;

class UsageError extends Error {}

type Request =
  | { path: string; body: Record<string, unknown>; print: (answer: Record<string, unknown>) => string }
  | {
      /** A list route read page by page until its last (GET, `cursor`); all its items printed, one line each. */
      list: string;
      query: Record<string, string>;
      /** The answer's field that holds a page's items. */
      items: string;
      line: (item: Record<string, unknown>) => string;
    };

/** Most pages a list command reads (100 items each): a server that never ends its list cannot hold the command. */
const MAX_LIST_PAGES = 10_000;

/** `keyhaven admin …`; returns the exit code. */
export async function adminCommand(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true });
  } catch (err) {
    console.error(`keyhaven admin: ${(err as Error).message}\n\n${ADMIN_HELP}`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help || positionals.length === 0) {
    if (values.help) {
      console.log(ADMIN_HELP);
      return 0;
    }
    console.error(ADMIN_HELP);
    return 2;
  }

  let request: Request;
  let baseUrl: string;
  let token: string;
  try {
    request = buildRequest(positionals, values);
    baseUrl = parseBaseUrl(values.url ?? DEFAULT_URL);
    const t = values["admin-token"]?.trim() || loadCliEnv().adminToken;
    if (!t) throw new UsageError("an admin token is required: set KEYHAVEN_ADMIN_TOKEN or pass --admin-token");
    token = t;
  } catch (err) {
    console.error(`keyhaven admin: ${(err as Error).message}`);
    return 2;
  }

  if ("list" in request) return listAll(baseUrl, token, request, values.json === true);
  const res = await postJson(baseUrl, request.path, token, JSON.stringify(request.body), 30_000);
  if (failed(baseUrl, res)) return 1;
  const answer = (res.body ?? {}) as Record<string, unknown>;
  console.log(values.json ? JSON.stringify(answer) : request.print(answer));
  return 0;
}

/** Says why a call failed (unreachable, or the server's code and message), if it did. */
function failed(baseUrl: string, res: CallResult): res is Exclude<CallResult, { kind: "ok" }> {
  if (res.kind === "network") console.error(`keyhaven admin: ${baseUrl} did not answer: ${res.message}`);
  else if (res.kind === "error") console.error(`keyhaven admin: ${res.status} ${res.code}: ${res.message}`);
  return res.kind !== "ok";
}

/** Reads every page of a list route and prints its items (a JSON array with --json); returns the exit code. */
async function listAll(baseUrl: string, token: string, request: Extract<Request, { list: string }>, json: boolean): Promise<number> {
  const all: Record<string, unknown>[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < MAX_LIST_PAGES; page++) {
    const res = await getJson(baseUrl, request.list, token, { ...request.query, limit: "100", ...(cursor && { cursor }) }, 30_000);
    if (failed(baseUrl, res)) return 1;
    const answer = (res.body ?? {}) as Record<string, unknown>;
    const items = answer[request.items];
    if (!Array.isArray(items)) {
      console.error(`keyhaven admin: ${request.list} answered without its "${request.items}" list`);
      return 1;
    }
    all.push(...(items as Record<string, unknown>[]));
    const next = answer.cursor;
    if (typeof next !== "string" || next === cursor) {
      console.log(json ? JSON.stringify(all) : all.map(request.line).join("\n") || `(no ${request.items})`);
      return 0;
    }
    cursor = next;
  }
  console.error(`keyhaven admin: ${request.list} did not end after ${MAX_LIST_PAGES} pages`);
  return 1;
}

type Values = { name?: string; workspace?: string; permission?: string[]; "no-permissions"?: boolean };

function buildRequest(positionals: string[], values: Values): Request {
  const [resource, action, ...rest] = positionals;
  const one = (what: string) => {
    if (rest.length !== 1 || !rest[0]!.trim()) throw new UsageError(`${resource} ${action} takes one argument: <${what}>`);
    return rest[0]!.trim();
  };
  const none = () => {
    if (rest.length > 0) throw new UsageError(`${resource} ${action} takes no argument, got ${JSON.stringify(rest[0])}`);
  };
  if (resource === "workspace") {
    if (action === "create") {
      none();
      if (!values.name?.trim()) throw new UsageError("workspace create needs --name <name>");
      return {
        path: "/v1/workspaces.createWorkspace",
        body: { name: values.name },
        print: (a) => String(a.workspaceId),
      };
    }
    if (action === "list") {
      none();
      return {
        list: "/v1/workspaces.listWorkspaces",
        query: {},
        items: "workspaces",
        line: (w) => `${String(w.id)}  ${w.enabled ? "enabled " : "disabled"}  ${String(w.name)}`,
      };
    }
    if (action === "disable" || action === "enable") {
      const workspaceId = one("workspaceId");
      return {
        path: "/v1/workspaces.updateWorkspace",
        body: { workspaceId, enabled: action === "enable" },
        print: () => `workspace ${workspaceId} ${action}d`,
      };
    }
  }
  if (resource === "root-key") {
    if (action === "create") {
      none();
      if (!values.workspace?.trim()) throw new UsageError("root-key create needs --workspace <workspaceId>");
      const permissions = (values.permission ?? [])
        .flatMap((p) => p.split(","))
        .map((p) => p.trim())
        .filter(Boolean);
      // "No permissions" is said explicitly: a forgotten --permission must not quietly make a key that can do nothing.
      if (values["no-permissions"]) {
        if (values.permission !== undefined) {
          throw new UsageError("root-key create takes either --permission or --no-permissions, not both");
        }
      } else if (permissions.length === 0) {
        throw new UsageError(
          "root-key create needs at least one --permission (for example --permission '*'), or --no-permissions for a key without any",
        );
      }
      return {
        path: "/v1/rootKeys.createRootKey",
        body: { workspaceId: values.workspace.trim(), permissions, ...(values.name ? { name: values.name } : {}) },
        // The one place the CLI prints a secret: the new key is its output, and the server will not show it again.
        print: (a) => `keyId: ${String(a.keyId)}\nkey:   ${String(a.key)}\n(the key is shown only this once)`,
      };
    }
    if (action === "list") {
      none();
      if (!values.workspace?.trim()) throw new UsageError("root-key list needs --workspace <workspaceId>");
      return {
        list: "/v1/rootKeys.listRootKeys",
        query: { workspaceId: values.workspace.trim() },
        items: "rootKeys",
        // The key's start and permissions, never the key (the server holds only its hash).
        line: (k) =>
          `${String(k.id)}  ${String(k.start)}…  ${(k.permissions as string[]).join(",") || "(no permissions)"}${k.name ? `  ${String(k.name)}` : ""}`,
      };
    }
    if (action === "delete") {
      const keyId = one("keyId");
      return { path: "/v1/rootKeys.deleteRootKey", body: { keyId }, print: () => `root key ${keyId} deleted` };
    }
  }
  if (resource === "migration" && action === "retry") {
    const migrationId = one("migrationId");
    if (!values.workspace?.trim()) throw new UsageError("migration retry needs --workspace <workspaceId>");
    return {
      path: "/v1/migrations.retryMigration",
      body: { workspaceId: values.workspace.trim(), migrationId },
      print: (a) => `${String(a.batches)} failed batch(es) of migration ${migrationId} queued again`,
    };
  }
  throw new UsageError(`unknown admin command: ${positionals.slice(0, 2).join(" ")} (see keyhaven admin --help)`);
}
