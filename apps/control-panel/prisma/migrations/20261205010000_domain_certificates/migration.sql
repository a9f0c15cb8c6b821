-- Issue 37, one certificate issuer per domain (capability certificates.share): the node that obtains a domain's
-- certificate for every node serving it, and the certificate it last reported with its private key sealed under the
-- secrets keyring (like service_secrets; key id, nonce, ciphertext with GCM's tag). A row is written when an issuer
-- is chosen (certificate columns null until it reports) and kept while the issuer moves, so the certificate in
-- hand is shared until the new issuer reports its own. Expand only: older panels neither read nor write it.
ALTER TABLE "nodes" ADD COLUMN "challenge_port" INTEGER;

CREATE TABLE "domain_certificates" (
    "domain" TEXT NOT NULL,
    "issuer_node_id" TEXT NOT NULL,
    "certificate_pem" TEXT,
    "key_id" TEXT,
    "key_nonce" BYTEA,
    "key_ciphertext" BYTEA,
    "not_after" TIMESTAMPTZ(3),
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "domain_certificates_pkey" PRIMARY KEY ("domain")
);

CREATE INDEX "domain_certificates_issuer_node_id_idx" ON "domain_certificates"("issuer_node_id");
CREATE INDEX "domain_certificates_key_id_idx" ON "domain_certificates"("key_id");

ALTER TABLE "domain_certificates" ADD CONSTRAINT "domain_certificates_issuer_node_id_fkey" FOREIGN KEY ("issuer_node_id") REFERENCES "nodes"("id") ON DELETE CASCADE ON UPDATE CASCADE;
