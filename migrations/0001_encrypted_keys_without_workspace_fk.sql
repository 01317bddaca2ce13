ALTER TABLE "encrypted_keys" DROP CONSTRAINT "encrypted_keys_workspace_id_workspaces_id_fk";
