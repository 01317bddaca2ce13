-- v1's IP allow-list of an API: comma-separated addresses; keys.verifyKey answers FORBIDDEN to a caller not listed.
ALTER TABLE "apis" ADD COLUMN "ip_whitelist" text;