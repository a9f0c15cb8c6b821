-- Route shapes of issue 34 (docs/api.md, "Routes"): a path prefix is stored in one form, the form the
-- static proxy serves. Routes stored by older panels in another spelling of the same prefix are rewritten:
-- "/" is the whole domain (NULL), one trailing "/" goes, letters are lowercased (matching is without case).
-- A rewrite that would collide with a route already in the normal form (or with another row rewritten to
-- it) is left out: that row keeps its old spelling, as does a prefix outside the shape (four or more
-- segments, other characters); both stay listed by GET /v1/routes and must be detached and attached again.
WITH normal AS (
    SELECT "id", "domain", "path_prefix",
        CASE WHEN "path_prefix" = '/' THEN NULL ELSE lower(regexp_replace("path_prefix", '(.)/$', '\1')) END AS "target",
        "created_at"
    FROM "routes"
    WHERE "path_prefix" IS NOT NULL
), wanted AS (
    SELECT "id", "target",
        row_number() OVER (PARTITION BY "domain", "target" ORDER BY "created_at", "id") AS "rank"
    FROM normal n
    WHERE n."target" IS DISTINCT FROM n."path_prefix"
        AND NOT EXISTS (
            SELECT 1 FROM "routes" o
            WHERE o."domain" = n."domain" AND o."path_prefix" IS NOT DISTINCT FROM n."target"
        )
)
UPDATE "routes" r SET "path_prefix" = w."target"
FROM wanted w
WHERE r."id" = w."id" AND w."rank" = 1;
