-- Raises what carry_out refused as a plain ERROR (PL/Python would prefix it with its exception class).
CREATE FUNCTION kcm_ddl.raise_refusal(refusal text[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF refusal IS NULL THEN RETURN; END IF;
  IF refusal[3] IS NULL THEN RAISE EXCEPTION USING MESSAGE = refusal[1], ERRCODE = refusal[2];
  ELSE RAISE EXCEPTION USING MESSAGE = refusal[1], ERRCODE = refusal[2], HINT = refusal[3];
  END IF;
END $$;

CREATE FUNCTION kcm_ddl.on_command_end() RETURNS event_trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM kcm_ddl.raise_refusal(kcm_ddl.carry_out('end'));
END $$;

CREATE FUNCTION kcm_ddl.on_sql_drop() RETURNS event_trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM kcm_ddl.raise_refusal(kcm_ddl.carry_out('drop'));
END $$;

CREATE EVENT TRIGGER kcm_ddl_command_end ON ddl_command_end
  WHEN TAG IN ('CREATE SCHEMA', 'CREATE TABLE', 'ALTER TABLE', 'ALTER FOREIGN TABLE')
  EXECUTE FUNCTION kcm_ddl.on_command_end();

CREATE EVENT TRIGGER kcm_ddl_sql_drop ON sql_drop
  WHEN TAG IN ('DROP TABLE', 'DROP FOREIGN TABLE', 'DROP SCHEMA')
  EXECUTE FUNCTION kcm_ddl.on_sql_drop();

GRANT USAGE ON SCHEMA kcm_ddl TO PUBLIC;
