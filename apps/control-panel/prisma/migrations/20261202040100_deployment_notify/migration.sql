-- Every write of a deployment row NOTIFYs its id on `tether_deployments` (issue 25): watchers of a deployment
-- (?wait=, /events) read their row when it changed instead of polling it. A trigger, so every writer is
-- covered whatever its version: the panel's own writes and the other panels' arrive the same way (delivered
-- at commit; one notification per id per transaction). Panels of the previous release do not listen and poll
-- as before. Nothing existing changes.

CREATE FUNCTION "tether_notify_deployment"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('tether_deployments', COALESCE(NEW."id", OLD."id"));
  RETURN NULL;
END
$$;

CREATE TRIGGER "deployments_notify" AFTER UPDATE OR DELETE ON "deployments"
  FOR EACH ROW EXECUTE FUNCTION "tether_notify_deployment"();
