import { defineConfig } from "drizzle-kit";

// Migrations are generated from src/storage/schema.ts and committed; the same SQL is applied to PGlite and PostgreSQL.
export default defineConfig({
  dialect: "postgresql",
  schema: "./src/storage/schema.ts",
  out: "./migrations",
});
