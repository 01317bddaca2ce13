import { defineConfig } from "drizzle-kit";

// Migrations are generated from src/db/schema.ts and committed; the same SQL is applied to PGlite and PostgreSQL.
export default defineConfig({
  dialect: "postgresql",
  schema: "./src/db/schema.ts",
  out: "./migrations",
});
